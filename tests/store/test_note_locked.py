"""SqliteStore.note_locked: a Locked state is not written (Initialization makes it Available, MS-MQDMPR 3.1.3); the
group commit's hold for the ACKs of recently noted locks is tested with the written ones (test_sqlite, LOCKED_WAYS)."""
from shared_adm.clock import ManualScheduler
from shared_adm.enums import PositionState, QueueAccessType, QueueShareMode
from shared_adm.message import DeliveryGuarantee, Message
from shared_adm.queue_manager import QueueManager
from shared_adm.store import SqliteStore
from tests.store.test_sqlite import _locked_store


async def test_a_noted_lock_writes_nothing(data_dir):
    store = _locked_store(data_dir, 2, noted=True)
    before = store.commits
    assert store.when_durable(lambda error: error) is None     # nothing recorded: nothing to commit
    assert store.commits == before
    assert [m.state for m in store.load().messages] == ["Available", "Available"]
    store.close()


def test_a_received_unacked_recoverable_message_is_available_after_a_restart(data_dir):
    qm = QueueManager(store=SqliteStore(data_dir), scheduler=ManualScheduler(), computer_name="qm2qm")
    qm.initialize()
    _, queue = qm.create_queue(".\\private$\\locked")
    kept = Message(body=b"kept", delivery_guarantee=DeliveryGuarantee.RECOVERABLE)
    acked = Message(body=b"acked", delivery_guarantee=DeliveryGuarantee.RECOVERABLE)
    assert qm.enqueue_message(queue, kept) == 0 and qm.enqueue_message(queue, acked) == 0
    _, descriptor = qm.open_queue(r"DIRECT=OS:qm2qm\private$\locked", QueueAccessType.RECEIVE_ACCESS,
                                  QueueShareMode.DENY_NONE)
    first = qm.dequeue_message_begin(descriptor, 0)
    second = qm.dequeue_message_begin(descriptor, 0)
    assert first.position.state is PositionState.LOCKED
    assert qm.dequeue_message_end(descriptor, second.position, delete_message=True) == 0
    qm.store.flush()
    assert [m.state for m in qm.store.load().messages] == ["Available"]    # Locked, not written
    qm.store.close()                        # as a kill -9 would leave it: no NACK recorded
    again = QueueManager(store=SqliteStore(data_dir), scheduler=ManualScheduler(), computer_name="qm2qm")
    again.initialize()
    positions = [p for q in again.queue_collection.values() for p in q.message_position_list]
    assert [(p.state, p.message.body) for p in positions] == [(PositionState.AVAILABLE, b"kept")]
    again.store.close()
