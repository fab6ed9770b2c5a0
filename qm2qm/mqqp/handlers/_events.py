"""The MS-MQDMPR lookup the qm2qm handlers make (MS-MQQP 3.1.1.1: OpenQueueDescriptor by Handle; cursors: remote_read)."""
from __future__ import annotations

from typing import Any

from shared_adm.enums import RemoteReadState

_NOT_REMOTE = RemoteReadState.NONE


def find_open_queue_descriptor(qm: Any, handle: int, peer_host: str) -> Any | None:
    """The OpenQueueDescriptor with Handle = handle in any Queue.OpenQueueDescriptorCollection (3.1.1.16),
    if it was opened for a remote read (RemoteReadState not None) by the caller's host (its qmcomm open's:
    OpenQueueDescriptor.opener_host; docs/mqqp-choices.md)."""
    descriptor = qm.descriptor_by_handle(handle)
    if descriptor is None or descriptor.remote_read_state is _NOT_REMOTE \
            or not descriptor.serves(peer_host):
        return None
    return descriptor

