"""Resource limits of one DCE/RPC connection, each with its precedent (MS-RPCE 3.3.3.5.4, 3.3.3.5.5; C706 12.6.3)."""
from __future__ import annotations

from dataclasses import dataclass

# Largest fragment we send or accept on TCP. Windows ncacn_ip_tcp and Samba (dcesrv_bind: "n = MIN(n, 5840)",
# validated against Windows 2012R2) cap max_xmit_frag/max_recv_frag at 5840; Samba also rejects any incoming
# request fragment above it with a protocol-error fault. frag_length is u16, so 65535 is the hard ceiling.
MAX_FRAG = 5840

# Smallest fragment size a client may negotiate down to: C706 12.6.3.1 "MustRecvFragSize" = 1432;
# Samba floors the negotiated value at 2048 ("n = MAX(2048, n)"), as Windows does.
MIN_FRAG = 2048

# bind and alter_context PDUs are not limited by the negotiated size (none exists yet); only frag_length's u16.
MAX_BIND_FRAG = 0xFFFF

# Largest reassembled request stub. MS-RPCE 3.3.3.5.4 says 4 MiB (Samba DCERPC_NCACN_REQUEST_DEFAULT_MAX_SIZE
# 0x400000), fault 0x5 beyond it; qm2qm's [range(0, 4325376)] dwSize buffer exceeds 4 MiB, so we allow 8 MiB.
MAX_REQUEST_SIZE = 8 * 1024 * 1024

# Fragments of one request: 8 MiB at the 2048-byte floor is ~4100 fragments; beyond that a peer is only
# costing us per-fragment work (zero-length fragments grow no buffer), so stop it.
MAX_REQUEST_FRAGMENTS = 4200

# Calls dispatched (CallRequest emitted) and not yet answered on one connection. Windows/Samba do not announce
# PFC_CONC_MPX by default, so a conforming client has at most one; 64 leaves room for tolerated pipelining.
MAX_CALLS_IN_FLIGHT = 64

# Presentation contexts per connection: MS-RPCE 3.3.3.5.5 caps them at 4000 x NumberOfRegisteredInterfaces per
# server; we apply 4000 per connection (each bind/alter adds at most one).
MAX_PRESENTATION_CONTEXTS = 4000

# MS-RPCE 3.3.3.5.6: a non-first fragment of an old call whose call_id is below the current one by fewer than
# 150 is silently dropped (the tail of a call we already faulted); further back is a protocol error.
OLD_CALL_WINDOW = 150


# Security contexts per connection: Windows refuses the 2050th (Samba raw_protocol test_multiple_auth_limit).
MAX_SECURITY_CONTEXTS = 2049

# Security contexts alive over every connection of every listener (App shares one SecurityProvider): a context
# (most often a pending NTLM or SPNEGO acceptor) holds about 2 KiB, so 2049 per connection times 1024 connections
# could hold 4 GiB; 65,536 hold about 128 MiB. Past it a bind is refused with bind_nak temporary_congestion (an
# alter_context as the per-connection limit is), until connections close.
MAX_LIVE_SECURITY_CONTEXTS = 65536


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-connection limits; override in tests or from configuration."""
    max_frag: int = MAX_FRAG
    min_frag: int = MIN_FRAG
    max_request_size: int = MAX_REQUEST_SIZE
    max_request_fragments: int = MAX_REQUEST_FRAGMENTS
    max_calls_in_flight: int = MAX_CALLS_IN_FLIGHT
    max_presentation_contexts: int = MAX_PRESENTATION_CONTEXTS
    max_security_contexts: int = MAX_SECURITY_CONTEXTS


DEFAULT_LIMITS = Limits()
