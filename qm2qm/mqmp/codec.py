"""NDR / NDR64 stubs of the qmcomm subset over the impacket declarations of qm2qm.mqmp.idl (MS-MQMP 2.2, 6;
MS-RPCE 2.2.5), with the strict checks of MS-RPCE 3.1.1.5.3 the interface asks for (MS-MQMP 3.1.4 <9>), and the
QUEUE_FORMAT → format-name mapping (MS-MQMQ 2.2.7 → 2.1).

Decoding raises ``RpcFault``: RPC_X_INVALID_BOUND (0x6C6) for a [range] violation, RPC_X_BAD_STUB_DATA (0x6F7) for
every other malformed stub (truncation, trailing bytes, a union discriminant that disagrees with its switch_is
field or names no arm)."""
from __future__ import annotations

import contextlib
import struct
import uuid
from typing import Any

from impacket.dcerpc.v5.ndr import NDRPOINTERNULL

from qm2qm.mqmp import idl
from qm2qm.mqmp import constants as c
from qm2qm.rpc.faults import RPC_X_BAD_STUB_DATA, RPC_X_INVALID_BOUND
from qm2qm.rpc.interface import RpcFault
from qm2qm.rpc.ndr_arrays import items_skipped
from qm2qm.rpc.quiet_ndr import parse_quietly

NULL_CONTEXT_HANDLE = bytes(20)
_U32 = struct.Struct("<I")
_MAX_NAME_LEN = 1024        # CACTransferBufferV1.Receive: [range(0,1024)] on the four name lengths
# R_QMCreateRemoteCursor's ptb1 "MUST be ignored" (3.1.4.4): its arrays are checked and stepped over, not kept
_ARRAYS_IGNORED = frozenset({c.OPNUM_R_QMCreateRemoteCursor})


def bad(what: str) -> RpcFault:
    """RPC_X_BAD_STUB_DATA: an invalid octet stream (MS-RPCE 3.1.3.5.2)."""
    return RpcFault(RPC_X_BAD_STUB_DATA, f"bad stub data: {what}")


def decode_request(opnum: int, stub: bytes, ndr64: bool) -> Any:
    """The request stub of ``opnum`` → its idl.py NDRCALL (fields read with ``call[name]``)."""
    call = idl.OPNUMS[opnum][0](isNDR64=ndr64)
    where = f"{c.OPNUM_NAMES[opnum]} request"
    if opnum == c.OPNUM_R_QMCreateRemoteCursor and len(stub) >= 4:
        _check_transfer_type(_U32.unpack_from(stub)[0], where)     # [range] as it is read, before its union
    try:
        with items_skipped() if opnum in _ARRAYS_IGNORED else contextlib.nullcontext():
            used = parse_quietly(call, stub)
    except RpcFault:
        raise
    except Exception as exc:    # impacket raises struct.error, KeyError ("Unknown tag"), ... on a bad stream
        raise bad(f"{where}: {type(exc).__name__}: {exc}") from None
    if used != len(stub):
        raise bad(f"{where}: {len(stub) - used} trailing bytes after the last parameter (offset {used})")
    if opnum == c.OPNUM_R_QMOpenRemoteQueue and not is_null(call.fields["pQueueFormat"]):
        _check_queue_format(call["pQueueFormat"], where)
    if opnum == c.OPNUM_R_QMCreateRemoteCursor:
        _check_transfer_buffer(call["ptb1"], where)
    return call


def encode_response(opnum: int, ndr64: bool, **values: Any) -> bytes:
    """The response stub of ``opnum`` from its out-parameter values (context handles as 20 bytes)."""
    response = idl.OPNUMS[opnum][1](isNDR64=ndr64)
    for name, value in values.items():
        if name == "ErrorCode":
            value &= 0xFFFFFFFF
            value = value - 0x100000000 if value & 0x80000000 else value    # impacket's HRESULT is signed
        response[name] = value
    return response.getData()


def wire_handle(value: Any) -> bytes:
    """A decoded context-handle field as its 20 wire bytes (impacket gives bytes or the struct)."""
    return bytes(value if isinstance(value, (bytes, bytearray)) else value["Data"])


