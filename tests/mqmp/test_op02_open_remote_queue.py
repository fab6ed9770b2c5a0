"""R_QMOpenRemoteQueue (MS-MQMP 3.1.4.2), one test per processing rule, plus the access check ([DESIGN], 5.1)."""
import uuid

import pytest
from impacket.dcerpc.v5.ndr import NULL

from qm2qm.mqmp import idl
from qm2qm.mqmp.constants import MQ_DENY_RECEIVE_SHARE, MQ_PEEK_ACCESS, MQ_RECEIVE_ACCESS
from shared_adm import security
from shared_adm import status as st
from shared_adm.enums import QueueAccessType, QueueShareMode, RemoteReadState
from tests.mqmp.conftest import FORMAT_NAME, QUEUE_PATH


async def test_null_queue_format_is_a_constraint_violation(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, None)
    assert opened.status == st.MQ_ERROR_INVALID_PARAMETER
    assert opened.context == bytes(20) and env.descriptors() == []


def _raw_open(client, qft: int, fill, suffix: int = 0, access: int = MQ_RECEIVE_ACCESS):
    req = idl.R_QMOpenRemoteQueue()
    qf = req["pQueueFormat"]
    qf["m_qft"] = qft
    qf["m_SuffixAndFlags"] = suffix
    qf["m_reserved"] = 0
    qf["u"]["tag"] = qft
    fill(qf["u"])
    req["dwCallingProcessID"] = 0
    req["dwDesiredAccess"] = access
    req["dwShareMode"] = 0
    req["pLicGuid"] = bytes(16)
    req["dwMQS"] = 0
    return client.dce.request(req, checkError=False)["ErrorCode"] & 0xFFFFFFFF


def _dl(arm):
    arm["m_DlID"]["m_DlGuid"] = uuid.uuid4().bytes_le
    arm["m_DlID"]["m_pwzDomain"] = NULL


def _multicast(arm):
    arm["m_MulticastID"]["m_address"] = 0x010000EA
    arm["m_MulticastID"]["m_port"] = 8001


async def test_distribution_list_and_multicast_names_are_refused(env):
    client = await env.qmcomm_client()
    assert await env.run(_raw_open, client, 6, _dl) == st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION
    assert await env.run(_raw_open, client, 7, _multicast) == st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION
    assert env.descriptors() == []


async def test_direct_http_names_are_refused(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, "DIRECT=HTTP://qm2qm/msmq/private$/orders")
    assert opened.status == st.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION


async def test_suffix_not_allowed_for_the_type_is_an_illegal_format_name(env):
    client = await env.qmcomm_client()

    def public(arm):
        arm["m_gPublicID"] = uuid.uuid4().bytes_le

    # DEADLETTER (2) is not a suffix of a public queue (MS-MQMQ 2.2.11)
    assert await env.run(_raw_open, client, 1, public, 0x82) == st.MQ_ERROR_ILLEGAL_FORMATNAME


async def test_unknown_queue_format_type_is_an_illegal_format_name(env):
    client = await env.qmcomm_client()
    assert await env.run(_raw_open, client, 0, lambda arm: None) == st.MQ_ERROR_ILLEGAL_FORMATNAME


@pytest.mark.parametrize("access", [0, 0x2, 0x21, 0x80])
async def test_desired_access_other_than_receive_or_peek_is_refused(env, access):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME, access=access)
    assert opened.status == st.MQ_ERROR_UNSUPPORTED_ACCESS_MODE
    assert env.descriptors() == []


async def test_share_mode_other_than_the_two_values_is_refused(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME, share_mode=2)
    assert opened.status == st.MQ_ERROR_INVALID_PARAMETER


async def test_open_queue_failure_status_is_returned(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, "DIRECT=OS:qm2qm\\private$\\missing")
    assert opened.status == st.MQ_ERROR_QUEUE_NOT_FOUND
    first = await env.run(client.open_remote_queue, FORMAT_NAME, share_mode=MQ_DENY_RECEIVE_SHARE)
    assert first.status == st.MQ_OK
    second = await env.run(client.open_remote_queue, FORMAT_NAME)
    assert second.status == st.MQ_ERROR_SHARING_VIOLATION


async def test_open_queue_gets_the_mapped_access_and_share_mode(env):
    client = await env.qmcomm_client()
    peek = await env.run(client.open_remote_queue, FORMAT_NAME, access=MQ_PEEK_ACCESS)
    exclusive = await env.run(client.open_remote_queue, FORMAT_NAME, share_mode=MQ_DENY_RECEIVE_SHARE)
    assert peek.status == exclusive.status == st.MQ_OK
    d_peek, d_excl = env.qm.descriptor_by_handle(peek.h_queue), env.qm.descriptor_by_handle(exclusive.h_queue)
    assert (d_peek.access_type, d_peek.share_mode) == (QueueAccessType.PEEK_ACCESS, QueueShareMode.DENY_NONE)
    assert (d_excl.access_type, d_excl.share_mode) == (QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_RECEIVE)


