"""MS-MQSD client procedure (3.1.4–3.1.7) on a ManualScheduler: every reply row, every timer row, the discards."""
import uuid

import pytest

from qm2qm.mqsd import codec as c
from qm2qm.mqsd.discovery import DiscoveryClient
from shared_adm.clock import ManualScheduler

from tests.mqsd.test_codec import CN, ENTERPRISE, OTHER_SITE, REPLY_OTHER_SITE, REPLY_SAME_SITE, REQUEST, REQUEST_ID

SITE = uuid.UUID("dcc51bf6-d4ad-4543-8739-71568e8f9128")
NET1, NET2 = "10.0.0.1", "10.0.1.1"


class Harness:
    def __init__(self, networks=(NET1,), ras=()):
        self.scheduler = ManualScheduler()
        self.sent: list[tuple[str, bytes]] = []
        self.results = []
        self.networks = list(networks)
        self.client = DiscoveryClient(ENTERPRISE, SITE, self.scheduler, lambda a, p: self.sent.append((a, p)),
                                      lambda: self.networks, is_remote_access=lambda a: a in ras,
                                      new_guid=lambda: REQUEST_ID)

    def start(self):
        self.client.get_directory_server_list(self.results.append)

    def reply(self, data, network=NET1):
        self.client.reply_received(data, network)

    @property
    def result(self):
        [result] = self.results
        return result


def other_site_reply(name="nt4pec", request_id=REQUEST_ID):
    return c.encode_reply(c.TopologyServerReply(request_id, (CN,), 0, OTHER_SITE, (c.ServerEntry(name),)))


def test_the_request_is_the_section_4_packet_broadcast_on_the_first_network():
    h = Harness()
    h.start()
    assert h.sent == [(NET1, REQUEST)] and h.client.current_network_index == 1 and h.scheduler.pending() == 1


def test_same_site_reply_on_the_last_network_completes_at_once_r3():
    h = Harness()
    h.start()
    h.reply(REPLY_SAME_SITE)
    assert h.result.success and h.result.connected_network_identifier_list == [CN]
    assert h.result.directory_server_list == [] and h.scheduler.pending() == 0
    assert h.client.valid_last_successful_network_address and h.client.last_successful_network_address == NET1
    h.reply(REPLY_OTHER_SITE)                                 # section 4: the later other-site reply is ignored
    assert len(h.results) == 1 and h.client.directory_server_list == []


def test_other_site_then_same_site_populates_from_the_kept_reply_r4_r3():
    h = Harness()
    h.start()
    h.reply(REPLY_OTHER_SITE)
    assert h.results == [] and h.client.last_topology_server_reply is not None and h.scheduler.pending() == 1
    h.scheduler.advance(10_000)
    h.reply(REPLY_SAME_SITE)
    assert h.result.success and h.result.directory_server_list == ["nt4pec"]
    assert h.result.connected_network_identifier_list == [CN]


def test_r4_restarts_the_15_second_timer_then_t3_completes():
    h = Harness()
    h.start()
    h.scheduler.advance(10_000)
    h.reply(REPLY_OTHER_SITE)
    h.scheduler.advance(14_999)
    assert h.results == []
    h.scheduler.advance(1)
    assert h.result.success and h.result.directory_server_list == ["nt4pec"]


def test_a_second_other_site_reply_on_the_last_network_completes_with_the_first_r5():
    h = Harness()
    h.start()
    h.reply(REPLY_OTHER_SITE)
    h.reply(other_site_reply("second"))
    assert h.result.success and h.result.directory_server_list == ["nt4pec"]


def test_no_reply_at_all_fails_after_15_seconds_t2():
    h = Harness()
    h.start()
    h.scheduler.advance(14_999)
    assert h.results == []
    h.scheduler.advance(1)
    assert not h.result.success and not h.client.valid_last_successful_network_address


def test_no_reply_moves_to_the_next_network_t1():
    h = Harness((NET1, NET2))
    h.start()
    h.scheduler.advance(15_000)
    assert [a for a, _ in h.sent] == [NET1, NET2] and h.client.current_network_index == 2
    h.reply(REPLY_SAME_SITE, NET1)                            # 3.1.5.2: not the current network -> discarded
    assert h.results == []
    h.reply(REPLY_SAME_SITE, NET2)
    assert h.result.success and h.client.last_successful_network_address == NET2


def test_same_site_reply_on_an_earlier_network_sends_the_next_request_r1_then_t3():
    h = Harness((NET1, NET2))
    h.start()
    h.reply(REPLY_SAME_SITE, NET1)
    assert [a for a, _ in h.sent] == [NET1, NET2] and h.client.topology_server_reply_received
    assert h.client.last_topology_server_reply is None        # emptied by the new request (3.1.5.1)
    h.scheduler.advance(15_000)
    assert h.result.success and h.result.connected_network_identifier_list == [CN]


def test_other_site_reply_with_one_kept_on_an_earlier_network_sends_the_next_request_r2():
    h = Harness((NET1, NET2))
    h.start()
    h.reply(REPLY_OTHER_SITE, NET1)                           # R4: kept
    h.reply(other_site_reply("second"), NET1)                 # R2
    assert [a for a, _ in h.sent] == [NET1, NET2]
    h.scheduler.advance(15_000)                               # T3 on the last network: the kept other-site reply
    assert h.result.success and h.result.directory_server_list == ["nt4pec"]


@pytest.mark.parametrize("data", [REPLY_SAME_SITE[:-1], REQUEST, other_site_reply(request_id=uuid.uuid4()), b""])
def test_improper_or_foreign_replies_are_discarded(data):
    h = Harness()
    h.start()
    h.reply(data)
    assert h.results == [] and h.client.last_topology_server_reply is None


def test_a_valid_last_network_completes_without_sending_unless_remote_access():
    h = Harness()
    h.start()
    h.reply(REPLY_SAME_SITE)
    h.results.clear()
    h.sent.clear()
    h.start()
    assert h.result.success and h.sent == []
    ras = Harness(ras=(NET1,))
    ras.client.valid_last_successful_network_address = True
    ras.start()
    assert ras.sent and ras.results == []


def test_no_network_address_fails_at_once():
    h = Harness(())
    h.start()
    assert not h.result.success and "no network" in h.result.reason and h.sent == []


def test_a_second_caller_joins_the_running_procedure():
    h = Harness()
    h.start()
    h.start()
    assert len(h.sent) == 1
    h.reply(REPLY_SAME_SITE)
    assert len(h.results) == 2 and all(r.success for r in h.results)


def test_a_failing_broadcast_still_runs_the_timer():
    h = Harness()

    def broken(address, packet):
        raise OSError("network unreachable")

    h.client._send = broken
    h.start()
    h.scheduler.advance(15_000)
    assert not h.result.success
