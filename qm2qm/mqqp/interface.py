"""The qm2qm interface (MS-MQQP 3.1.4: opnums 0–10; 2.2.1: the two context-handle types and their 3.1.6 rundowns)."""
from __future__ import annotations

from functools import partial
from typing import Any

from qm2qm.mqqp import inline
from qm2qm.mqqp.constants import OPNUM_NAMES, QM2QM_NAME, QM2QM_UUID, QM2QM_VERSION
from qm2qm.mqqp.handlers import (cancel_receive, close_cursor, close_queue, end_receive, get_qmqm_server_port,
                                 get_version, open_queue, purge_queue, start_receive, start_receive2,
                                 start_receive_by_lookup_id)
from qm2qm.mqqp.handlers._service import Service
from qm2qm.mqqp.server_config import MqqpConfig
from qm2qm.rpc.interface import ContextHandleType, Interface, Operation

# MS-MQQP 3.1.4 "Methods in RPC Opnum Order"
HANDLER_MODULES = {
    0: start_receive, 1: end_receive, 2: open_queue, 3: close_queue, 4: close_cursor, 5: cancel_receive,
    6: purge_queue, 7: get_qmqm_server_port, 8: get_version, 9: start_receive2, 10: start_receive_by_lookup_id,
}


def build_service(qm: Any, config: MqqpConfig | Any | None = None) -> Service:
    """A qm2qm server over ``qm`` with an empty private ADM and its two typed context handles."""
    if config is None:
        config = MqqpConfig()
    elif not isinstance(config, MqqpConfig):
        config = MqqpConfig.from_server_config(config)
    service = Service(qm=qm, config=config)
    # 3.1.6.1: a PCTX_RRSESSION_HANDLE_TYPE runs down as RemoteQMCloseQueue;
    # 3.1.6.2: a PCTX_REMOTEREAD_HANDLE_TYPE runs down as RemoteQMEndReceive with RR_NACK.
    service.rrsession_handle_type = ContextHandleType(
        "PCTX_RRSESSION_HANDLE_TYPE", partial(close_queue.run_down_session, service))
    service.remoteread_handle_type = ContextHandleType(
        "PCTX_REMOTEREAD_HANDLE_TYPE", partial(end_receive.run_down_remote_read, service))
    return service


def service_interface(service: Service) -> Interface:
    """The Interface registration (uuid 1088a980-eae5-11d0-8d9b-00a02453c337 v1.0) serving ``service``."""
    operations = {opnum: Operation(opnum, OPNUM_NAMES[opnum], partial(module.serve, service))
                  for opnum, module in HANDLER_MODULES.items()}
    return Interface(uuid=QM2QM_UUID, version=QM2QM_VERSION, name=QM2QM_NAME, operations=operations,
                     handle_types=(service.rrsession_handle_type, service.remoteread_handle_type),
                     lanes={1: partial(end_receive.lane, service), 9: partial(inline.read2, service),
                            10: partial(inline.lookup_read, service)},
                     unauthenticated_opnums=frozenset({7}), access_denied_status=0xC00E0025)  # MS-MQQP 5; 7: GetQMQMServerPort


def build_interface(qm: Any, config: MqqpConfig | Any | None = None) -> Interface:
    """The qm2qm Interface over ``qm``. ``config`` is an MqqpConfig (keep it to set ``bound_port`` once the
    listener is bound) or a qm2qm.config.ServerConfig (its qmcomm_port, and its port as the bound port)."""
    return service_interface(build_service(qm, config))
