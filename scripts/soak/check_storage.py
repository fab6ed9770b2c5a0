"""Checks: disk full and a read-only store while running (issue 14; MS-MQDMPR 3.1.7.1.9 rStatus, MS-MQMQ 2.4).

The data directory lives on a small tmpfs this check mounts (root only; otherwise the check says why it
cannot run). Disk full: recoverable enqueues until the store cannot commit; read-only: ``mount -o remount,ro``.
Both must answer the affected callers with a clear error (HTTP 507 / an MQ_ERROR HRESULT, never a 500 or a
traceback), keep every acknowledged message, and work again once space / write access returns.
"""
from __future__ import annotations

import base64
import os
import subprocess
import time

from soak import qm2qm_calls as q
from soak import wire
from soak.admin import Admin
from soak.harness import LogWatch, Run

QUEUE = r".\private$\soak-storage"
SEQ_MASK = (1 << 56) - 1
BODY = base64.b64encode(os.urandom(256 * 1024)).decode()


def _mount(path, *opts: str) -> None:
    subprocess.run(["mount", *opts, str(path)], check=True, capture_output=True)


def _enqueue_until_error(admin: Admin, limit: int = 400) -> tuple[list[int], tuple[int, dict] | None]:
    acked = []
    for _ in range(limit):
        status, data = admin.json("POST", f"/v1/queues/{Admin.q(QUEUE)}/messages",
                                  {"body_base64": BODY, "delivery": "recoverable"})
        if status != 201:
            return acked, (status, data)
        acked.append(data["lookup_id"])
    return acked, None


def _present(admin: Admin) -> set[int]:
    return {m["lookup_id"] for m in admin.messages(QUEUE)}


def _receive_ack(server, admin: Admin) -> tuple[int, int, int]:
    """One receive + ACK over qm2qm: (StartReceive2 HRESULT, EndReceive HRESULT or fault status | 1 << 40,
    the received message's lookup id)."""
    handle = admin.ok("POST", f"/v1/queues/{Admin.q(QUEUE)}/open", {})["hRemoteQueue"]
    s = q.Session(server.host, server.port, handle)
    try:
        _, stub = s.client.call(q.START_RECEIVE2, q.start_receive2(handle, q.MQ_ACTION_RECEIVE, 0))
        status, context, seq = q.receive_result(stub)
        if status:
            return status, -1, 0
        ptype, stub = s.client.call(q.END_RECEIVE, q.end_receive(context, q.RR_ACK))
        end = q.hresult_at_end(stub) if ptype == wire.MSRPC_RESPONSE else int.from_bytes(stub, "little") | 1 << 40
        s.client.call(q.CLOSE_QUEUE, q.close_queue(s.session))
        return status, end, seq
    finally:
        s.client.close()


def _scenario(r: Run, name: str, mnt, break_it, restore) -> None:
    server = r.server(f"storage-{name}", data_dir=mnt / name).start()
    watch = LogWatch(server)
    admin = Admin(server.admin)
    detail = []
    ok = True
    try:
        admin.ok("POST", "/v1/queues", {"pathname": QUEUE})
        before, _ = _enqueue_until_error(admin, 4)
        break_it()
        acked, error = _enqueue_until_error(admin)
        acked = before + acked
        if error is None:
            ok = False
            detail.append("enqueues never failed")
        else:
            status, data = error
            clear = status == 507 and isinstance(data, dict) and data.get("error", "").startswith("MQ_ERROR_")
            ok &= clear
            detail.append(f"enqueue answered {status} {data.get('error') if isinstance(data, dict) else data!r}: "
                          f"{(data.get('message') if isinstance(data, dict) else '')!s:.90}")
        rs, end, seq = _receive_ack(server, admin)
        ack_clear = rs == 0 and not end >> 40 and end != 0
        ok &= ack_clear
        detail.append(f"receive 0x{rs:08X} + ACK {'fault 0x%08X' % (end & 0xFFFFFFFF) if end >> 40 else '0x%08X' % end}")
        # the received message went to the caller; its ACK was refused, so it may or may not stay
        acked = [a for a in acked if a & SEQ_MASK != seq]
        present = _present(admin)
        missing = set(acked) - present
        restore()
        time.sleep(0.5)
        after, err2 = _enqueue_until_error(admin, 3)
        recovered = len(after) == 3
        rs2, end2, seq2 = _receive_ack(server, admin)
        acked = [a for a in acked if a & SEQ_MASK != seq2]
        recovered &= rs2 == 0 and end2 == 0
        present = _present(admin)
        missing |= set(acked) - present
        ok &= not missing and recovered
        detail.append(f"{len(acked)} acknowledged enqueues, {len(missing)} lost; after restore: enqueue "
                      f"{'ok' if len(after) == 3 else err2}, receive+ACK {'ok' if rs2 == 0 and end2 == 0 else (rs2, end2)}")
        problems = watch.new_problems()
        tracebacks = [p for p in problems if p.startswith("Traceback")]
        ok &= not tracebacks and server.alive()
        detail.append(f"server log: {len(problems)} ERROR lines, {len(tracebacks)} tracebacks"
                      + (f" ({problems[0][:120]})" if problems else ""))
    finally:
        restore()
        admin.close()
        server.stop()
    r.report.check(f"storage fault '{name}': clear errors, no acknowledged message lost, recovery", ok, "; ".join(detail))


