"""The RemoteRead interface (MS-MQRR 3.1.4; 2.2.4 queue context handles and their 3.1.6.2 rundown)."""
from __future__ import annotations

from functools import partial
from typing import Any

from qm2qm.mqrr.constants import DEFAULT_PORT, MQRR_NAME, MQRR_UUID, MQRR_VERSION, OPNUM_NAMES
from qm2qm.mqrr.handlers import (cancel_receive, close_cursor, close_queue, create_cursor, end_receive,
                                 end_transactional_receive, enlist_remote_transaction, get_server_port,
                                 move_message, open_queue, open_queue_for_move, purge_queue,
                                 set_user_acknowledgement_class, start_receive, start_transactional_receive)
from qm2qm.mqrr.service import Service
from qm2qm.rpc.interface import ContextHandleType, Interface, Operation
from shared_adm import status as st

# MS-MQRR 3.1.4 "Methods in RPC Opnum Order" (opnum 1 is not used on the wire: the runtime answers
# nca_s_op_rng_error for it and for anything past 15, as for every opnum not registered here)
HANDLER_MODULES = {
    0: get_server_port, 2: open_queue, 3: close_queue, 4: create_cursor, 5: close_cursor, 6: purge_queue,
    7: start_receive, 8: cancel_receive, 9: end_receive, 10: move_message, 11: open_queue_for_move,
    12: enlist_remote_transaction, 13: start_transactional_receive, 14: set_user_acknowledgement_class,
    15: end_transactional_receive,
}


def build_service(qm: Any, port: int = DEFAULT_PORT) -> Service:
    """A RemoteRead server over ``qm``; its queue context handles run down as 3.1.6.2 says."""
    service = Service(qm=qm, port=port)
    # QUEUE_CONTEXT_HANDLE_SERIALIZE and _NOSERIALIZE are one handle on the wire (2.2.4): one type
    service.handle_type = ContextHandleType("QUEUE_CONTEXT_HANDLE_SERIALIZE", partial(close_queue.run_down, service))
    return service


def service_interface(service: Service) -> Interface:
    """The Interface registration (uuid 1a9134dd-7b39-45ba-ad88-44d01ca47f28 v1.0) serving ``service``."""
    operations = {opnum: Operation(opnum, OPNUM_NAMES[opnum], partial(module.serve, service))
                  for opnum, module in HANDLER_MODULES.items()}
    return Interface(uuid=MQRR_UUID, version=MQRR_VERSION, name=MQRR_NAME, operations=operations,
                     handle_types=(service.handle_type,), unauthenticated_opnums=frozenset({0}),
                     access_denied_status=st.MQ_ERROR_ACCESS_DENIED)
