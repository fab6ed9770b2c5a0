"""MS-MQSD client role (3.1): Get Directory Server List (3.1.4.1) with the Wait For Response Timer (3.1.2.1),
the reply rules of 3.1.5.2, No Server Response (3.1.6.1) and the Populate events (3.1.7.1, 3.1.7.2).

``DiscoveryClient`` is sans-IO: time comes from an injected ``Scheduler`` (shared_adm.clock), packets leave
through ``send(network_address, packet)`` and arrive through ``reply_received(packet, network_address)``.
``UdpDiscovery`` binds one UDP socket per local network address and broadcasts on it; ``discover`` runs the
whole procedure once. Gaps of the spec and how they are resolved are in qm2qm/mqsd/DECISIONS.md.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from dataclasses import dataclass, field
from typing import Callable

from qm2qm.mqsd.codec import (MQSD_PORT, MqsdError, TopologyClientRequest, TopologyServerReply, decode_reply,
                              encode_request)
from shared_adm.clock import AsyncioScheduler, Scheduler

log = logging.getLogger(__name__)

WAIT_FOR_RESPONSE_MS = 15_000               # 3.1.2.1


@dataclass
class DiscoveryResult:
    """The outcome of Get Directory Server List: success, and the two lists as populated (3.1.7)."""
    success: bool
    directory_server_list: list[str] = field(default_factory=list)
    connected_network_identifier_list: list[uuid.UUID] = field(default_factory=list)
    reason: str = ""


class DiscoveryClient:
    """The MQSD client ADM (3.1.1) and its events. Not thread-safe: everything on the scheduler's thread."""

    def __init__(self, enterprise_id: uuid.UUID, site_id: uuid.UUID, scheduler: Scheduler,
                 send: Callable[[str, bytes], None], network_addresses: Callable[[], list[str]], *,
                 is_remote_access: Callable[[str], bool] = lambda address: False,
                 timeout_ms: int = WAIT_FOR_RESPONSE_MS, new_guid: Callable[[], uuid.UUID] = uuid.uuid4) -> None:
        self.site_id = site_id
        self.scheduler = scheduler
        self._send = send
        self._network_addresses = network_addresses
        self._is_remote_access = is_remote_access
        self.timeout_ms = timeout_ms
        self._new_guid = new_guid
        # 3.1.3 Initialization
        self.enterprise_id = enterprise_id
        self.valid_last_successful_network_address = False
        self.last_successful_network_address: str | None = None
        # 3.1.1 shared (LocalQueueManager) and private elements
        self.directory_server_list: list[str] = []
        self.connected_network_identifier_list: list[uuid.UUID] = []
        self.request_id: uuid.UUID | None = None
        self.last_topology_server_reply: TopologyServerReply | None = None
        self.topology_server_reply_received = False
        self.network_address_list: list[str] = []
        self.number_of_network_addresses = 0
        self.current_network_index = 0
        self._local_site_reply: TopologyServerReply | None = None     # kept past a new request's "L := empty"
        self._other_site_reply: TopologyServerReply | None = None
        self._timer = None
        self._waiters: list[Callable[[DiscoveryResult], None]] = []
        self.requests_sent = 0

    @property
    def in_progress(self) -> bool:
        """True while a Get Directory Server List has not completed."""
        return bool(self._waiters)

    # -------------------------------------------------------------- 3.1.4.1
    def get_directory_server_list(self, on_complete: Callable[[DiscoveryResult], None]) -> None:
        """Get Directory Server List (3.1.4.1); ``on_complete`` gets the result (a second caller joins the first)."""
        self._waiters.append(on_complete)
        if len(self._waiters) > 1:
            return
        self.network_address_list = list(self._network_addresses())
        self.number_of_network_addresses = len(self.network_address_list)
        if self.valid_last_successful_network_address and not any(
                self._is_remote_access(a) for a in self.network_address_list):
            self._complete(True, "last successful network address still valid")
            return
        if not self.network_address_list:
            self._complete(False, "no network address to broadcast on")
            return
        self.request_id = self._new_guid()
        self.current_network_index = 0
        self.topology_server_reply_received = False
        self._local_site_reply = self._other_site_reply = None
        self._send_request()

    async def discover(self) -> DiscoveryResult:
        """Get Directory Server List, awaited."""
        future = asyncio.get_running_loop().create_future()
        self.get_directory_server_list(lambda result: future.done() or future.set_result(result))
        return await future

    # -------------------------------------------------------------- 3.1.5.1
    def _send_request(self) -> None:
        self.current_network_index += 1
        self.last_topology_server_reply = None
        self._start_timer()
        packet = encode_request(TopologyClientRequest(self.enterprise_id, self.request_id, self.site_id))
        address = self.network_address_list[self.current_network_index - 1]
        self.requests_sent += 1
        try:
            self._send(address, packet)
        except OSError as exc:          # the timer still runs: No Server Response moves on (3.1.6.1)
            log.warning("MQSD: broadcast on %s failed: %s", address, exc)

    # -------------------------------------------------------------- 3.1.5.2
    def reply_received(self, data: bytes, network_address: str) -> None:
        """Receiving a TopologyServerReply (3.1.5.2)."""
        if not self.in_progress or self.current_network_index == 0:
            return
        if network_address != self.network_address_list[self.current_network_index - 1]:
            log.debug("MQSD: reply on %s, not the current network; discarded", network_address)
            return
        try:
            reply = decode_reply(data)
        except MqsdError as exc:
            log.debug("MQSD: improperly formatted reply on %s discarded: %s", network_address, exc)
            return
        if reply.correlation_id != self.request_id:
            log.debug("MQSD: reply for %s, not request %s; discarded", reply.correlation_id, self.request_id)
            return
        last = self.current_network_index == self.number_of_network_addresses
        local_site = reply.servers is None
        held = self.last_topology_server_reply
        if not last and local_site:
            self.last_topology_server_reply = reply
            self._local_site_reply = reply
            self.topology_server_reply_received = True
            self._succeeded_on(network_address)
            self._stop_timer()
            self._send_request()
        elif not last and held is not None and not local_site:
            self._send_request()
        elif last and local_site:
            self._stop_timer()
            self._succeeded_on(network_address)
            self._finish(held if held is not None else reply)
        elif held is None and not local_site:
            self.last_topology_server_reply = reply
            self._other_site_reply = reply
            self.topology_server_reply_received = True
            self._succeeded_on(network_address)
            self._start_timer()
        else:                                   # last, held non-empty, another site
            self._stop_timer()
            self._succeeded_on(network_address)
            self._finish(held)

    def _succeeded_on(self, network_address: str) -> None:
        self.last_successful_network_address = network_address
        self.valid_last_successful_network_address = True

    # -------------------------------------------------------------- 3.1.6.1
    def _no_server_response(self) -> None:
        """No Server Response (3.1.6.1)."""
        self._timer = None
        if self.current_network_index != self.number_of_network_addresses:
            self._send_request()
        elif self.last_topology_server_reply is None and not self.topology_server_reply_received:
            self.valid_last_successful_network_address = False
            self._complete(False, "no TopologyServerReply on any network")
        else:
            self._finish(self.last_topology_server_reply or self._local_site_reply or self._other_site_reply)

    # -------------------------------------------------------------- 3.1.7
    def _finish(self, reply: TopologyServerReply) -> None:
        if reply.servers is not None:
            self.populate_directory_server_list(reply)
        self.populate_connected_network_identifier_list(reply)
        self._complete(True, "")

    def populate_directory_server_list(self, reply: TopologyServerReply) -> None:
        """Populate DirectoryServerList (3.1.7.1): each entry without its first two characters (the IP/IPX flags)."""
        self.directory_server_list = [entry.name for entry in reply.servers or ()]

    def populate_connected_network_identifier_list(self, reply: TopologyServerReply) -> None:
        """Populate ConnectedNetworkIdentifierList (3.1.7.2)."""
        self.connected_network_identifier_list = list(reply.connected_networks)

    # -------------------------------------------------------------- timer and completion
    def _start_timer(self) -> None:
        self._stop_timer()
        self._timer = self.scheduler.call_later(self.timeout_ms, self._no_server_response)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _complete(self, success: bool, reason: str) -> None:
        self._stop_timer()
        waiters, self._waiters = self._waiters, []
        result = DiscoveryResult(success, list(self.directory_server_list),
                                 list(self.connected_network_identifier_list), reason)
        if not success:
            log.warning("MQSD: Get Directory Server List failed: %s", reason)
        for waiter in waiters:
            waiter(result)


