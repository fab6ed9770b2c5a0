"""Prometheus metrics of a running server (`GET /metrics` on the admin port), via prometheus-client.

Per-call figures are counted on the hot path into plain dicts by ``RpcMetrics`` (the RpcServer observer,
qm2qm/rpc/observer.py): one dict lookup, a bisect and a few integer additions per call. Everything else --
connections open, association groups, context handles by type, pending reads, messages and bytes per queue
-- is read from the running objects when Prometheus scrapes (``Qm2qmCollector``), never on the hot path.

HRESULTs: a method declared to return an HRESULT answers it as the last NDR value of the response stub: its last
four bytes (little-endian, the runtime always answers in NDR little-endian). ``HRESULT_OPNUMS`` names, per
interface, the opnums whose responses are read that way, from the method signatures: every qm2qm method but
RemoteQMGetQMQMServerPort (a port, MS-MQQP 3.1.4.8) and RemoteQmGetVersion (void, 3.1.4.9); every qmcomm method
but R_QMCloseRemoteQueueContext (void, MS-MQMP 3.1.4.3) and R_QMGetRTQMServerPort (a port, 3.1.4.24); all four
qmcomm2 methods (3.1.5); every RemoteRead method but R_GetServerPort (a port, MS-MQRR 3.1.4.1), R_OpenQueue and
R_OpenQueueForMove (void: they throw their failures, 3.1.4.2, 3.1.4.11). Faults are counted apart, whatever the
signature.
"""
from __future__ import annotations

from bisect import bisect_left
from typing import Any, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from shared_adm.status import status_name

# Seconds; the call latency spans a 30 µs peek to a receive that waits for minutes.
CALL_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
COMMIT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
# interface name (Interface.name) -> opnums whose response stub ends with an HRESULT (the signatures of MS-MQQP
# 3.1.4, MS-MQMP 3.1.4 / 3.1.5 and MS-MQRR 3.1.4). qmcomm's supporting-server methods (6–12, 14–20, 22, 23,
# 26–28) return HRESULTs too, though qm2qm answers them with a fault (MS-MQMP 3.1.4).
MQ_OK_BYTES = bytes(4)
HRESULT_OPNUMS: dict[str, frozenset[int]] = {
    "qm2qm": frozenset({0, 1, 2, 3, 4, 5, 6, 9, 10}),
    "qmcomm": frozenset({1, 2, 4, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17, 18, 19, 20, 22, 23, 26, 27, 28}),
    "qmcomm2": frozenset({0, 1, 2, 3}),
    "RemoteRead": frozenset({3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15}),
}


class Histogram:
    """Bucket counts, count and sum of observations (cumulated only when exported)."""
    __slots__ = ("bounds", "counts", "total", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Count one observation (bucket i holds values <= bounds[i]; the last one is +Inf)."""
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, cumulative count) pairs as Prometheus wants them, +Inf last."""
        out, running = [], 0
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts):
            running += count
            out.append((bound, running))
        return out


class OpStats:
    """What one (interface, opnum) did: answered calls, latency, faults by status, HRESULTs by value."""
    __slots__ = ("interface", "opnum", "operation", "latency", "faults", "ok", "hresults", "reads_hresult")

    def __init__(self, interface: Any, opnum: int) -> None:
        self.interface = interface.name
        self.opnum = opnum
        op = interface.operations.get(opnum)
        self.operation = op.name if op is not None else "unknown"
        self.latency = Histogram(CALL_BUCKETS)
        self.faults: dict[int, int] = {}
        self.ok = 0                                 # responses with HRESULT MQ_OK (the common case, counted apart)
        self.hresults: dict[bytes, int] = {}        # other HRESULTs: the 4 little-endian bytes -> count
        self.reads_hresult = opnum in HRESULT_OPNUMS.get(interface.name, ())

    def hresult_counts(self) -> dict[int, int]:
        """HRESULT -> count."""
        out: dict[int, int] = {0: self.ok} if self.ok else {}
        for raw, count in list(self.hresults.items()):
            value = int.from_bytes(raw, "little")
            out[value] = out.get(value, 0) + count
        return out

    @property
    def labels(self) -> list[str]:
        return [self.interface, str(self.opnum), self.operation]