def is_null(pointer: Any) -> bool:
    """A decoded unique/full pointer that was NULL on the wire."""
    return isinstance(pointer, NDRPOINTERNULL) or pointer["ReferentID"] == 0


def _check_queue_format(qf: Any, where: str) -> None:
    if qf["m_qft"] != qf["u"]["tag"]:
        raise bad(f"{where}: QUEUE_FORMAT union discriminant {qf['u']['tag']} differs from m_qft {qf['m_qft']}")


def _check_transfer_type(kind: int, where: str) -> None:
    if not 0 <= kind <= c.CACTB_CREATECURSOR:
        raise RpcFault(RPC_X_INVALID_BOUND, f"{where}: uTransferType {kind} outside [range(0,2)]")


def _check_transfer_buffer(tb: Any, where: str) -> None:
    kind = tb["uTransferType"]
    _check_transfer_type(kind, where)
    if tb["u"]["tag"] != kind:
        raise bad(f"{where}: CACTransferBufferV1 union discriminant {tb['u']['tag']} differs from uTransferType")
    if kind == c.CACTB_RECEIVE:
        receive = tb["u"]["Receive"]
        for name in ("ulResponseFormatNameLen", "ulAdminFormatNameLen", "ulDestFormatNameLen",
                     "ulOrderingFormatNameLen"):
            if receive[name] > _MAX_NAME_LEN:
                raise RpcFault(RPC_X_INVALID_BOUND, f"{where}: {name} {receive[name]} outside [range(0,1024)]")


# ----------------------------------------------------------------------------------------------------------
# QUEUE_FORMAT (MS-MQMQ 2.2.7) → format name (MS-MQMQ 2.1)
# ----------------------------------------------------------------------------------------------------------

_SUFFIX_TEXT = {c.QUEUE_SUFFIX_TYPE_NONE: "", c.QUEUE_SUFFIX_TYPE_JOURNAL: ";JOURNAL",
                c.QUEUE_SUFFIX_TYPE_DEADLETTER: ";DEADLETTER", c.QUEUE_SUFFIX_TYPE_DEADXACT: ";DEADXACT"}
# MS-MQMQ 2.2.11: which suffixes each QUEUE_FORMAT_TYPE may carry
_ALLOWED_SUFFIXES = {
    c.QUEUE_FORMAT_TYPE_PUBLIC: {0, 1}, c.QUEUE_FORMAT_TYPE_PRIVATE: {0, 1}, c.QUEUE_FORMAT_TYPE_DIRECT: {0, 1, 2, 3},
    c.QUEUE_FORMAT_TYPE_MACHINE: {1, 2, 3}, c.QUEUE_FORMAT_TYPE_SUBQUEUE: {0, 5},
}


