"""Generic connection-oriented DCE/RPC runtime (C706 ch. 12; MS-RPCE 3.3): contracts, handles, groups, server."""
from __future__ import annotations

from qm2qm.rpc.groups import AssociationGroup, AssociationGroups
from qm2qm.rpc.handles import NULL_HANDLE, HandleTable
from qm2qm.rpc.interface import (NDR20, NDR64, CallContext, ContextHandleType, Interface, Operation,
                                 RpcFault)

__all__ = [
    "NDR20", "NDR64", "CallContext", "ContextHandleType", "Interface", "Operation", "RpcFault",
    "NULL_HANDLE", "HandleTable", "AssociationGroup", "AssociationGroups", "RpcServer",
]


def __getattr__(name: str):
    # Lazy: the server pulls in the connection core; importing the contracts must not.
    if name == "RpcServer":
        from qm2qm.rpc.server import RpcServer
        return RpcServer
    raise AttributeError(f"module 'qm2qm.rpc' has no attribute {name!r}")
