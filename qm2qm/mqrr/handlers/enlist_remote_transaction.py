"""R_QMEnlistRemoteTransaction (MS-MQRR 3.1.4.12, opnum 12): enlist in a DTC transaction — which needs an
MS-DTCO transaction manager this server does not have.

3.1.4.12's first step is "Enlist into the transaction as specified in [MS-DTCO] section 3.5.4.3": pulling the
propagation token into a local transaction manager and enlisting a resource manager, so that the DTC later
delivers the outcome (MS-MQDMPR 3.1.4.7). Without a transaction manager that step fails, and the method then
returns a failure HRESULT ("If an error occurs, the server MUST return a failure HRESULT"):
MQ_ERROR_DTC_CONNECT, before Create Transaction, so no Transaction is left that no outcome could ever reach.
A client then does not go on to R_StartTransactionalReceive / R_MoveMessage in that transaction (4.3)."""
from __future__ import annotations

import struct
from collections.abc import Sequence

from qm2qm.mqrr.codec import RPC_X_BAD_STUB_DATA, decode, encode, signed
from qm2qm.mqrr.constants import MAX_PROPAGATION_TOKEN, RPC_S_INVALID_BOUND
from qm2qm.mqrr.handlers._transaction import NULL_UOW, uow_of
from qm2qm.mqrr.service import Service
from qm2qm.rpc.interface import CallContext, RpcFault
from shared_adm import status as st

# pTransactionId (XACTUOW, 16 bytes), then cbPropagationToken and the conformance of pbPropagationToken: a uint32
# 4-aligned in NDR, a uint64 8-aligned in NDR64
_SIZES = {False: struct.Struct("<II"), True: struct.Struct("<I4xQ")}
_SIZES_AT = 16


def check_token_sizes(stub: bytes, ndr64: bool) -> None:
    """Before the token is read: cbPropagationToken within [range(0, 131072)] (RPC_S_INVALID_BOUND) and the array's
    conformance equal to it, as size_is(cbPropagationToken) makes it (RPC_X_BAD_STUB_DATA), so no array larger than
    the range is ever unpacked."""
    sizes = _SIZES[ndr64]
    if len(stub) < _SIZES_AT + sizes.size:
        return                          # too short for these fields: the decoder says what is missing
    token_size, count = sizes.unpack_from(stub, _SIZES_AT)
    if not 0 <= token_size <= MAX_PROPAGATION_TOKEN:
        raise RpcFault(RPC_S_INVALID_BOUND, f"cbPropagationToken {token_size} is outside [range(0, 131072)]")
    if count != token_size:
        raise RpcFault(RPC_X_BAD_STUB_DATA, f"pbPropagationToken's conformance {count} differs from "
                                            f"cbPropagationToken {token_size} (size_is)")


def enlist_remote_transaction(uow: bytes, token: Sequence) -> int:
    """The processing rules of 3.1.4.12 on a server without MS-DTCO, past check_token_sizes; returns the HRESULT."""
    if uow == NULL_UOW or not token:
        return st.MQ_ERROR_INVALID_PARAMETER
    return st.MQ_ERROR_DTC_CONNECT


def serve(service: Service, ctx: CallContext, stub: bytes) -> bytes:
    """Opnum 12 on the wire: decode, apply 3.1.4.12, encode."""
    check_token_sizes(stub, ctx.ndr64)
    r = decode(12, stub, ctx.ndr64)
    # the token's bytes are not read: only whether there are any
    status = enlist_remote_transaction(uow_of(r["pTransactionId"]), r["pbPropagationToken"])
    return encode(12, ctx.ndr64, ErrorCode=signed(status))
