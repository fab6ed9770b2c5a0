"""R_QMGetRemoteQueueName (MS-MQMP 3.1.4.1): obsolete, raises MQ_ERROR_ILLEGAL_OPERATION."""
from impacket.dcerpc.v5.ndr import NULL

from qm2qm.mqmp import idl
from shared_adm import status as st
from tests.mqmp.conftest import stub_fault


async def test_takes_no_action_and_raises_illegal_operation(env):
    client = await env.qmcomm_client()
    req = idl.R_QMGetRemoteQueueName()
    req["pQueue"] = 1
    req["lplpRemoteQueueName"] = NULL
    assert await env.run(stub_fault, client.dce, 1, req) == st.MQ_ERROR_ILLEGAL_OPERATION
    assert env.descriptors() == []