@pytest.mark.parametrize("kind", ["direct-os", "direct-tcp", "private", "public", "private-journal"])
async def test_every_queue_format_type_a_remote_read_allows_opens(env, kind):
    status, public = env.qm.create_queue("qm2qm\\pub")
    assert status == 0
    name = {
        "direct-os": FORMAT_NAME,
        "direct-tcp": "DIRECT=TCP:127.0.0.1\\" + QUEUE_PATH,
        "private": "PRIVATE=%s\\%08x" % (env.qm.identifier, env.queue.private_queue_number),
        "public": "PUBLIC=%s" % public.identifier,
        "private-journal": "PRIVATE=%s\\%08x;JOURNAL" % (env.qm.identifier, env.queue.private_queue_number),
    }[kind]
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, name)
    assert opened.status == st.MQ_OK, hex(opened.status)
    expected = {"public": public, "private-journal": env.queue.journal_queue_reference}.get(kind, env.queue)
    assert env.qm.descriptor_by_handle(opened.h_queue).queue_reference is expected


async def test_sets_remote_read_state_opened(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME)
    assert env.qm.descriptor_by_handle(opened.h_queue).remote_read_state is RemoteReadState.OPENED


async def test_adds_a_context_entry_referring_to_the_descriptor(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME)
    [entry] = env.qmcomm.open_contexts
    assert entry.open_queue_descriptor_reference is env.qm.descriptor_by_handle(opened.h_queue)
    assert opened.context != bytes(20)


async def test_returns_the_same_nonzero_handle_in_pdwcontext_dwpqueue_phqueue(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME)
    assert opened.pdw_context == opened.dwp_queue == opened.h_queue != 0
    assert env.qm.descriptor_by_handle(opened.h_queue) is not None


async def test_process_id_lic_guid_and_mqs_are_ignored(env):
    client = await env.qmcomm_client()
    a = await env.run(client.open_remote_queue, FORMAT_NAME, process_id=0, lic_guid=uuid.UUID(int=0), mqs=0)
    b = await env.run(client.open_remote_queue, FORMAT_NAME, process_id=0xFFFFFFFF, mqs=0x500)
    assert a.status == b.status == st.MQ_OK


async def test_internal_queues_are_never_opened_for_remote_read(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, "DIRECT=OS:qm2qm\\private$\\admin_queue$")
    assert opened.status == st.MQ_ERROR_ACCESS_DENIED


async def test_anonymous_reader_is_denied_by_the_default_security(env):
    env.qm.allow_anonymous_read = False
    client = await env.qmcomm_client()
    for access in (MQ_RECEIVE_ACCESS, MQ_PEEK_ACCESS):
        opened = await env.run(client.open_remote_queue, FORMAT_NAME, access=access)
        assert opened.status == st.MQ_ERROR_ACCESS_DENIED
    assert env.descriptors() == [] and env.qmcomm.open_contexts == set()


async def test_anonymous_reader_allowed_by_a_grant_to_anonymous_logon(env):
    env.qm.allow_anonymous_read = False
    sec = security.queue_security(env.queue)
    sec.grant(security.ANONYMOUS_SID, security.MQSEC_PEEK_MESSAGE)
    security.set_queue_security(env.qm, env.queue, sec)
    client = await env.qmcomm_client()
    assert (await env.run(client.open_remote_queue, FORMAT_NAME, access=MQ_PEEK_ACCESS)).status == st.MQ_OK
    assert (await env.run(client.open_remote_queue, FORMAT_NAME)).status == st.MQ_ERROR_ACCESS_DENIED


@pytest.mark.parametrize("suffix, attribute", [("DEADLETTER", "system_deadletter_queue"),
                                               ("DEADXACT", "system_transactional_deadletter_queue")])
async def test_a_dead_letter_queue_opens_by_its_direct_machine_queue_path(env, suffix, attribute):
    """MS-MQMQ 2.1.2 MachineQueuePath (DIRECT=OS:Computer\\SYSTEM$;DEADLETTER), how a Windows reader without a directory
    names a remote computer's dead-letter queue."""
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, f"DIRECT=OS:qm2qm\\SYSTEM$;{suffix}")
    assert opened.status == st.MQ_OK
    [descriptor] = [d for d in getattr(env.qm, attribute).open_queue_descriptor_collection]
    assert descriptor.handle == opened.h_queue and descriptor.remote_read_state is RemoteReadState.OPENED


async def test_a_subqueue_format_opens_the_subqueue_and_its_last_close_drops_it(env):
    client = await env.qmcomm_client()
    opened = await env.run(client.open_remote_queue, FORMAT_NAME + ";poison")       # m_qft 8, suffix type 5
    assert opened.status == st.MQ_OK, hex(opened.status)
    poison = env.qm.descriptor_by_handle(opened.h_queue).queue_reference
    assert poison.parent_queue is env.queue and poison.subqueue_name == "poison"
    await env.run(client.close_remote_queue_context, opened.context)
    assert list(env.queue.subqueue_collection) == []


async def test_a_subqueue_format_with_another_suffix_type_is_an_illegal_format_name(env):
    client = await env.qmcomm_client()

    def subqueue(arm):
        arm["m_pDirectSubqueueID"] = "OS:qm2qm\\" + QUEUE_PATH + ";poison\x00"

    assert await env.run(_raw_open, client, 8, subqueue, 0x81) == st.MQ_ERROR_ILLEGAL_FORMATNAME
    assert await env.run(_raw_open, client, 8, subqueue, 0x05) == st.MQ_OK

    def no_subqueue(arm):
        arm["m_pDirectSubqueueID"] = "OS:qm2qm\\" + QUEUE_PATH + "\x00"

    assert await env.run(_raw_open, client, 8, no_subqueue, 0x05) == st.MQ_ERROR_ILLEGAL_FORMATNAME
