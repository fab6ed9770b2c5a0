"""kerberos_compat: a framed krb5 AP-REQ is unframed for MIT's DCE-style acceptor (MS-RPCE 2.2.3.5; RFC 2743
3.1); anything else passes unchanged."""
from __future__ import annotations

from qm2qm.rpc.auth.kerberos_compat import raw_ap_req, spnego_init_with_raw_ap_req

AP_REQ = bytes.fromhex("6e8201") + bytes(300)
KRB5 = bytes.fromhex("06092a864886f712010202")
MS_KRB5 = bytes.fromhex("06092a864882f712010202")


def frame(inner: bytes) -> bytes:
    return b"\x60\x82" + len(inner).to_bytes(2, "big") + inner


def test_framed_ap_req_under_either_kerberos_oid_is_unframed():
    assert raw_ap_req(frame(KRB5 + b"\x01\x00" + AP_REQ)) == AP_REQ
    assert raw_ap_req(frame(MS_KRB5 + b"\x01\x00" + AP_REQ)) == AP_REQ


def test_raw_ap_req_and_other_tokens_pass_unchanged():
    for token in (AP_REQ, frame(KRB5 + b"\x02\x00" + AP_REQ), b"NTLMSSP\x00" + bytes(40), b"\x60\x05"):
        assert raw_ap_req(token) == token


def test_a_framing_length_that_does_not_match_the_token_passes_unchanged():
    token = frame(KRB5 + b"\x01\x00" + AP_REQ)
    assert raw_ap_req(token + b"\x00") == token + b"\x00"
    assert raw_ap_req(token[:-1]) == token[:-1]


def test_spnego_init_mech_token_is_unframed_and_mech_types_kept():
    from spnego._spnego import NegTokenInit, unpack_token
    init = NegTokenInit(mech_types=["1.2.840.48018.1.2.2"], mech_token=frame(KRB5 + b"\x01\x00" + AP_REQ))
    out = unpack_token(spnego_init_with_raw_ap_req(init.pack()))
    assert out.mech_token == AP_REQ and out.mech_types == ["1.2.840.48018.1.2.2"]
    ntlm = NegTokenInit(mech_types=["1.3.6.1.4.1.311.2.2.10"], mech_token=b"NTLMSSP\x00\x01\x00\x00\x00")
    assert spnego_init_with_raw_ap_req(ntlm.pack()) == ntlm.pack()
    assert spnego_init_with_raw_ap_req(b"garbage") == b"garbage"
