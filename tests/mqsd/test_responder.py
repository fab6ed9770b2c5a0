"""MS-MQSD server role (3.2.5.1) and the whole procedure over loopback UDP (127.0.0.1 only)."""
import asyncio
import errno
import socket
import uuid

import pytest

from qm2qm.mqsd import codec as c
from qm2qm.mqsd.discovery import DiscoveryClient, UdpDiscovery, discover
from qm2qm.mqsd.responder import Topology, build_reply, start_responder
from shared_adm.clock import ManualScheduler

from tests.mqsd.test_codec import (CLIENT_SITE, CN, ENTERPRISE, OTHER_SITE, REPLY_OTHER_SITE, REPLY_SAME_SITE,
                                   REQUEST)

HANG_GUARD_S = 30        # bound for a hung test, not a speed assertion
LOOPBACK = "127.0.0.1"


def test_same_site_request_gives_the_first_section_4_reply():
    topology = Topology(CLIENT_SITE, [CN], [c.ServerEntry("nt4pec")])
    assert c.encode_reply(build_reply(topology, c.decode_request(REQUEST))) == REPLY_SAME_SITE


def test_other_site_request_gives_the_second_section_4_reply():
    topology = Topology(OTHER_SITE, [CN], [c.ServerEntry("nt4pec")])
    assert c.encode_reply(build_reply(topology, c.decode_request(REQUEST))) == REPLY_OTHER_SITE


def test_ipx_request_sets_one_mask_bit_per_network():
    topology = Topology(CLIENT_SITE, [CN, uuid.uuid4(), uuid.uuid4()])
    request = c.decode_request(REQUEST + b"\x01\x00\x00\x00\x2a\x00\x00\x00")
    assert build_reply(topology, request).connected_network_mask == 0b111


@pytest.mark.parametrize("topology,reason", [
    (Topology(CLIENT_SITE, []), "ConnectedNetworkIdentifierList is empty"),
    (Topology(OTHER_SITE, [CN], []), "DirectoryServerList is empty"),
])
def test_an_adm_that_cannot_fill_a_valid_reply_answers_nothing(topology, reason):
    with pytest.raises(c.MqsdError, match=reason):
        build_reply(topology, c.decode_request(REQUEST))


def test_more_than_32_connected_networks_are_cut_to_32():
    topology = Topology(CLIENT_SITE, [uuid.uuid4() for _ in range(40)])
    assert len(build_reply(topology, c.decode_request(REQUEST)).connected_networks) == 32


async def _until(predicate):
    async def poll():
        while not predicate():
            await asyncio.sleep(0.001)
    await asyncio.wait_for(poll(), HANG_GUARD_S)


async def test_discovery_over_loopback_same_site():
    responder = await start_responder(Topology(CLIENT_SITE, [CN]), LOOPBACK, 0)
    try:
        result = await asyncio.wait_for(discover(ENTERPRISE, CLIENT_SITE, networks=[LOOPBACK], target=LOOPBACK,
                                                 port=responder.port), HANG_GUARD_S)
        assert result.success and result.connected_network_identifier_list == [CN]
        assert result.directory_server_list == [] and responder.answered == 1
    finally:
        responder.close()


async def test_discovery_over_loopback_other_site_waits_for_a_local_reply_then_takes_the_list():
    responder = await start_responder(Topology(OTHER_SITE, [CN], [c.ServerEntry("ds1"), c.ServerEntry("ds2")]),
                                      LOOPBACK, 0)
    scheduler = ManualScheduler()
    udp = UdpDiscovery(LOOPBACK, responder.port)
    client = DiscoveryClient(ENTERPRISE, CLIENT_SITE, scheduler, udp.send, lambda: [LOOPBACK])
    await udp.open([LOOPBACK], client)
    try:
        results = []
        client.get_directory_server_list(results.append)
        await _until(lambda: client.last_topology_server_reply is not None)   # R4: kept, timer restarted
        assert results == []
        scheduler.advance(15_000)                                             # T3
        [result] = results
        assert result.success and result.directory_server_list == ["ds1", "ds2"]
    finally:
        udp.close()
        responder.close()


async def test_responder_ignores_garbage_and_other_enterprises_and_keeps_answering():
    topology = Topology(CLIENT_SITE, [CN], enterprise_id=uuid.uuid4())
    responder = await start_responder(topology, LOOPBACK, 0)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((LOOPBACK, 0))
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        for junk in (b"", b"\x00\x01", b"\x00\x02" + bytes(60), REQUEST):     # REQUEST: wrong enterprise
            await loop.sock_sendto(sock, junk, (LOOPBACK, responder.port))
        await _until(lambda: responder.ignored == 4)
        topology.enterprise_id = ENTERPRISE
        await loop.sock_sendto(sock, REQUEST, (LOOPBACK, responder.port))
        data = await asyncio.wait_for(loop.sock_recv(sock, 2048), HANG_GUARD_S)
        assert data == REPLY_SAME_SITE and responder.answered == 1
    finally:
        sock.close()
        responder.close()
    await asyncio.wait_for(responder.closed.wait(), HANG_GUARD_S)


async def test_a_network_error_reopens_the_socket():
    responder = await start_responder(Topology(CLIENT_SITE, [CN]), LOOPBACK, 0)
    port = responder.port
    try:
        responder.error_received(OSError("simulated send failure"))
        await _until(lambda: responder.transport is not None and responder._reopening is None)
        assert responder.port == port
        result = await asyncio.wait_for(discover(ENTERPRISE, CLIENT_SITE, networks=[LOOPBACK], target=LOOPBACK,
                                                 port=port), HANG_GUARD_S)
        assert result.success
    finally:
        responder.close()


async def test_a_reply_its_destination_refuses_leaves_the_socket_open_and_a_source_port_0_is_not_answered():
    """A send error that belongs to one destination (EINVAL for a forged source port 0, unreachable, refused) is
    not the network error 3.2.5 reopens the socket for: a reopen dropped every request queued behind it."""
    responder = await start_responder(Topology(CLIENT_SITE, [CN]), LOOPBACK, 0)
    transport = responder.transport
    try:
        for code in (errno.EINVAL, errno.ECONNREFUSED, errno.EHOSTUNREACH):
            responder.error_received(OSError(code, "simulated"))
        assert responder.transport is transport and responder._reopening is None and responder.unsent == 3
        responder.datagram_received(REQUEST, (LOOPBACK, 0))
        assert (responder.answered, responder.ignored) == (0, 1)
        result = await asyncio.wait_for(discover(ENTERPRISE, CLIENT_SITE, networks=[LOOPBACK], target=LOOPBACK,
                                                 port=responder.port), HANG_GUARD_S)
        assert result.success and responder.answered == 1
    finally:
        responder.close()
