"""Messages Locked by a receive until its End: ACK/NACK, cancel, and release on close or rundown (MS-MQDMPR 3.1.7.1.12, 3.1.7.1.17)."""
from __future__ import annotations

from qm2qm.remote_read.core import ReadCore
from qm2qm.remote_read.entries import ReadEntry
from shared_adm import status as st
from shared_adm.compact import recoverable
from shared_adm.descriptor import ReadResult


def lock(core: ReadCore, entry: ReadEntry, result: ReadResult) -> None:
    """The receive of ``entry`` now holds the message it Locked, until release()."""
    entry.position = result.position
    entry.lookup_identifier = result.position.lookup_identifier
    core.locked.add(entry)


def release(core: ReadCore, entry: ReadEntry, *, delete: bool = False, transactional: bool = False) -> int:
    """Dequeue Message End (MS-MQDMPR 3.1.7.1.12) for the message of a receive, once: ACK deletes it, NACK
    makes it Available again. Returns its rStatus; MQ_ERROR_INVALID_HANDLE if already released, or if the
    descriptor was closed (MS-MQDMPR Close Queue has then released the message itself)."""
    if entry.finished or entry.position is None:
        return st.MQ_ERROR_INVALID_HANDLE
    entry.finished = True
    core.locked.remove(entry)
    if entry.timer is not None:
        entry.timer.cancel()
        entry.timer = None
    descriptor = entry.descriptor
    if descriptor is None:
        return st.MQ_ERROR_INVALID_HANDLE
    return core.qm.dequeue_message_end(descriptor, entry.position, delete_message=delete,
                                       transactional=transactional)


def finish_receive(core: ReadCore, entry: ReadEntry, *, ack: bool, transactional: bool = False) -> tuple[int, bool]:
    """release() for the End of a receive (ACK deletes, NACK returns): (rStatus, whether the answer waits for the
    store's commit). Only an ACK outside a transaction that deleted a stored message waits (docs/mqqp-choices.md,
    Durability): an express message is never stored (MS-MQDMPR 3.1.1.12 DeliveryGuarantee), so its ACK is answered
    at once, not after another call's commit."""
    position = entry.position
    stored = position is not None and recoverable(position.packed)
    status = release(core, entry, delete=ack, transactional=transactional)
    return status, ack and status == st.MQ_OK and stored and not transactional


def cancel(core: ReadCore, entry: ReadEntry, status: int) -> int:
    """Cancel Waiting Message Read Request (MS-MQDMPR 3.1.7.1.17) for the entry, answering its read with
    ``status``, then forget the entry. Peeks are raised with the request id as their tag too."""
    result = st.STATUS_NOT_FOUND
    descriptor = entry.descriptor
    if descriptor is not None:
        result = core.qm.cancel_waiting_message_read_request(descriptor, entry.request_id, status)
    core.pending.remove(entry)
    return result


def release_descriptor(core: ReadCore, descriptor_handle: int, cancel_status: int) -> None:
    """Before a descriptor closes: cancel its waiting reads (with ``cancel_status``) and NACK every message a
    receive through it still holds."""
    for waiting in core.pending.for_descriptor(descriptor_handle):
        cancel(core, waiting, cancel_status)
    for received in core.locked.for_descriptor(descriptor_handle):
        release(core, received, delete=False)