class FormatNameError(ValueError):
    """A QUEUE_FORMAT that is no valid format name; ``status`` is the HRESULT to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _guid_bytes(struct: Any) -> bytes:
    return bytes(struct if isinstance(struct, (bytes, bytearray)) else struct["Data"])


def _string(pointer: Any) -> str:
    if is_null(pointer):
        raise FormatNameError(0xC00E001E, "NULL direct name")          # MQ_ERROR_ILLEGAL_FORMATNAME
    try:
        return pointer["Data"].rstrip("\x00")
    except UnicodeDecodeError:      # an unpaired surrogate: no format name can contain it
        raise FormatNameError(0xC00E001E, "direct name is not valid UTF-16") from None


def _suffix(qft: int, flags: int) -> int:
    """The suffix type of m_SuffixAndFlags; FormatNameError for the types a remote read cannot open (DL, multicast,
    connector) and a suffix the type may not carry (MS-MQMQ 2.2.11)."""
    from shared_adm import status as st
    if qft in (c.QUEUE_FORMAT_TYPE_DL, c.QUEUE_FORMAT_TYPE_MULTICAST, c.QUEUE_FORMAT_TYPE_CONNECTOR):
        raise FormatNameError(st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                              f"QUEUE_FORMAT type {qft} cannot be opened for remote read (MS-MQMP 3.1.4.2)")
    suffix = flags & 0x0F
    if qft not in _ALLOWED_SUFFIXES or suffix not in _ALLOWED_SUFFIXES[qft]:
        raise FormatNameError(st.MQ_ERROR_ILLEGAL_FORMATNAME, f"QUEUE_FORMAT type {qft} with suffix {suffix}")
    return suffix


def format_name(qf: Any) -> str:
    """The format-name text Open Queue takes for a decoded QUEUE_FORMAT; FormatNameError for the types a remote
    read cannot open (DL, multicast, connector: MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION) and malformed ones
    (MQ_ERROR_ILLEGAL_FORMATNAME)."""
    qft = qf["m_qft"]
    suffix = _suffix(qft, qf["m_SuffixAndFlags"])
    arm = qf["u"]
    if qft == c.QUEUE_FORMAT_TYPE_PUBLIC:
        value = _guid_bytes(arm["m_gPublicID"])
    elif qft == c.QUEUE_FORMAT_TYPE_PRIVATE:
        oid = arm["m_oPrivateID"]
        value = (_guid_bytes(oid["Lineage"]), oid["Uniquifier"])
    elif qft == c.QUEUE_FORMAT_TYPE_MACHINE:
        value = _guid_bytes(arm["m_gMachineID"])
    elif qft == c.QUEUE_FORMAT_TYPE_DIRECT:
        value = _string(arm.fields["m_pDirectID"])
    else:
        value = _string(arm.fields["m_pDirectSubqueueID"])
    return _compose(qft, suffix, value)


def format_name_of(qft: int, flags: int, value: Any) -> str:
    """format_name of a QUEUE_FORMAT read without impacket (codec_fast): ``value`` is the arm's, the GUID's 16
    bytes_le, (Lineage bytes_le, Uniquifier) or the direct name without its terminating NULs."""
    return _compose(qft, _suffix(qft, flags), value)


def _compose(qft: int, suffix: int, value: Any) -> str:
    from shared_adm import status as st
    if qft == c.QUEUE_FORMAT_TYPE_PUBLIC:
        text = "PUBLIC={%s}" % uuid.UUID(bytes_le=value)
    elif qft == c.QUEUE_FORMAT_TYPE_PRIVATE:
        text = "PRIVATE={%s}\\%08x" % (uuid.UUID(bytes_le=value[0]), value[1])
    elif qft == c.QUEUE_FORMAT_TYPE_MACHINE:
        text = "MACHINE={%s}" % uuid.UUID(bytes_le=value)
    elif qft == c.QUEUE_FORMAT_TYPE_DIRECT:
        text = "DIRECT=" + value
    else:                   # m_pDirectSubqueueID "MUST … contain the optional <Subqueue> element" (MS-MQMQ 2.2.7)
        if ";" not in value:
            raise FormatNameError(st.MQ_ERROR_ILLEGAL_FORMATNAME, "QUEUE_FORMAT_TYPE_SUBQUEUE without a subqueue")
        return "DIRECT=" + value
    if qft == c.QUEUE_FORMAT_TYPE_DIRECT and text[7:].split(":", 1)[0].upper() in ("HTTP", "HTTPS"):
        raise FormatNameError(st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                              "direct HTTP/HTTPS names cannot be opened for remote read (MS-MQMP 3.1.4.2)")
    return text + _SUFFIX_TEXT.get(suffix, "")


def fill_queue_format(qf: Any, name: str) -> None:
    """The inverse of format_name for a client: PUBLIC=, PRIVATE=, DIRECT= (with ;JOURNAL etc.) → QUEUE_FORMAT."""
    from shared_adm.format_name import parse
    parsed = parse(name)
    if parsed.subqueue:         # "DIRECT=…;Subqueue": QUEUE_FORMAT_TYPE_SUBQUEUE, SUFFIX_TYPE_SUBQUEUE, Flags 0
        qf["m_qft"] = qf["u"]["tag"] = c.QUEUE_FORMAT_TYPE_SUBQUEUE
        qf["m_SuffixAndFlags"] = c.QUEUE_SUFFIX_TYPE_SUBQUEUE
        qf["m_reserved"] = 0
        qf["u"]["m_pDirectSubqueueID"] = name.split("=", 1)[1] + "\x00"
        return
    suffix = {"": 0, "journal": 1, "deadletter": 2, "deadxact": 3}.get(parsed.suffix)
    if parsed.kind not in ("public", "private", "direct", "machine") or suffix is None:
        raise ValueError(f"{name!r} is not a format name a remote read can open (PUBLIC=, PRIVATE=, DIRECT=)")
    qft = {"public": 1, "private": 2, "direct": 3, "machine": 4}[parsed.kind]
    qf["m_qft"] = qft
    qf["m_SuffixAndFlags"] = suffix | (c.QUEUE_FORMAT_FLAG_SYSTEM if suffix else 0)
    qf["m_reserved"] = 0
    qf["u"]["tag"] = qft
    if parsed.kind == "public":
        qf["u"]["m_gPublicID"] = parsed.guid.bytes_le
    elif parsed.kind == "private":
        qf["u"]["m_oPrivateID"]["Lineage"] = parsed.guid.bytes_le
        qf["u"]["m_oPrivateID"]["Uniquifier"] = parsed.number
    elif parsed.kind == "machine":
        qf["u"]["m_gMachineID"] = parsed.guid.bytes_le
    else:
        direct = name.split("=", 1)[1]
        qf["u"]["m_pDirectID"] = (direct.split(";", 1)[0] if suffix else direct) + "\x00"


# ----------------------------------------------------------------------------------------------------------
# Responses and plain views (for clients, the call table and replay)
# ----------------------------------------------------------------------------------------------------------

def decode_response(opnum: int, stub: bytes, ndr64: bool) -> Any:
    """The response stub of ``opnum`` → its idl.py NDRCALL; RPC_X_BAD_STUB_DATA if malformed."""
    call = idl.OPNUMS[opnum][1](isNDR64=ndr64)
    try:
        used = parse_quietly(call, stub)
    except Exception as exc:    # noqa: BLE001 - impacket's assorted parse errors
        raise bad(f"{c.OPNUM_NAMES[opnum]} response: {type(exc).__name__}: {exc}") from None
    if used != len(stub):
        raise bad(f"{c.OPNUM_NAMES[opnum]} response: {len(stub) - used} trailing bytes")
    return call


def encode_request(call: Any) -> bytes:
    """A request NDRCALL (built, or decoded and changed) → its stub, in the syntax it was made for."""
    return call.getData()


def request_view(opnum: int, call: Any) -> dict:
    """The request's parameters as plain JSON values, named as in the IDL (QUEUE_FORMAT as its format name)."""
    if opnum == c.OPNUM_R_QMOpenRemoteQueue:
        if is_null(call.fields["pQueueFormat"]):
            queue = None
        else:
            try:
                queue = format_name(call["pQueueFormat"])
            except FormatNameError as exc:
                queue = {"error": str(exc), "m_qft": call["pQueueFormat"]["m_qft"]}
        return {"pQueueFormat": queue, "dwCallingProcessID": call["dwCallingProcessID"],
                "dwDesiredAccess": call["dwDesiredAccess"], "dwShareMode": call["dwShareMode"],
                "pLicGuid": str(uuid.UUID(bytes_le=bytes(call["pLicGuid"]))), "dwMQS": call["dwMQS"]}
    if opnum == c.OPNUM_R_QMCloseRemoteQueueContext:
        return {"pphContext": wire_handle(call["pphContext"]).hex()}
    if opnum == c.OPNUM_R_QMCreateRemoteCursor:
        return {"ptb1": {"uTransferType": call["ptb1"]["uTransferType"]}, "hQueue": call["hQueue"]}
    if opnum == c.OPNUM_R_QMGetRTQMServerPort:
        return {"fIP": call["fIP"]}
    return {"pQueue": call["pQueue"]}


def response_view(opnum: int, call: Any) -> dict:
    """The response's out-parameters as plain JSON values (HRESULTs unsigned)."""
    out: dict = {}
    for name, _ in call.structure:
        value = call[name]
        if name == "pphContext":
            value = wire_handle(value).hex()
        elif name == "ErrorCode":
            value &= 0xFFFFFFFF
        elif not isinstance(value, int):
            continue            # lplpRemoteQueueName: never answered (opnum 1 always faults)
        out[name] = value
    return out
