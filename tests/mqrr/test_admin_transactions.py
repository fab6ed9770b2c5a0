"""The admin API and CLI over TransactionCollection (MS-MQDMPR 3.1.1.14): list, and the outcome a DTC would deliver
(Transaction Commit 3.1.4.4, Transaction Abort 3.1.4.5) given by an operator, since this server has no DTC and an
MS-MQRR transactional receive's message otherwise stays Locked until the server restarts."""
from __future__ import annotations

import json
import os

from aiohttp.test_utils import TestClient, TestServer

from qm2qm.admin import AdminApi
from qm2qm.mqrr.constants import RR_ACK
from qm2qm.remote_read.actions import MQ_ACTION_RECEIVE
from shared_adm import status as st
from shared_adm.enums import PositionState

from .test_op12_to_15_transactions import xqueue


async def _api(env) -> TestClient:
    admin = AdminApi(env.qm, info=lambda: {}, mqrr_service=env.service)
    client = TestClient(TestServer(admin.app))
    await client.start_server()
    return client


async def _call(client, method: str, path: str):
    response = await client.request(method, path)
    return response.status, json.loads(await response.text())


async def test_a_transaction_is_listed_with_its_message_and_its_abort_makes_the_message_available(env):
    c, h, queue = await xqueue(env)
    m = env.enqueue(b"held", queue=queue)
    uow = os.urandom(16)
    assert (await env.call(c.read, h, MQ_ACTION_RECEIVE, request_id=1, transaction=uow)).status == st.MQ_OK
    api = await _api(env)
    try:
        status, data = await _call(api, "GET", "/v1/transactions")
        assert status == 200 and data == {"transactions": [{
            "identifier": uow.hex(), "single_phase": True, "operations": [{
                "operation": "Dequeue", "queue": "qm2qm\\private$\\xorders", "lookup_id": m.lookup_identifier,
                "target_queue": None, "dequeue_reason": "ACK_RECEIVE"}]}]}
        assert await _call(api, "POST", f"/v1/transactions/{uow.hex()}/abort") == (200, {
            "aborted": uow.hex(), "operations": data["transactions"][0]["operations"]})
        assert env.positions(queue) == {m.lookup_identifier: PositionState.AVAILABLE}
        assert env.qm.transaction_collection == {}
        # the client ends its receive late: its transaction is over (the message is no longer Locked)
        assert await env.call(c.end, h, 1, RR_ACK, transactional=True) == st.MQ_ERROR_TRANSACTION_SEQUENCE
        assert env.positions(queue) == {m.lookup_identifier: PositionState.AVAILABLE} and len(env.service.table) == 0
        assert (await env.call(c.read, h, MQ_ACTION_RECEIVE, request_id=2)).status == st.MQ_OK
    finally:
        await api.close()


async def test_a_committed_transaction_deletes_its_received_message(env):
    c, h, queue = await xqueue(env)
    m = env.enqueue(b"gone", queue=queue)
    uow = os.urandom(16)
    await env.call(c.read, h, MQ_ACTION_RECEIVE, request_id=1, transaction=uow)
    assert await env.call(c.end, h, 1, RR_ACK, transactional=True) == st.MQ_OK
    api = await _api(env)
    try:
        status, data = await _call(api, "POST", f"/v1/transactions/{uow.hex()}/commit")
        assert (status, data["committed"]) == (200, uow.hex())
        assert [(o["operation"], o["lookup_id"]) for o in data["operations"]] == [("Dequeue", m.lookup_identifier)]
        assert env.positions(queue) == {} and env.qm.transaction_collection == {}
        status, data = await _call(api, "POST", f"/v1/transactions/{uow.hex()}/commit")
        assert (status, data["error"]) == (404, "MQ_ERROR_TRANSACTION_SEQUENCE")
        assert data["message"] == f"no transaction {uow.hex()!r}"
    finally:
        await api.close()


async def test_a_transaction_with_a_receive_in_flight_is_not_ended(env):
    c, h, queue = await xqueue(env)
    uow = os.urandom(16)
    env.qm.create_transaction(uow)
    waiting = await env.blocked(c.read, h, MQ_ACTION_RECEIVE, request_id=1, timeout=60000, transaction=uow)
    api = await _api(env)
    try:
        status, data = await _call(api, "POST", f"/v1/transactions/{uow.hex()}/abort")
        assert (status, data["error"]) == (409, "transaction_busy") and uow in env.qm.transaction_collection
        assert data["message"].startswith(f"transaction {uow.hex()!r} has 1 R_StartTransactionalReceive call(s) in")
        m = env.enqueue(b"late", queue=queue)               # the waiting receive takes it, in the transaction
        assert (await waiting).status == st.MQ_OK
        assert (await _call(api, "POST", f"/v1/transactions/{uow.hex()}/abort"))[0] == 200
        assert env.positions(queue) == {m.lookup_identifier: PositionState.AVAILABLE}
    finally:
        await api.close()


async def test_the_outcome_answers_the_operations_it_applied_to_not_those_of_an_earlier_listing(env):
    c, h, queue = await xqueue(env)
    uow = os.urandom(16)
    api = await _api(env)
    try:
        waiting = await env.blocked(c.read, h, MQ_ACTION_RECEIVE, request_id=1, transaction=uow, timeout=5000)
        _, listed = await _call(api, "GET", "/v1/transactions")
        assert listed["transactions"][0]["operations"] == []        # the receive waits: nothing yet
        m = env.enqueue(b"arrives", queue=queue)
        assert (await waiting).status == st.MQ_OK
        status, data = await _call(api, "POST", f"/v1/transactions/{uow.hex()}/commit")
        assert (status, [o["lookup_id"] for o in data["operations"]]) == (200, [m.lookup_identifier])
        assert env.positions(queue) == {}
    finally:
        await api.close()
