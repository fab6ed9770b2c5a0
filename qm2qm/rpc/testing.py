"""A tiny made-up "probe" interface to exercise the runtime (C706 12.6 dispatch, MS-RPCE 3.3.1.4.1 handles).

Not part of MS-MQQP: tests and scripts/bench_rpc.py bind it to reach every runtime path (sync and async
dispatch, faults, cancel, typed context handles, sync and async rundown)."""
from __future__ import annotations

import asyncio
import struct
import uuid
from dataclasses import dataclass, field

from qm2qm.rpc.interface import CallContext, ContextHandleType, Interface, Operation, RpcFault

PROBE_UUID = uuid.UUID("5b1a7e3c-0f2d-4c6b-9a41-71c0de0b2e55")
PROBE_VERSION = (1, 0)

# opnums
OP_ECHO = 0            # sync: response stub = request stub
OP_BLOCK = 1           # async: waits until cancelled (or release()d); response = request stub
OP_OPEN_A = 2          # sync: stub = label → 20-byte handle of type "probe_a"
OP_USE_A = 3           # sync: stub = 20-byte handle of type "probe_a" → its label (b"" for NULL → fault 0x6F7)
OP_CLOSE = 4           # sync: stub = 20-byte handle (any type) → 20-byte NULL handle
OP_OPEN_B = 5          # sync: stub = label → 20-byte handle of type "probe_b" (async rundown)
OP_FAULT = 6           # sync: stub = u32 status → RpcFault(status)
OP_CRASH = 7           # sync: raises an internal error (ZeroDivisionError)
OP_ASYNC_ECHO = 8      # async: yields once, then echoes
OP_ASYNC_CRASH = 9     # async: yields once, then raises an internal error
OP_BLOCK_OPEN_A = 10   # async: stub = label; opens a probe_a handle, then waits until cancelled, never returns it
OP_USE_B = 11          # sync: stub = 20-byte handle of type "probe_b" → its label
OP_STUBBORN = 12       # async: ignores cancellation until release()d (a misbehaving handler)
OP_REPEAT = 13         # sync: stub = u32 n → n bytes (a small request with a large answer)
OP_ASYNC_REPEAT = 14   # async: yields once, then as OP_REPEAT (a large answer that comes later)

RPC_X_BAD_STUB_DATA = 0x000006F7