class RpcMetrics:
    """The RpcServer observer (qm2qm/rpc/observer.py) and the store's commit hook: hot-path counters only."""

    def __init__(self) -> None:
        self.ops: dict[tuple[str, int], OpStats] = {}
        self.connections_opened = 0
        self.connections_closed = 0
        self.commit_latency = Histogram(COMMIT_BUCKETS)

    # -- RpcObserver --

    def connection_opened(self, connection: Any) -> None:
        self.connections_opened += 1

    def connection_closed(self, connection: Any) -> None:
        self.connections_closed += 1

    def call_done(self, interface: Any, opnum: int, fault: int | None, stub: bytes | None, seconds: float) -> None:
        # The hot path (once per call): Histogram.observe inlined; HRESULTs kept as their 4 wire bytes and
        # decoded only when scraped.
        try:
            stats = self.ops[interface.name, opnum]
        except KeyError:
            stats = self.ops[interface.name, opnum] = OpStats(interface, opnum)
        latency = stats.latency
        latency.counts[bisect_left(CALL_BUCKETS, seconds)] += 1
        latency.total += 1
        latency.sum += seconds
        if fault is not None:
            stats.faults[fault] = stats.faults.get(fault, 0) + 1
        elif stats.reads_hresult:
            if stub.endswith(MQ_OK_BYTES):
                stats.ok += 1
            elif len(stub) >= 4:
                counts = stats.hresults
                key = stub[-4:]
                counts[key] = counts.get(key, 0) + 1

    # -- SqliteStore.on_commit (writer thread; one writer, so plain additions are safe under the GIL) --

    def commit_done(self, seconds: float) -> None:
        self.commit_latency.observe(seconds)

    def operations(self) -> list[OpStats]:
        """Every (interface, opnum) seen so far, sorted."""
        return [self.ops[key] for key in sorted(self.ops)]


def live_context_handles(listeners: list) -> dict[str, int]:
    """Live context handles by type name over the association groups of every RPC listener (MS-RPCE 3.3.1.4.1)."""
    counts: dict[str, int] = {}
    for rpc in listeners:
        for group in rpc.groups.snapshot():
            for entry in group.handles.entries():
                counts[entry.handle_type.name] = counts.get(entry.handle_type.name, 0) + 1
    return counts


def _histogram(name: str, doc: str, labels: list[str], series: list[tuple[list[str], Histogram]]):
    family = HistogramMetricFamily(name, doc, labels=labels)
    for values, hist in series:
        family.add_metric(values, hist.cumulative(), hist.sum)
    return family


