"""Replay: re-issue the client side of recorded qm2qm sessions against a live server (MS-MQQP 3.1.4), translating
context handles, queue handles and cursors from recorded to live values, keeping the recorded order and
concurrency, and writing what happened as a call table for the diff job (docs/pipeline.md "Replay").

qmcomm sessions of the same recording (the Windows remote-read sequence, MS-MQMP 4.2) are replayed against the
live qmcomm port (asked from the target, RemoteQMGetQMQMServerPort(IP_HANDSHAKE), unless given); the handles
R_QMOpenRemoteQueue and R_QMCreateRemoteCursor return are learned, so the qm2qm calls that follow use live values
without the admin API."""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from qm2qm.mqqp import codec
from qm2qm.mqqp.constants import QM2QM_UUID, QM2QM_VERSION
from qm2qm.pipeline import schema
from qm2qm.pipeline.decode import QM2QM_UUID_STR, QMCOMM_UUID_STR, decode_call
from qm2qm.pipeline.rpc_client import RpcClient, RpcClientError
from qm2qm.pipeline.rpcstream import SEALED
from qm2qm.pipeline.trace import CallWriter
from qm2qm.rpc.faults import NCA_S_FAULT_CANCEL, RPC_S_ACCESS_DENIED
from qm2qm.rpc.interface import NDR20, NDR64, RpcFault

log = logging.getLogger("qm2qm.replay")
NULL_HANDLE = bytes(20)
QUEUE_FIELDS = ("hQueue", "pQueue", "dwpContext")
# A live call that does not answer within this many seconds is recorded as no_response (a hang guard).
DEFAULT_CALL_TIMEOUT_S = 30.0
# the faults of a server that refuses an unauthenticated call: the RPC runtime's, and MS-MQQP 5's
# MQ_ERROR_ACCESS_DENIED (MS-MQMQ 2.4)
ACCESS_DENIED = (RPC_S_ACCESS_DENIED, 0xC00E0025)


class ReplayError(Exception):
    """Replay cannot start (unreadable recording, no qm2qm calls, unreachable admin API)."""


