"""The qmcomm and qmcomm2 interfaces (MS-MQMP 3.1.4, 3.1.5; 2.2.1.1.3 PCTX_OPENREMOTE_HANDLE_TYPE and its 3.1.7.2
rundown). Opnums reserved for local use are not registered: the runtime answers them nca_s_op_rng_error."""
from __future__ import annotations

from functools import partial
from typing import Any

from qm2qm.mqmp.constants import (OPNUM_NAMES, QMCOMM2_NAME, QMCOMM2_OPNUM_NAMES, QMCOMM2_UUID, QMCOMM2_VERSION,
                                  QMCOMM_NAME, QMCOMM_UUID, QMCOMM_VERSION, SUPPORTING_SERVER_OPNUMS)
from qm2qm.mqmp.handlers import (close_remote_queue_context, create_remote_cursor, get_remote_queue_name,
                                 get_rtqm_server_port, not_supporting_server, open_remote_queue)
from qm2qm.mqmp.handlers._service import QmcommConfig, QmcommService
from qm2qm.rpc.interface import ContextHandleType, Interface, Operation
from shared_adm.status import MQ_ERROR_ACCESS_DENIED

HANDLER_MODULES = {
    1: get_remote_queue_name, 2: open_remote_queue, 3: close_remote_queue_context, 4: create_remote_cursor,
    31: get_rtqm_server_port,
}
# MS-MQMP 3.1.4.24, 5.1: R_QMGetRTQMServerPort is called before binding security is set.
UNAUTHENTICATED_OPNUMS = frozenset({31})


def build_service(qm: Any, config: QmcommConfig | None = None) -> QmcommService:
    """A qmcomm server over ``qm`` with its PCTX_OPENREMOTE_HANDLE_TYPE (rundown = 3.1.4.3's steps, 3.1.7.2)."""
    service = QmcommService(qm=qm, config=config or QmcommConfig())
    service.open_remote_handle_type = ContextHandleType(
        "PCTX_OPENREMOTE_HANDLE_TYPE", partial(close_remote_queue_context.run_down, service))
    return service


def qmcomm_interface(service: QmcommService) -> Interface:
    """qmcomm (fdb3a030-065f-11d1-bb9b-00a024ea5525 v1.0): the remote-read methods and the gate."""
    operations = {opnum: Operation(opnum, OPNUM_NAMES[opnum], partial(module.serve, service))
                  for opnum, module in HANDLER_MODULES.items()}
    for opnum in SUPPORTING_SERVER_OPNUMS:
        operations[opnum] = Operation(opnum, OPNUM_NAMES[opnum],
                                      partial(not_supporting_server.serve, OPNUM_NAMES[opnum]))
    return Interface(uuid=QMCOMM_UUID, version=QMCOMM_VERSION, name=QMCOMM_NAME, operations=operations,
                     handle_types=(service.open_remote_handle_type,),
                     unauthenticated_opnums=UNAUTHENTICATED_OPNUMS, access_denied_status=MQ_ERROR_ACCESS_DENIED)


def qmcomm2_interface() -> Interface:
    """qmcomm2 (76d12b80-3467-11d3-91ff-0090272f9ea3 v1.0): all four methods are supporting-server only (3.1.5)."""
    operations = {opnum: Operation(opnum, name, partial(not_supporting_server.serve, name))
                  for opnum, name in QMCOMM2_OPNUM_NAMES.items()}
    return Interface(uuid=QMCOMM2_UUID, version=QMCOMM2_VERSION, name=QMCOMM2_NAME, operations=operations,
                     unauthenticated_opnums=frozenset(), access_denied_status=MQ_ERROR_ACCESS_DENIED)


def build_interfaces(qm: Any, config: QmcommConfig | None = None) -> tuple[QmcommService, list[Interface]]:
    """The service and both interfaces, ready for one RpcServer (the IP_HANDSHAKE listener)."""
    service = build_service(qm, config)
    return service, [qmcomm_interface(service), qmcomm2_interface()]
