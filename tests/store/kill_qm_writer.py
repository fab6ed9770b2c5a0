"""Child process of test_kill.py: a QueueManager on SqliteStore, enqueuing and two-phase reading
(MS-MQDMPR 3.1.7.1.9-12).

Usage: python kill_qm_writer.py DATA_DIR TAG [drain]. Runs until killed. With ``drain`` it enqueues FILL messages first,
then only reads them, and its store's writer leaves the ACKs' deletions in the delete journal (as a crash finds
them). stdout lines:
``enq <lookup id> <body>`` after Enqueue Message + ``await qm.durable()``;
``got <lookup id>`` when Dequeue Message Begin returned it (Locked, not durable yet);
``ack <lookup id>`` after Dequeue Message End with delete + durable();
``held <lookup id>`` after durable() for a message deliberately left Locked (never ended).
"""
import asyncio
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from shared_adm import status as st  # noqa: E402
from shared_adm.clock import INFINITE, AsyncioScheduler  # noqa: E402
from shared_adm.descriptor import PendingRead  # noqa: E402
from shared_adm.enums import QueueAccessType, QueueShareMode  # noqa: E402
from shared_adm.message import DeliveryGuarantee, Message  # noqa: E402
from shared_adm.queue_manager import QueueManager  # noqa: E402
from shared_adm.store import SqliteStore  # noqa: E402
from shared_adm.store import sqlite as sqlite_module  # noqa: E402

PATHNAME = ".\\private$\\kill"
FORMAT_NAME = "DIRECT=OS:qm2qm\\private$\\kill"
PRODUCERS = 4
CONSUMERS = 2
FILL = 1500


async def main(data_dir: str, tag: str, drain: bool) -> None:
    if drain:
        sqlite_module._APPLY_AFTER_S = 3600.0
    qm = QueueManager(store=SqliteStore(data_dir, commit_interval_ms=5), scheduler=AsyncioScheduler(),
                      computer_name="qm2qm")
    qm.initialize()
    queue = qm.queue_by_pathname(PATHNAME)
    if queue is None:
        status, queue = qm.create_queue(PATHNAME)
        assert status == st.MQ_OK, hex(status)
    await qm.durable()
    print("start", flush=True)
    counter = 0

    async def producer() -> None:
        nonlocal counter
        while True:
            counter += 1
            body = f"{tag}:{counter}"
            message = Message(body=body.encode(), label=body, delivery_guarantee=DeliveryGuarantee.RECOVERABLE)
            assert qm.enqueue_message(queue, message) == 0
            await qm.durable()
            print(f"enq {message.lookup_identifier} {body}", flush=True)

    async def consumer() -> None:
        status, descriptor = qm.open_queue(FORMAT_NAME, QueueAccessType.RECEIVE_ACCESS, QueueShareMode.DENY_NONE)
        assert status == st.MQ_OK, hex(status)
        reads = 0
        while True:
            result = qm.dequeue_message_begin(descriptor, INFINITE)
            if isinstance(result, PendingRead):
                result = await result
            assert result.ok, hex(result.status)
            lookup = result.position.lookup_identifier
            print(f"got {lookup}", flush=True)
            reads += 1
            if reads % 4 == 0:          # left Locked for good: Initialization must make it Available
                await qm.durable()
                print(f"held {lookup}", flush=True)
                continue
            assert qm.dequeue_message_end(descriptor, result.position, delete_message=True) == st.MQ_OK
            await qm.durable()
            print(f"ack {lookup}", flush=True)

    if drain:
        filled = []
        for _ in range(FILL):
            counter += 1
            body = f"{tag}:{counter}"
            message = Message(body=body.encode(), label=body, delivery_guarantee=DeliveryGuarantee.RECOVERABLE)
            assert qm.enqueue_message(queue, message) == 0
            filled.append(message)
        await qm.durable()
        for message in filled:
            print(f"enq {message.lookup_identifier} {message.body.decode()}", flush=True)
    producers = () if drain else [producer() for _ in range(PRODUCERS)]
    await asyncio.gather(*producers, *(consumer() for _ in range(CONSUMERS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:] == ["drain"]))