@dataclass
class ReplayResult:
    """Counts of what the replay did, and the problems met (one line each)."""
    calls: int = 0
    sent: int = 0
    skipped: int = 0
    failed: int = 0
    opened_queues: dict[int, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def load_recording(path: str | Path) -> tuple[list[dict], list[str]]:
    """The qm2qm calls of a capture or trace (any format ingest reads), and the problems met reading it."""
    from qm2qm.pipeline.ingest import ingest_file
    result = ingest_file(path)
    problems = [p["message"] for p in result.problems]
    if not result.calls and problems:
        raise ReplayError(problems[0])
    return result.calls, problems


def infer_queue_map(rows: list[dict]) -> dict[int, str]:
    """Recorded queue handle → path name, from the queue_name a trace carries (first seen wins)."""
    out: dict[int, str] = {}
    for row in rows:
        if row.get("queue_handle") and row.get("queue_name"):
            out.setdefault(int(row["queue_handle"]), row["queue_name"])
    return out


class Translator:
    """Recorded → live values: context handles (learned from responses), queue handles and cursors (opened
    through the admin API on first use)."""

    def __init__(self, queue_map: dict[int, str], admin: Any, result: ReplayResult) -> None:
        self.queue_map = queue_map
        self.admin = admin
        self.result = result
        self.contexts: dict[bytes, bytes] = {}
        self.queues: dict[int, int] = {}
        self.cursors: dict[tuple[int, int], int] = {}
        self.lock = asyncio.Lock()

    async def queue(self, recorded: int) -> int:
        """The live handle of a recorded queue handle, opened through the admin API on first use."""
        if not recorded:
            return recorded
        live = self.queues.get(recorded)
        if live is not None:
            return live
        async with self.lock:
            if recorded in self.queues:
                return self.queues[recorded]
            name = self.queue_map.get(recorded)
            if name is None or self.admin is None:
                why = "no path name mapped (--queue-map)" if name is None else "no admin API URL (--admin)"
                self.result.problems.append(f"queue handle {recorded}: {why}; sent unchanged")
                self.queues[recorded] = recorded
                return recorded
            try:
                view = await asyncio.to_thread(self.admin.open_queue, name)
            except Exception as exc:   # noqa: BLE001 - AdminError or a transport error, reported
                self.result.problems.append(f"queue handle {recorded}: opening '{name}' failed: {exc}")
                self.queues[recorded] = recorded
                return recorded
            live = self.queues[recorded] = int(view["hRemoteQueue"])
            self.result.opened_queues[recorded] = name
            return live

    async def cursor(self, recorded_queue: int, live_queue: int, recorded: int) -> int:
        """The live cursor of a recorded hCursor, opened on the live queue handle on first use."""
        if not recorded:
            return recorded
        key = (recorded_queue, recorded)
        if key in self.cursors:
            return self.cursors[key]
        async with self.lock:
            if key in self.cursors:
                return self.cursors[key]
            live = recorded
            if self.admin is not None and recorded_queue in self.result.opened_queues:
                try:
                    live = int((await asyncio.to_thread(self.admin.open_cursor, live_queue))["hCursor"])
                except Exception as exc:   # noqa: BLE001
                    self.result.problems.append(f"cursor {recorded} on queue handle {recorded_queue}: {exc}")
            self.cursors[key] = live
            return live

    async def alias(self, value: int, recorded_queue: int, live_queue: int) -> int:
        """pQueue / dwpContext / dwQueue: the live handle when they repeat the call's queue handle (MS-MQMP
        3.1.4.2 <28>), a mapped handle of their own, or the recorded value."""
        if value == recorded_queue:
            return live_queue
        if value in self.queue_map or value in self.queues:
            return await self.queue(value)
        return value

    def context(self, recorded: bytes) -> bytes:
        """The live context handle learned for a recorded one (NULL and unknown ones unchanged)."""
        return self.contexts.get(bytes(recorded), bytes(recorded))

    async def request(self, opnum: int, obj: Any) -> Any:
        """A copy of a decoded request with every recorded handle replaced by its live value."""
        obj = dataclasses.replace(obj) if dataclasses.is_dataclass(obj) else obj
        for name in ("pphContext",):
            if hasattr(obj, name):
                setattr(obj, name, self.context(getattr(obj, name)))
        recorded_queue = getattr(obj, "hQueue", None)
        if recorded_queue is not None:
            obj.hQueue = await self.queue(recorded_queue)
            for name in QUEUE_FIELDS[1:]:
                if hasattr(obj, name):
                    setattr(obj, name, await self.alias(getattr(obj, name), recorded_queue, obj.hQueue))
        if hasattr(obj, "hCursor") and recorded_queue is not None:
            obj.hCursor = await self.cursor(recorded_queue, obj.hQueue, obj.hCursor)
        desc = getattr(obj, "lpRemoteReadDesc", None)
        holder = getattr(obj, "lpRemoteReadDesc2", None)
        if holder is not None and holder.pRemoteReadDesc is not None:
            holder = dataclasses.replace(holder, pRemoteReadDesc=dataclasses.replace(holder.pRemoteReadDesc))
            obj.lpRemoteReadDesc2 = holder
            desc = holder.pRemoteReadDesc
        elif desc is not None:
            desc = obj.lpRemoteReadDesc = dataclasses.replace(desc)
        if desc is not None:
            recorded_queue = desc.hRemoteQueue
            desc.hRemoteQueue = await self.queue(recorded_queue)
            desc.dwQueue = await self.alias(desc.dwQueue, recorded_queue, desc.hRemoteQueue)
            desc.hCursor = await self.cursor(recorded_queue, desc.hRemoteQueue, desc.hCursor)
        return obj

    async def qmcomm_request(self, opnum: int, call: Any) -> Any:
        """A decoded qmcomm request (qm2qm.mqmp.idl) with its recorded handles replaced by live ones."""
        if opnum == 3:
            from qm2qm.mqmp.codec import wire_handle
            call["pphContext"] = self.context(wire_handle(call["pphContext"]))
        elif opnum == 4:
            call["hQueue"] = self.queues.get(call["hQueue"], call["hQueue"])
        return call

    def learn_qmcomm(self, opnum: int, recorded: dict, live_stub: bytes, ndr64: bool) -> None:
        """R_QMOpenRemoteQueue: recorded → live context handle and descriptor handle (one value in pdwContext,
        dwpQueue and phQueue, MS-MQMP 3.1.4.2 <28>); R_QMCreateRemoteCursor: recorded → live cursor."""
        from qm2qm.mqmp import codec as qmcomm_codec
        try:
            live = qmcomm_codec.response_view(opnum, qmcomm_codec.decode_response(opnum, live_stub, ndr64))
        except RpcFault:
            return
        if opnum == 2 and live.get("ErrorCode") == 0:
            if recorded.get("context_handle_out"):
                self.contexts[bytes(recorded["context_handle_out"])] = bytes.fromhex(live["pphContext"])
            if recorded.get("queue_handle"):
                self.queues[int(recorded["queue_handle"])] = live["phQueue"]
        elif opnum == 4 and live.get("ErrorCode") == 0 and recorded.get("cursor"):
            self.cursors[(int(recorded["queue_handle"] or 0), int(recorded["cursor"]))] = live["phCursor"]

    def learn(self, opnum: int, recorded: dict, live_stub: bytes, ndr64: bool) -> None:
        """Map the recorded [out] context handle to the live one returned for the same call."""
        if recorded.get("interface_uuid") == QMCOMM_UUID_STR:
            self.learn_qmcomm(opnum, recorded, live_stub, ndr64)
            return
        out = recorded.get("context_handle_out")
        if not out or bytes(out) == NULL_HANDLE:
            return
        try:
            response = codec.decode_response(opnum, live_stub, ndr64)
        except RpcFault:
            return
        live = getattr(response, "pphContext", None) or getattr(response, "phContext", None)
        if live is not None and bytes(live) != NULL_HANDLE:
            self.contexts[bytes(out)] = bytes(live)


class _Session:
    """One recorded session: its live connection and how many of its calls are still to finish."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows
        self.left = len(rows)
        self.client: RpcClient | None = None
        self.connecting: asyncio.Lock = asyncio.Lock()
        self.broken: str | None = None


async def replay(rows: list[dict], host: str, port: int, out_path: str | Path, *, admin: Any = None,
                 queue_map: dict[int, str] | None = None, call_timeout: float = DEFAULT_CALL_TIMEOUT_S,
                 on_progress: Callable[[int], None] | None = None, qmcomm_port: int | None = None) -> ReplayResult:
    """Replay ``rows`` (a call table's qm2qm calls) against host:port, writing the live calls to ``out_path``.

    Order and concurrency: a call is sent once every recorded call that had been answered before it was sent
    has been answered live; calls that overlapped in the recording overlap in the replay."""
    result = ReplayResult()
    calls = [r for r in rows if r.get("interface_uuid") in (QM2QM_UUID_STR, QMCOMM_UUID_STR)
             and r.get("request_stub") is not None]
    result.skipped = len(rows) - len(calls)
    result.calls = len(calls)
    if not calls:
        unbound = sum(1 for r in rows if "was never bound" in (r.get("decode_error") or ""))
        if unbound:
            raise ReplayError(f"the recording holds no qm2qm calls to replay: its {unbound} call(s) are on "
                              f"presentation contexts never bound in the capture (it started after the bind); "
                              f"capture from the start of the connections")
        raise ReplayError("the recording holds no qm2qm calls to replay")
    calls = _drop_sealed(calls, result)
    try:
        writer = CallWriter(out_path, source="replay")
    except OSError as exc:     # pyarrow's strerror is a whole sentence: the errno's text, and the path it names
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(out_path) else ""
        raise ReplayError(f"cannot write {out_path}: {why}{where}") from None
    try:
        return await _replay(calls, host, port, writer, result, admin, queue_map, call_timeout, on_progress,
                             qmcomm_port)
    except ReplayError:
        writer.close()
        Path(out_path).unlink(missing_ok=True)         # refused before any call: leave no empty replay behind
        raise
    finally:
        writer.close()


async def _replay(calls: list[dict], host: str, port: int, writer: CallWriter, result: ReplayResult, admin: Any,
                  queue_map: dict[int, str] | None, call_timeout: float, on_progress: Any,
                  qmcomm_port: int | None) -> ReplayResult:
    ports = {QM2QM_UUID_STR: port}
    if any(r["interface_uuid"] == QMCOMM_UUID_STR for r in calls):
        ports[QMCOMM_UUID_STR] = qmcomm_port or await _live_qmcomm_port(host, port)
    mapping = dict(infer_queue_map(calls))
    mapping.update(queue_map or {})
    translator = Translator(mapping, admin, result)
    sessions: dict[tuple, _Session] = {}
    for row in sorted(calls, key=lambda r: (r["session_seq"] or 0, r["call_index"] or 0)):
        key = (row.get("source_file"), row["session_id"])
        sessions.setdefault(key, _Session([])).rows.append(row)
    for s in sessions.values():
        s.left = len(s.rows)
    last = max((r["response_time_us"] or r["request_time_us"] or 0) for r in calls) + 1
    ended = {id(r): _answer_time(r, result) for r in calls}
    events = [((r["request_time_us"] or 0), 0, r["session_seq"] or 0, r["call_index"] or 0, id(r), r) for r in calls]
    # a recorded co_cancel (the call ended cancelled or with the cancel fault) is replayed when the call ended
    events += [((ended[id(r)] or last), 1, r["session_seq"] or 0, r["call_index"] or 0, id(r), r)
               for r in calls
               if r.get("status_kind") == schema.CANCELLED or r.get("fault_status") == NCA_S_FAULT_CANCEL]
    events.sort(key=lambda e: e[:5])
    answered = sorted((r for r in calls if ended[id(r)] is not None), key=lambda r: ended[id(r)])
    # answers stamped at the very instant of a request (a coarse capture clock) that precede it in its session's
    # call order: (session, instant) -> those calls by call_index, and how many of each have been waited for
    ties: dict[tuple, list[dict]] = {}
    for r in sorted(answered, key=lambda r: r["call_index"] or 0):
        ties.setdefault((r.get("source_file"), r["session_id"], ended[id(r)]), []).append(r)
    tied: dict[tuple, int] = {}
    done: dict[int, asyncio.Event] = {id(r): asyncio.Event() for r in calls}
    live_rows: list[dict] = []
    tasks: list[asyncio.Task] = []
    live_calls: dict[int, tuple[RpcClient, int]] = {}
    try:
        pointer = 0
        for when, kind, _seq, _index, _id, row in events:
            while pointer < len(answered) and ended[id(answered[pointer])] < when:
                await done[id(answered[pointer])].wait()
                pointer += 1
            key = (row.get("source_file"), row["session_id"], when)
            if key in ties:
                group, at = ties[key], tied.get(key, 0)
                while at < len(group) and (group[at]["call_index"] or 0) < (row["call_index"] or 0):
                    await done[id(group[at])].wait()
                    at += 1
                tied[key] = at
            if kind == 1:
                target = live_calls.get(id(row))
                if target is not None and not done[id(row)].is_set():
                    target[0].cancel(target[1])
                continue
            session = sessions[(row.get("source_file"), row["session_id"])]
            start = asyncio.Event()
            tasks.append(asyncio.create_task(_one(row, session, host, ports, translator, result, call_timeout,
                                                  live_rows, done[id(row)], on_progress, start, live_calls)))
            await start.wait()          # the request is on the wire before the next one is considered
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for s in sessions.values():
            if s.client is not None:
                await s.client.close()
        schema_rows = sorted(live_rows, key=lambda r: (r["session_seq"], r["call_index"]))
        writer.write(schema_rows)
    return result


def _drop_sealed(calls: list[dict], result: ReplayResult) -> list[dict]:
    """The calls replay can send: sealed ones (privacy level, MS-RPCE 2.2.1.1.8) are ciphertext without the
    session key, so they are counted failed, one warning a session; a recording of only those is refused."""
    sealed: dict[str, int] = {}
    for row in calls:
        if row.get("decode_error") == SEALED:
            sealed[row["session_id"]] = sealed.get(row["session_id"], 0) + 1
    if not sealed:
        return calls
    if sum(sealed.values()) == len(calls):
        raise ReplayError(f"the recording's {len(calls)} qm2qm call(s) are sealed (auth level 6, "
                          f"RPC_C_AUTHN_LEVEL_PKT_PRIVACY): replay cannot decrypt them; replay a capture made at "
                          f"auth level 5 or below, or a server trace (qm2qm serve --trace)")
    for session, n in sealed.items():
        result.problems.append(f"session {session}: {n} sealed call(s) (auth level 6, RPC_C_AUTHN_LEVEL_PKT_PRIVACY) "
                               f"not replayed")
    result.failed += sum(sealed.values())
    return [r for r in calls if r.get("decode_error") != SEALED]


def _answer_time(row: dict, result: ReplayResult) -> int | None:
    """When the recorded call was answered, never before it was sent: a response stamped before its request (a
    clock step, merged captures) counts as answered when sent, so the replay never waits for a call not yet sent."""
    answered, sent = row.get("response_time_us"), row.get("request_time_us") or 0
    if answered is None or answered >= sent:
        return answered
    result.problems.append(f"session {row['session_id']} call {row['call_index']}: response recorded "
                           f"{sent - answered} µs before its request; taken as answered when sent")
    return sent


async def _live_qmcomm_port(host: str, port: int) -> int:
    """The target's qmcomm port, as its RemoteQMGetQMQMServerPort(IP_HANDSHAKE) reports it (MS-MQQP 3.1.4.8)."""
    from qm2qm.client import Qm2qmClient, RpcCallError

    def ask() -> int:
        with Qm2qmClient(host, port) as client:
            return client.get_qmqm_server_port(0)
    try:
        answer = await asyncio.to_thread(ask)
    except RpcCallError as exc:
        raise ReplayError(f"the recording has qmcomm calls and the qmcomm port of {host}:{port} is unknown: {exc}")
    if not answer:
        raise ReplayError(f"the recording has qmcomm calls and {host}:{port} reports no qmcomm port")
    return answer


async def _client(session: _Session, host: str, port: int, ndr64: bool, interface: str = QM2QM_UUID_STR
                  ) -> RpcClient:
    async with session.connecting:
        if session.client is None:
            client = RpcClient(host, port)
            transfer = NDR64 if ndr64 else NDR20
            if interface == QMCOMM_UUID_STR:
                from qm2qm.mqmp.constants import QMCOMM_UUID, QMCOMM_VERSION
                abstract = (QMCOMM_UUID, *QMCOMM_VERSION)
            else:
                abstract = (QM2QM_UUID, *QM2QM_VERSION)
            await client.connect(abstract, (transfer[0], transfer[1], 0))
            session.client = client
        return session.client


async def _one(row: dict, session: _Session, host: str, ports: dict, translator: Translator, result: ReplayResult,
               call_timeout: float, live_rows: list, done: asyncio.Event, on_progress: Any,
               start: asyncio.Event, live_calls: dict) -> None:
    opnum = row["opnum"]
    ndr64 = row.get("transfer_syntax") == "NDR64"
    interface = row["interface_uuid"]
    port = ports[interface]
    live = schema.empty_call()
    live.update(source="replay", source_file=row.get("source_file"), session_id=row["session_id"],
                session_seq=row["session_seq"], call_index=row["call_index"], interface_uuid=interface,
                interface_version=row.get("interface_version"),
                interface_name="qmcomm" if interface == QMCOMM_UUID_STR else "qm2qm",
                transfer_syntax=row.get("transfer_syntax"), opnum=opnum, status_kind=schema.NO_RESPONSE)
    try:
        stub = await _translate(row, opnum, ndr64, translator)
        live.update(request_stub=stub, request_bytes=len(stub))
        if session.broken:
            raise RpcClientError(session.broken)
        client = await _client(session, host, port, ndr64, interface)
        t0 = time.time_ns()
        call_id, pending = await client.start(opnum, stub)
        live.update(connection_id=row["session_seq"], association_group_id=client.association_group_id,
                    call_id=call_id, request_time_us=t0 // 1000)
        live_calls[id(row)] = (client, call_id)
        start.set()
        kind, answer = await asyncio.wait_for(pending, call_timeout)
        t1 = time.time_ns()
        live.update(response_time_us=t1 // 1000, latency_us=(t1 - t0) // 1000, status_kind=kind)
        if kind == "ok":
            live.update(response_stub=answer, response_bytes=len(answer))
            translator.learn(opnum, row, answer, ndr64)
        else:
            live["fault_status"] = answer
        result.sent += 1
        if kind == "fault" and answer in ACCESS_DENIED and row.get("fault_status") != answer:
            # replay binds unauthenticated: a server requiring authentication refuses what the recording had signed
            result.failed += 1
            result.problems.append(f"session {row['session_id']} call {row['call_index']} ({row.get('op_name')}): "
                                   f"access denied live, not in the recording: replay sends calls unauthenticated "
                                   f"(the target may require authentication)")
    except asyncio.TimeoutError:
        result.problems.append(f"session {row['session_id']} call {row['call_index']} ({row.get('op_name')}): "
                               f"no answer within {call_timeout:g} s")
        result.failed += 1
    except RpcClientError as exc:
        session.broken = session.broken or str(exc)
        result.problems.append(f"session {row['session_id']} call {row['call_index']}: {exc}")
        result.failed += 1
    finally:
        start.set()
        decode_call(live)
        live_rows.append(live)
        done.set()
        session.left -= 1
        if session.left == 0 and session.client is not None:
            client, session.client = session.client, None
            await client.close()
        if on_progress is not None:
            on_progress(1)


async def _translate(row: dict, opnum: int, ndr64: bool, translator: Translator) -> bytes:
    """The request stub to send: the recorded one with live handles, or the recorded bytes if they do not decode
    (a deliberately malformed stub is replayed as it was)."""
    stub = bytes(row["request_stub"])
    if row.get("interface_uuid") == QMCOMM_UUID_STR:
        from qm2qm.mqmp import codec as qmcomm_codec
        if opnum not in (2, 3, 4, 31):
            return stub
        try:
            request = qmcomm_codec.decode_request(opnum, stub, ndr64)
        except RpcFault:
            return stub
        return qmcomm_codec.encode_request(await translator.qmcomm_request(opnum, request))
    try:
        request = codec.decode_request(opnum, stub, ndr64)
    except RpcFault:
        return stub
    live = await translator.request(opnum, request)
    try:
        return codec.encode_request(opnum, live, ndr64, strict=False)
    except (codec.EncodeError, ValueError):
        return stub
