"""MS-MQSD server role (3.2): a UDP responder answering each TopologyClientRequest with a TopologyServerReply
built from Site.Identifier, LocalQueueManager.ConnectedNetworkIdentifierList and DirectoryServerList (3.2.5.1).

Off unless started; binds 127.0.0.1 or whatever host the operator configures (default port 1801, 2.1)::

    responder = await start_responder(Topology(site_id, [cn_id], [ServerEntry("DS1")]), host, port)
    ...
    responder.close()
"""
from __future__ import annotations

import asyncio
import errno
import logging
import uuid
from dataclasses import dataclass, field

from qm2qm.mqsd.codec import (MAX_NETWORKS, MQSD_PORT, MqsdError, ServerEntry, TopologyClientRequest,
                              TopologyServerReply, decode_request, encode_reply)

log = logging.getLogger(__name__)


@dataclass
class Topology:
    """The shared ADM elements the responder reads (3.2.1.1); mutable, read at every request."""
    site_id: uuid.UUID
    connected_networks: list[uuid.UUID]
    directory_servers: list[ServerEntry] = field(default_factory=list)
    enterprise_id: uuid.UUID | None = None       # when set, requests from another enterprise are dropped (D4)


def build_reply(topology: Topology, request: TopologyClientRequest) -> TopologyServerReply:
    """The TopologyServerReply of 3.2.5.1 for one request; MqsdError when the ADM cannot fill a valid one."""
    networks = tuple(topology.connected_networks[:MAX_NETWORKS])
    if not networks:
        raise MqsdError("ConnectedNetworkIdentifierList is empty; ConnectedNetworkCount must be 1..32 (2.2.3)")
    mask = 0
    if request.ipx_networks is not None:         # IPX request: one bit per ConnectedNetworkArray entry
        mask = (1 << len(networks)) - 1
    if topology.site_id == request.site_id:
        return TopologyServerReply(request.request_id, networks, mask)
    if not topology.directory_servers:
        raise MqsdError("DirectoryServerList is empty; a reply to another site needs at least one entry (2.2.3)")
    return TopologyServerReply(request.request_id, networks, mask, topology.site_id,
                               tuple(topology.directory_servers))


_DESTINATION_ERRORS = frozenset({errno.EINVAL, errno.EACCES, errno.EPERM, errno.ECONNREFUSED, errno.EHOSTUNREACH,
                                 errno.ENETUNREACH, errno.EMSGSIZE})


class MqsdResponder(asyncio.DatagramProtocol):
    """The listening socket of 3.2.3/3.2.5: answer, return to listening; reopen the socket after a network error."""

    def __init__(self, topology: Topology, host: str, port: int) -> None:
        self.topology = topology
        self.host = host
        self.port = port
        self.transport: asyncio.DatagramTransport | None = None
        self.answered = 0
        self.ignored = 0
        self.unsent = 0                     # replies whose destination refused them (_DESTINATION_ERRORS)
        self.closed = asyncio.Event()
        self._closing = False
        self._reopening: asyncio.Task | None = None

    def connection_made(self, transport) -> None:
        """Keep the socket and the port really bound."""
        self.transport = transport
        self.port = transport.get_extra_info("sockname")[1]

    def datagram_received(self, data: bytes, addr) -> None:
        """Receiving a TopologyClientRequest (3.2.5.1); anything else is dropped with a debug log line."""
        if not addr[1]:
            # no reply can be sent to UDP port 0 (the send fails EINVAL): a forged source, not a client (2.1)
            self.ignored += 1
            log.debug("MQSD: request from %s ignored: source port 0", addr)
            return
        try:
            request = decode_request(data)
            if self.topology.enterprise_id is not None and request.enterprise_id != self.topology.enterprise_id:
                raise MqsdError(f"EnterpriseID {request.enterprise_id} is not this enterprise")
            reply = encode_reply(build_reply(self.topology, request))
        except MqsdError as exc:
            self.ignored += 1
            log.debug("MQSD: request from %s ignored: %s", addr, exc)
            return
        self.transport.sendto(reply, addr)
        self.answered += 1

    def error_received(self, exc: Exception) -> None:
        """A network error on send (3.2.5): close and reopen the socket; if that fails the responder ends. An error
        that belongs to one reply's destination (unreachable, refused, not addressable) leaves the socket alone:
        reopening it for those would drop every request queued behind, for any peer able to forge a source."""
        if isinstance(exc, OSError) and exc.errno in _DESTINATION_ERRORS:
            self.unsent += 1
            log.debug("MQSD: a reply could not be sent: %s", exc)
            return
        log.warning("MQSD: network error %s; reopening the socket", exc)
        if self._closing or self._reopening is not None:
            return
        old = self.transport
        self.transport = None
        if old is not None:
            old.close()
        self._reopening = asyncio.get_running_loop().create_task(self._reopen())

    async def _reopen(self) -> None:
        try:
            await asyncio.get_running_loop().create_datagram_endpoint(lambda: self, local_addr=(self.host, self.port))
        except OSError as exc:
            log.error("MQSD: cannot reopen %s:%d (%s); responder terminated", self.host, self.port, exc)
            self._closing = True
            self.closed.set()
        finally:
            self._reopening = None

    def connection_lost(self, exc) -> None:
        """The socket is closed: signal ``closed`` when we closed it."""
        if self._closing:
            self.closed.set()

    def close(self) -> None:
        """Stop answering and close the socket."""
        self._closing = True
        if self.transport is not None:
            self.transport.close()
        else:
            self.closed.set()


async def start_responder(topology: Topology, host: str = "127.0.0.1", port: int = MQSD_PORT) -> MqsdResponder:
    """Bind the UDP responder (port 0 picks a free port; ``responder.port`` tells which)."""
    responder = MqsdResponder(topology, host, port)
    await asyncio.get_running_loop().create_datagram_endpoint(lambda: responder, local_addr=(host, port))
    return responder