# ---------------------------------------------------------------------------------------------- UDP
class _Endpoint(asyncio.DatagramProtocol):
    def __init__(self, address: str, client: DiscoveryClient) -> None:
        self.address = address
        self.client = client
        self.transport = None

    def connection_made(self, transport) -> None:
        """Keep the socket."""
        self.transport = transport

    def datagram_received(self, data: bytes, addr) -> None:
        """Hand the datagram to the client with the network it arrived on."""
        self.client.reply_received(data, self.address)

    def error_received(self, exc: Exception) -> None:
        """ICMP errors are expected on broadcast; the timer handles silence."""
        log.debug("MQSD: socket on %s: %s", self.address, exc)


class UdpDiscovery:
    """Binds one UDP socket per network address (source port any, 2.1) and broadcasts to ``target:port``."""

    def __init__(self, target: str = "255.255.255.255", port: int = MQSD_PORT) -> None:
        self.target = target
        self.port = port
        self.endpoints: dict[str, _Endpoint] = {}

    async def open(self, addresses: list[str], client: DiscoveryClient) -> None:
        """Open the sockets before the procedure starts."""
        loop = asyncio.get_running_loop()
        for address in addresses:
            _, endpoint = await loop.create_datagram_endpoint(lambda a=address: _Endpoint(a, client),
                                                              local_addr=(address, 0), allow_broadcast=True)
            self.endpoints[address] = endpoint

    def send(self, address: str, packet: bytes) -> None:
        """Broadcast on the socket bound to ``address``."""
        self.endpoints[address].transport.sendto(packet, (self.target, self.port))

    def close(self) -> None:
        """Close every socket."""
        for endpoint in self.endpoints.values():
            if endpoint.transport is not None:
                endpoint.transport.close()
        self.endpoints.clear()


def local_addresses() -> list[str]:
    """The host's IPv4 addresses (<17>: gethostbyname on the host name), loopback when there is none."""
    try:
        addresses = socket.gethostbyname_ex(socket.gethostname())[2]
    except OSError:
        addresses = []
    return [a for a in addresses if not a.startswith("127.")] or ["127.0.0.1"]


async def discover(enterprise_id: uuid.UUID, site_id: uuid.UUID, *, networks: list[str] | None = None,
                   target: str = "255.255.255.255", port: int = MQSD_PORT, timeout_ms: int = WAIT_FOR_RESPONSE_MS,
                   scheduler: Scheduler | None = None) -> DiscoveryResult:
    """Run Get Directory Server List once over UDP and return what it found."""
    addresses = list(networks) if networks is not None else local_addresses()
    udp = UdpDiscovery(target, port)
    client = DiscoveryClient(enterprise_id, site_id, scheduler or AsyncioScheduler(), udp.send, lambda: addresses,
                             timeout_ms=timeout_ms)
    try:
        await udp.open(addresses, client)
        return await client.discover()
    finally:
        udp.close()