class Qm2qmCollector:
    """Reads a running qm2qm.app.App when scraped (prometheus_client custom collector)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def collect(self) -> Iterator[Any]:
        app = self.app
        metrics: RpcMetrics | None = app.metrics
        yield from self._calls(metrics)
        yield from self._runtime(app.listeners(), metrics)
        yield from self._allowance(getattr(app, "reassembly_budget", None), "reassembly",
                                   "Bytes held by unfinished fragmented requests over every listener (C706 12.6.3.7)",
                                   "--max-reassembly-mib", "Request fragments faulted nca_s_server_too_busy because "
                                   "the reassembly allowance was spent", "refused")
        yield from self._allowance(getattr(app, "unread_budget", None), "unread_answer",
                                   "Bytes of answers left unread by peers that stopped reading, over every listener "
                                   "(as last counted)", "--max-unread-mib", "Connections closed because the answers "
                                   "left unread over every connection passed that allowance", "closed")
        yield from self._reads(app.service, app.qm)
        yield from self._queues(app.qm)
        yield from self._store(getattr(app, "store", None))
        if metrics is not None:
            yield _histogram("qm2qm_store_commit_duration_seconds",
                             "Time of one group commit of the SQLite store (a transaction, or an append to its "
                             "delete journal)", [], [([], metrics.commit_latency)])

    @staticmethod
    def _calls(metrics: RpcMetrics | None) -> Iterator[Any]:
        labels = ["interface", "opnum", "operation"]
        calls = CounterMetricFamily("qm2qm_rpc_calls", "RPC calls answered (response or fault)", labels=labels)
        faults = CounterMetricFamily("qm2qm_rpc_faults", "RPC calls answered with a fault PDU, by fault status",
                                     labels=[*labels, "status"])
        hresults = CounterMetricFamily("qm2qm_rpc_hresults", "HRESULTs returned in successful responses "
                                       "(MS-MQQP, MS-MQMP, MS-MQRR 3.1.4; the last 4 bytes of the response stub)",
                                       labels=[*labels, "hresult", "name"])
        ops = metrics.operations() if metrics is not None else []
        for op in ops:
            calls.add_metric(op.labels, op.latency.total)
            for status, count in sorted(op.faults.items()):
                faults.add_metric([*op.labels, f"0x{status:08x}"], count)
            for hresult, count in sorted(op.hresult_counts().items()):
                hresults.add_metric([*op.labels, f"0x{hresult:08X}", status_name(hresult)], count)
        yield calls
        yield faults
        yield hresults
        yield _histogram("qm2qm_rpc_call_duration_seconds", "Time from a request's arrival to its answer",
                         labels, [(op.labels, op.latency) for op in ops])

    @staticmethod
    def _allowance(budget: Any, name: str, held_help: str, option: str, spent_help: str,
                   spent: str) -> Iterator[Any]:
        """One process-wide allowance (qm2qm/rpc/budget.py): what it holds, its capacity, what passing it cost."""
        if budget is None:
            return
        yield GaugeMetricFamily(f"qm2qm_rpc_{name}_bytes", held_help, value=budget.held)
        yield GaugeMetricFamily(f"qm2qm_rpc_{name}_capacity_bytes", f"The most they may be (serve {option})",
                                value=budget.capacity)
        yield CounterMetricFamily(f"qm2qm_rpc_{name}_{spent}", spent_help, value=getattr(budget, spent))

    @staticmethod
    def _runtime(listeners: list, metrics: RpcMetrics | None) -> Iterator[Any]:
        """Connections, association groups and context handles over every listener, as the counters count them."""
        if metrics is not None:
            yield CounterMetricFamily("qm2qm_rpc_connections_opened", "TCP connections accepted",
                                      value=metrics.connections_opened)
            yield CounterMetricFamily("qm2qm_rpc_connections_closed", "TCP connections closed",
                                      value=metrics.connections_closed)
        if not listeners:
            return
        yield GaugeMetricFamily("qm2qm_rpc_connections", "TCP connections open now",
                                value=sum(len(rpc.connections) for rpc in listeners))
        refused = {id(rpc.connection_slots): rpc.connection_slots.refusals.count for rpc in listeners}
        yield CounterMetricFamily("qm2qm_rpc_connections_refused", "TCP connections closed as they were accepted "
                                  "because --max-connections were open", value=sum(refused.values()))
        yield GaugeMetricFamily("qm2qm_rpc_association_groups", "Association groups alive now (MS-RPCE 3.3.1.1.1)",
                                value=sum(len(rpc.groups) for rpc in listeners))
        by_type = {handle_type.name: 0 for rpc in listeners for interface in rpc.registry.values()
                   for handle_type in interface.handle_types}     # a series for every declared type, 0 included
        by_type.update(live_context_handles(listeners))
        handles = GaugeMetricFamily("qm2qm_rpc_context_handles", "Live context handles by type (MS-RPCE 3.3.1.4.1)",
                                    labels=["type"])
        for name, count in sorted(by_type.items()):
            handles.add_metric([name], count)
        yield handles

    @staticmethod
    def _reads(service: Any, qm: Any) -> Iterator[Any]:
        reads = GaugeMetricFamily("qm2qm_pending_reads", "Remote reads: in progress (RemoteReadEntry, MS-MQQP "
                                  "3.1.1.3) and received messages awaiting RemoteQMEndReceive", labels=["state"])
        if service is not None:
            reads.add_metric(["pending"], len(service.adm.remote_read_entries))
            reads.add_metric(["awaiting_end_receive"], len(service.adm.receive_handles))
        yield reads
        waiting = 0
        if qm is not None:
            from shared_adm.enums import RemoteReadState
            for queue in qm.queues_and_subqueues():
                for desc in queue.open_queue_descriptor_collection:
                    if desc.remote_read_state is not RemoteReadState.NONE:
                        waiting += len(desc.waiting_message_read_operation_collection)
        yield GaugeMetricFamily("qm2qm_waiting_reads", "WaitingMessageReadOperation elements of remote-read "
                                "handles: reads blocked until a message arrives or they time out "
                                "(MS-MQDMPR 3.1.1.10)", value=waiting)

    @staticmethod
    def _store(store: Any) -> Iterator[Any]:
        if not hasattr(store, "journaled"):         # MemoryStore: nothing is committed
            return
        commits = CounterMetricFamily("qm2qm_store_group_commits", "Group commits of the SQLite store, by how they "
                                      "were made durable", labels=["how"])
        commits.add_metric(["database"], store.commits - store.journaled)
        commits.add_metric(["delete_journal"], store.journaled)
        yield commits
        yield GaugeMetricFamily("qm2qm_store_journaled_deletions", "Deletions durable in the delete journal and not "
                                "yet moved into the database", value=store.journal_backlog())

    @staticmethod
    def _queues(qm: Any) -> Iterator[Any]:
        messages = GaugeMetricFamily("qm2qm_queue_messages", "Messages in the queue (any state)", labels=["queue"])
        available = GaugeMetricFamily("qm2qm_queue_available_messages", "Messages in the Available state",
                                      labels=["queue"])
        size = GaugeMetricFamily("qm2qm_queue_bytes", "Bytes of the messages in the queue", labels=["queue"])
        handles = GaugeMetricFamily("qm2qm_queue_open_handles", "OpenQueueDescriptors on the queue", labels=["queue"])
        if qm is not None:
            # a subqueue only while it holds messages: one without is an open handle, which needs no series
            shown = [q for q in qm.queues_and_subqueues() if q.parent_queue is None or q.message_position_list]
            for queue in sorted(shown, key=lambda q: q.pathname.lower()):
                name = [f"{qm.computer_name}\\{queue.pathname}"]
                positions = queue.message_position_list
                messages.add_metric(name, len(positions))
                available.add_metric(name, positions.available_count)
                size.add_metric(name, queue.total_bytes)
                handles.add_metric(name, len(queue.open_queue_descriptor_collection))
        yield messages
        yield available
        yield size
        yield handles


def build_registry(app: Any) -> CollectorRegistry:
    """A registry of its own per App (never the global one: several servers may run in one test process)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Qm2qmCollector(app))
    ProcessCollector(registry=registry)
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The Prometheus text exposition format of everything in the registry."""
    return generate_latest(registry)
