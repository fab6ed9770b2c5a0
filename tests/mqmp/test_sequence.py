"""The whole Windows remote-read sequence (MS-MQMP 4.2 with MS-MQQP 4.1) through qm2qm.client.RemoteReader, over
NDR and NDR64, with and without a qmcomm cursor, and through the endpoint mapper of a running `qm2qm serve`."""
from __future__ import annotations

import asyncio

from qm2qm.app import App
from qm2qm.client import AdminClient, RemoteReader, RpcCallError
from shared_adm import status as st
from tests.mqmp.conftest import FORMAT_NAME
from tests.mqmp.test_serve_wiring import config
from tests.product.test_wiring import free_port

OPEN_STEPS = ["R_QMGetRTQMServerPort", "R_QMOpenRemoteQueue", "RemoteQMOpenQueue", "RemoteQmGetVersion"]
CLOSE_STEPS = ["RemoteQMCloseQueue", "R_QMCloseRemoteQueueContext"]


def _reader(env, **kwargs) -> RemoteReader:
    return RemoteReader("127.0.0.1", FORMAT_NAME, qmcomm_port=env.qmcomm_server.port,
                        qm2qm_port=env.qm2qm_server.port, ndr64=env.ndr64, **kwargs)


async def test_open_receive_close_is_the_windows_sequence(env):
    for i in range(3):
        env.enqueue(b"body-%d" % i)

    def run():
        with _reader(env) as reader:
            bodies = [reader.receive().message().body for _ in range(3)]
            empty = reader.receive()
            return reader, bodies, empty

    reader, bodies, empty = await env.run(run)
    assert bodies == [b"body-0", b"body-1", b"body-2"]
    assert empty.hresult == st.MQ_ERROR_IO_TIMEOUT
    assert reader.steps[:4] == OPEN_STEPS
    assert reader.steps[4:-2] == ["RemoteQMStartReceive2", "RemoteQMEndReceive"] * 3 + ["RemoteQMStartReceive2"]
    assert reader.steps[-2:] == CLOSE_STEPS
    assert env.descriptors() == [] and env.qmcomm.open_contexts == set() and len(env.queue.message_position_list) == 0


async def test_peek_with_a_qmcomm_cursor_walks_the_queue(env):
    for i in range(3):
        env.enqueue(b"walk-%d" % i)

    def run():
        with _reader(env, access="peek", cursor=True) as reader:
            first = reader.peek().message().body
            rest = [reader.peek_next().message().body for _ in range(2)]
            return reader, [first, *rest]

    reader, bodies = await env.run(run)
    assert bodies == [b"walk-0", b"walk-1", b"walk-2"]
    assert "R_QMCreateRemoteCursor" in reader.steps and "RemoteQMCloseCursor" in reader.steps
    assert env.descriptors() == [] and len(env.queue.message_position_list) == 3


async def test_a_refused_open_is_reported_and_leaves_nothing_open(env):
    env.qm.allow_anonymous_read = False

    def run():
        reader = _reader(env)
        try:
            reader.open()
        except RpcCallError as exc:
            return reader, exc.status
        raise AssertionError("the open was not refused")

    reader, status = await env.run(run)
    assert status == st.MQ_ERROR_ACCESS_DENIED
    assert reader.qm2qm is None and reader.qmcomm is None and env.descriptors() == []


async def test_endpoint_mapper_resolves_qmcomm_and_qm2qm_on_a_running_server(tmp_path):
    app = App(config(tmp_path, epm_port=free_port(), allow_anonymous_read=True, computer_name="qm2qm"))
    await app.start()
    try:
        def run():
            admin = AdminClient(app.admin_url)
            admin.create_queue(".\\private$\\orders")
            admin.send(".\\private$\\orders", body="hello")
            reader = RemoteReader("127.0.0.1", "DIRECT=TCP:127.0.0.1\\private$\\orders", epm_port=app.epm.port)
            with reader:
                body = reader.receive().message().body
            return reader.steps, body

        steps, body = await asyncio.to_thread(run)
        assert body == b"hello"
        assert steps[:2] == ["ept_map(qmcomm)", "R_QMGetRTQMServerPort"] and "ept_map(qm2qm)" in steps
    finally:
        await app.close()
