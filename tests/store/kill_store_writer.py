"""Child process of test_kill.py: drives a SqliteStore and prints each mutation once durable (MS-MQDMPR 3.1.1).

Usage: python kill_store_writer.py DATA_DIR. Runs until killed. Every line on stdout is an
acknowledgement printed only after ``await store.durable()`` returned for it:
``start <sequential id>``, ``put <id>``, ``state <id> <State>``, ``del <id>``.
The operations on message <id> follow ``plan(id)``; the parent uses the same plan to tell which
operation was in flight when it killed the process.
"""
import asyncio
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from shared_adm.message import DeliveryGuarantee, Message  # noqa: E402
from shared_adm.store import SqliteStore, StoredMessage, StoredQueue  # noqa: E402

QUEUE = "5b0f3f8e-2f1c-4b61-9d7e-0c6a1f2e3d4c"
PRODUCERS = 8


def body(lookup: int) -> bytes:
    """The body of message <lookup>, checked byte for byte after the kill."""
    return (b"message %d;" % lookup) * (1 + lookup % 7) * 150     # up to ~20 KB: WAL checkpoints happen mid-run


def plan(lookup: int) -> list[tuple]:
    """The operations applied to message <lookup>, in order."""
    ops = [("put",)]
    if lookup % 3 == 0:
        ops.append(("state", "Locked"))
        if lookup % 2 == 0:
            ops.append(("state", "Available"))
    if lookup % 5 == 0:
        ops.append(("del",))
    return ops


async def main(data_dir: str) -> None:
    store = SqliteStore(data_dir, commit_interval_ms=5)
    snapshot = store.load()
    next_id = snapshot.sequential_id + 1
    store.put_queue(StoredQueue(QUEUE, {"pathname": "kill\\private$\\q"}))
    await store.durable()
    print(f"start {snapshot.sequential_id}", flush=True)

    async def producer() -> None:
        nonlocal next_id
        while True:
            lookup = next_id
            next_id += 1
            for op in plan(lookup):
                if op[0] == "put":
                    store.set_sequential_id(lookup)
                    store.put_message(StoredMessage(QUEUE, lookup, "Available", Message(
                        lookup_identifier=lookup, body=body(lookup), label=f"m{lookup}",
                        delivery_guarantee=DeliveryGuarantee.RECOVERABLE)))
                elif op[0] == "state":
                    store.set_message_state(QUEUE, lookup, op[1])
                else:
                    store.delete_message(QUEUE, lookup)
                await store.durable()
                print(" ".join([op[0], str(lookup), *op[1:]]), flush=True)

    await asyncio.gather(*(producer() for _ in range(PRODUCERS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