@dataclass(repr=False, eq=False)
class Probe:
    """The probe interface plus what tests observe of it: rundowns, started and cancelled calls."""
    interface: Interface = field(init=False)
    type_a: ContextHandleType = field(init=False)
    type_b: ContextHandleType = field(init=False)
    rundowns: list[tuple[str, bytes]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)     # "blocked", "cancelled", "rundown probe_a <label>"
    blocked: int = 0
    cancelled: int = 0

    def __post_init__(self) -> None:
        self._waiters: list[asyncio.Future] = []
        self._release = asyncio.Event()
        self.type_a = ContextHandleType("probe_a", self._rundown_a)
        self.type_b = ContextHandleType("probe_b", self._rundown_b)
        ops = {
            OP_ECHO: self.echo, OP_BLOCK: self.block, OP_OPEN_A: self.open_a, OP_USE_A: self.use_a,
            OP_CLOSE: self.close, OP_OPEN_B: self.open_b, OP_FAULT: self.fault, OP_CRASH: self.crash,
            OP_ASYNC_ECHO: self.async_echo, OP_ASYNC_CRASH: self.async_crash,
            OP_BLOCK_OPEN_A: self.block_open_a, OP_USE_B: self.use_b, OP_STUBBORN: self.stubborn,
            OP_REPEAT: self.repeat, OP_ASYNC_REPEAT: self.async_repeat,
        }
        self.interface = Interface(
            uuid=PROBE_UUID, version=PROBE_VERSION, name="probe",
            operations={n: Operation(n, f.__name__, f) for n, f in ops.items()},
            handle_types=(self.type_a, self.type_b))

    # -- observation helpers for tests (no timers: wait on a condition) --

    async def wait_for(self, predicate) -> None:
        """Wait until predicate(self) is true; it is re-checked after every state change."""
        while not predicate(self):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    def release(self) -> None:
        """Let every OP_BLOCK call return normally."""
        self._release.set()

    def _notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- rundown routines --

    def _rundown_a(self, label: bytes) -> None:
        self.rundowns.append(("probe_a", label))
        self.events.append(f"rundown probe_a {label.decode(errors='replace')}")
        self._notify()

    async def _rundown_b(self, label: bytes) -> None:
        await asyncio.sleep(0)
        self.rundowns.append(("probe_b", label))
        self.events.append(f"rundown probe_b {label.decode(errors='replace')}")
        self._notify()

    # -- operations --

    def echo(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_ECHO: the response stub is the request stub (the benchmark's trivial opnum)."""
        return stub

    def repeat(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_REPEAT: as many bytes as the u32 in the stub asks for."""
        return bytes(int.from_bytes(stub[:4], "little"))

    async def block(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_BLOCK: wait until cancelled (co_cancel, C706 12.6.4.6) or release()d."""
        self.blocked += 1
        self.events.append("blocked")
        self._notify()
        try:
            await self._release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            self.events.append("cancelled")
            self._notify()
            raise
        return stub

    def open_a(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_OPEN_A: a new probe_a context handle labelled with the stub (MS-RPCE 3.3.1.4.1)."""
        return ctx.new_handle(self.type_a, bytes(stub))

    def open_b(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_OPEN_B: a new probe_b context handle (async rundown) labelled with the stub."""
        return ctx.new_handle(self.type_b, bytes(stub))

    def use_a(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_USE_A: the label of a probe_a handle; other types fault context mismatch."""
        return self._use(ctx, stub, self.type_a)

    def use_b(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_USE_B: the label of a probe_b handle; other types fault context mismatch."""
        return self._use(ctx, stub, self.type_b)

    def _use(self, ctx: CallContext, stub: bytes, handle_type: ContextHandleType) -> bytes:
        if len(stub) != 20:
            raise RpcFault(RPC_X_BAD_STUB_DATA, "expected a 20-byte context handle")
        label = ctx.lookup_handle(bytes(stub), handle_type)
        if label is None:
            raise RpcFault(RPC_X_BAD_STUB_DATA, "NULL context handle")
        return label

    def close(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_CLOSE: close a handle of any type; answers the NULL handle."""
        return ctx.close_handle(bytes(stub))

    def fault(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_FAULT: fault with the u32 status in the stub (C706 12.6.4.7)."""
        if len(stub) < 4:
            raise RpcFault(RPC_X_BAD_STUB_DATA, "expected a u32 status")
        raise RpcFault(struct.unpack_from("<I", stub)[0])

    def crash(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_CRASH: an internal error in a plain handler."""
        return bytes(1 // (len(stub) * 0))

    async def async_echo(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_ASYNC_ECHO: echo from a coroutine handler (runs as a task)."""
        await asyncio.sleep(0)
        return stub

    async def async_repeat(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_ASYNC_REPEAT: OP_REPEAT from a coroutine handler."""
        await asyncio.sleep(0)
        return self.repeat(ctx, stub)

    async def async_crash(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_ASYNC_CRASH: an internal error in a coroutine handler."""
        await asyncio.sleep(0)
        raise KeyError("probe internal error")

    async def block_open_a(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_BLOCK_OPEN_A: open a probe_a handle, then block; the handle is never returned."""
        ctx.new_handle(self.type_a, bytes(stub))
        return await self.block(ctx, stub)

    async def stubborn(self, ctx: CallContext, stub: bytes) -> bytes:
        """OP_STUBBORN: a misbehaving handler that swallows cancellation until release()d."""
        self.blocked += 1
        self.events.append("blocked")
        self._notify()
        while not self._release.is_set():
            try:
                await self._release.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                self.events.append("cancelled")
                self._notify()
        return stub
