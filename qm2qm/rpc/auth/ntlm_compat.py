"""pyspnego's NTLM acceptor, made to check an NTLMv2 response over the bytes the client sent (MS-NLMP 3.3.2).

MS-NLMP 3.3.2 defines NTProofStr as HMAC_MD5(ResponseKeyNT, ServerChallenge + temp) where the server takes temp
from the NtChallengeResponse it received; Windows does so. pyspnego instead rebuilds temp from the parsed fields
and appends the Z(4) of the client-side pseudo-code (3.3.2 ComputeResponse), so a client that omits that
trailing Z(4), as impacket does, is refused although Windows accepts it. ``install`` wraps pyspnego's acceptor
so the proof is computed over the received temp; the HMAC is still pyspnego's.
"""
from __future__ import annotations

import threading

import spnego._ntlm as _ntlm
from spnego._ntlm_raw.crypto import hmac_md5
from spnego._ntlm_raw.messages import Authenticate

_received = threading.local()
_installed = False


def _compute_response_v2(nt_hash, server_challenge, client_challenge, time, av_pairs):
    temp = getattr(_received, "temp", None)
    if temp is None:
        return _original_compute(nt_hash, server_challenge, client_challenge, time, av_pairs)
    nt_proof_str = hmac_md5(nt_hash, server_challenge + temp)
    lm_response = hmac_md5(nt_hash, server_challenge + client_challenge) + client_challenge
    return nt_proof_str + temp, lm_response, hmac_md5(nt_hash, nt_proof_str)


def _step_accept_authenticate(self, token, channel_bindings):
    try:
        response = Authenticate.unpack(token).nt_challenge_response or b""
    except Exception:
        response = b""
    _received.temp = response[16:] if len(response) > 24 else None
    try:
        return _original_step(self, token, channel_bindings)
    finally:
        _received.temp = None


_original_compute = _ntlm.compute_response_v2
_original_step = _ntlm.NTLMProxy._step_accept_authenticate


def install() -> None:
    """Idempotent: patch pyspnego's acceptor once per process."""
    global _installed
    if not _installed:
        _ntlm.compute_response_v2 = _compute_response_v2
        _ntlm.NTLMProxy._step_accept_authenticate = _step_accept_authenticate
        _installed = True
