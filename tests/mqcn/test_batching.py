"""The optional <3>/<13> batching of MS-MQCN (5.1 DoS mitigation) on a ManualScheduler."""
import asyncio
import uuid

from qm2qm.mqcn import codec as c
from qm2qm.mqcn.server import BatchingPolicy, ChangeNotificationServer
from shared_adm.directory import DirectoryObject
from shared_adm.message import Message

HANG_GUARD_S = 30
MINUTE = 60_000


def notify_queue(qm):
    return next(q for q in qm.queue_collection.values() if q.private_queue_number == 3)


def send_delete(qm, identifier):
    body = c.message_body(c.ChangeNotificationMessage(2, body=c.NotificationBody(3, identifier, "DC01")))
    assert qm.enqueue_message(notify_queue(qm), Message(body=body)) == 0


async def _until(predicate):
    async def poll():
        while not predicate():
            await asyncio.sleep(0.001)
    await asyncio.wait_for(poll(), HANG_GUARD_S)


def public_queues(qm, n):
    queues = []
    for i in range(n):
        _, q = qm.create_queue(f"qm2qm\\pub{i}")
        queues.append(q)
    return queues


async def test_first_batch_waits_one_minute_then_the_rest_of_15_minutes(qm, directory):
    server = ChangeNotificationServer(qm, directory, batching=BatchingPolicy())
    a, b = public_queues(qm, 2)
    await server.start()
    try:
        send_delete(qm, a.identifier)
        await _until(lambda: len(server.held) == 1)
        qm.scheduler.advance(MINUTE - 1)
        assert a.identifier in qm.queue_collection
        qm.scheduler.advance(1)
        assert a.identifier not in qm.queue_collection and server.held == []
        qm.scheduler.advance(2 * MINUTE)
        send_delete(qm, b.identifier)
        await _until(lambda: len(server.held) == 1)
        qm.scheduler.advance(13 * MINUTE - 1)             # 15 minutes after the last processing, not 1 minute
        assert b.identifier in qm.queue_collection
        qm.scheduler.advance(1)
        assert b.identifier not in qm.queue_collection
    finally:
        await server.stop()


async def test_a_flood_is_ignored_and_public_queues_are_refreshed_instead(qm, directory):
    server = ChangeNotificationServer(qm, directory, batching=BatchingPolicy(flood_threshold=5))
    [queue] = public_queues(qm, 1)
    directory.backend.create(DirectoryObject("Queue", queue.identifier, {"Label": "refreshed"}))
    await server.start()
    try:
        for _ in range(4):
            send_delete(qm, uuid.uuid4())
        send_delete(qm, queue.identifier)
        await _until(lambda: len(server.held) == 5)
        qm.scheduler.advance(MINUTE)
        assert server.refreshes == 1 and queue.identifier in qm.queue_collection and queue.label == "refreshed"
    finally:
        await server.stop()


async def test_stop_applies_what_is_held(qm, directory):
    server = ChangeNotificationServer(qm, directory, batching=BatchingPolicy())
    [queue] = public_queues(qm, 1)
    await server.start()
    send_delete(qm, queue.identifier)
    await _until(lambda: len(server.held) == 1)
    await server.stop()
    assert queue.identifier not in qm.queue_collection and qm.scheduler.pending() == 0