EXT4_IOC_SHUTDOWN = 0x8004587D          # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_DEFAULT = 0            # flush data and metadata, then refuse every write


def read_only(r: Run) -> None:
    """The store's file system stops accepting writes while the server runs (ext4 shut down after a full flush:
    `mount -o remount,ro` is refused while SQLite holds its files open for writing, so this is how a disk that
    turns read-only under a running server is reproduced). Callers get clear errors; after the file system is
    mounted again and the server restarted, every acknowledged message is there."""
    import fcntl
    import struct
    image, mnt = r.workdir / "ext4.img", r.workdir / "ext4"
    mnt.mkdir()
    with open(image, "wb") as fh:
        fh.truncate(64 * 1024 * 1024)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    loop = subprocess.run(["losetup", "-f", "--show", str(image)], check=True, capture_output=True,
                          text=True).stdout.strip()
    detail, ok = [], True
    try:
        subprocess.run(["mount", loop, str(mnt)], check=True, capture_output=True)
        server = r.server("storage-read-only", data_dir=mnt / "data").start()
        watch = LogWatch(server)
        admin = Admin(server.admin)
        admin.ok("POST", "/v1/queues", {"pathname": QUEUE})
        acked, _ = _enqueue_until_error(admin, 10)
        fd = os.open(mnt, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_DEFAULT))
        finally:
            os.close(fd)
        more, error = _enqueue_until_error(admin, 5)
        acked += more
        if error is None:
            ok = False
            detail.append("enqueues kept succeeding on a read-only store")
        else:
            status, data = error
            ok &= status == 507 and isinstance(data, dict) and data.get("error", "").startswith("MQ_ERROR_")
            detail.append(f"enqueue answered {status} {data.get('error') if isinstance(data, dict) else data!r}")
        rs, end, seq = _receive_ack(server, admin)
        ok &= rs == 0 and not end >> 40 and end != 0
        detail.append(f"receive 0x{rs:08X} + ACK {'fault 0x%08X' % (end & 0xFFFFFFFF) if end >> 40 else '0x%08X' % end}")
        acked = [a for a in acked if a & SEQ_MASK != seq]
        admin.close()
        code = server.stop(timeout=30)
        problems = watch.new_problems()
        tracebacks = [p for p in problems if p.startswith("Traceback")]
        detail.append(f"server stopped (exit {code}); log: {len(problems)} ERROR lines, {len(tracebacks)} tracebacks")
        ok &= not tracebacks
        subprocess.run(["umount", str(mnt)], check=True, capture_output=True)
        subprocess.run(["mount", loop, str(mnt)], check=True, capture_output=True)
        server = r.server("storage-read-only-after", data_dir=mnt / "data").start()
        admin = Admin(server.admin)
        present = _present(admin)
        missing = set(acked) - present
        after, _ = _enqueue_until_error(admin, 3)
        rs2, end2, _ = _receive_ack(server, admin)
        admin.close()
        server.stop()
        recovered = len(after) == 3 and rs2 == 0 and end2 == 0
        ok &= not missing and recovered
        detail.append(f"after remount + restart: {len(acked)} acknowledged, {len(missing)} lost; enqueue and "
                      f"receive+ACK {'ok' if recovered else 'failed'}")
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        subprocess.run(["losetup", "-d", loop], capture_output=True)
    r.report.check("storage fault 'read-only' (file system stops accepting writes): clear errors, "
                   "no acknowledged message lost, recovery", ok, "; ".join(detail))


def run(r: Run) -> None:
    if os.geteuid() != 0:
        r.report.check("storage faults", False, "needs root to mount a tmpfs and a loop device (run as root)")
        return
    mnt = r.workdir / "tmpfs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "soak-tmpfs", str(mnt)], check=True)
    try:
        filler = mnt / "filler"

        def fill() -> None:
            free = os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize
            with open(filler, "wb") as fh:
                fh.write(b"\0" * max(0, free - 3 * 1024 * 1024))

        def unfill() -> None:
            if filler.exists():
                filler.unlink()

        _scenario(r, "disk-full", mnt, fill, unfill)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    read_only(r)
