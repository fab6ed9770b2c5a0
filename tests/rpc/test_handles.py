"""Context-handle table (MS-RPCE 3.3.1.4.1; C706 5.1.6 rundown)."""
import asyncio
import logging
import uuid

import pytest
from hypothesis import given, settings, strategies as st

from qm2qm.rpc.handles import (MAX_CONTEXT_HANDLES, NCA_S_FAULT_CONTEXT_MISMATCH, NCA_S_FAULT_REMOTE_NO_MEMORY,
                               NULL_HANDLE, HandleLimitReached, HandleTable, run_down)
from qm2qm.rpc.interface import ContextHandleType, RpcFault

ran = []
TYPE_A = ContextHandleType("a", lambda obj: ran.append(("a", obj)))
TYPE_B = ContextHandleType("b", lambda obj: ran.append(("b", obj)))


def mismatch(fn, *args):
    with pytest.raises(RpcFault) as info:
        fn(*args)
    assert info.value.status == NCA_S_FAULT_CONTEXT_MISMATCH


def test_new_handle_wire_form_is_zero_attributes_and_a_uuid4():
    table = HandleTable()
    wire = table.new(TYPE_A, "x")
    assert len(wire) == 20 and wire[:4] == b"\0\0\0\0" and wire != NULL_HANDLE
    assert (wire[4 + 6] >> 4) == 4          # version nibble of a random (v4) UUID
    assert table.new(TYPE_A, "y") != wire


def test_keys_across_pool_refills_are_distinct_rfc4122_version_4_uuids():
    table = HandleTable()
    keys = [table.new(TYPE_A, i)[4:] for i in range(3 * 256 + 7)]        # three refills of the 4 KiB pool
    assert len(set(keys)) == len(keys)
    for key in keys:
        u = uuid.UUID(bytes=key)
        assert u.version == 4 and u.variant == uuid.RFC_4122
    # every other bit stays random: each of the 122 random bits is seen both set and clear
    ones = [sum((int.from_bytes(k, "big") >> bit) & 1 for k in keys) for bit in range(128)]
    fixed = {bit for bit in range(128) if ones[bit] in (0, len(keys))}
    assert fixed == {79, 78, 77, 76, 63, 62}


def test_lookup_returns_the_object_and_none_for_null():
    table = HandleTable()
    wire = table.new(TYPE_A, {"k": 1})
    assert table.lookup(wire, TYPE_A) == {"k": 1}
    assert table.lookup(bytearray(wire), TYPE_A) == {"k": 1}
    assert table.lookup(NULL_HANDLE, TYPE_A) is None


def test_wrong_type_unknown_closed_and_malformed_handles_are_context_mismatch():
    table = HandleTable()
    wire = table.new(TYPE_A, 1)
    mismatch(table.lookup, wire, TYPE_B)
    mismatch(table.lookup, b"\0" * 4 + b"\x11" * 16, TYPE_A)
    mismatch(table.lookup, wire[:19], TYPE_A)
    mismatch(table.lookup, wire + b"\0", TYPE_A)
    assert table.close(wire).obj == 1
    mismatch(table.lookup, wire, TYPE_A)
    mismatch(table.close, wire)
    mismatch(table.close, NULL_HANDLE)


def test_a_handle_of_another_table_is_unknown():
    one, other = HandleTable(), HandleTable()
    wire = one.new(TYPE_A, 1)
    mismatch(other.lookup, wire, TYPE_A)


def test_drain_yields_creation_order_once_and_refuses_new_handles():
    table = HandleTable()
    wires = [table.new(TYPE_A if i % 2 else TYPE_B, i) for i in range(6)]
    table.close(wires[2])
    assert [e.obj for e in table.drain()] == [0, 1, 3, 4, 5]
    assert table.drain() == []
    assert len(table) == 0
    mismatch(table.new, TYPE_A, 9)


async def test_run_down_calls_sync_and_async_rundowns_in_order_and_logs_errors(caplog):
    seen = []

    async def async_rundown(obj):
        await asyncio.sleep(0)
        seen.append(("async", obj))

    def bad_rundown(obj):
        seen.append(("bad", obj))
        raise ValueError("boom")

    t_sync = ContextHandleType("sync", lambda obj: seen.append(("sync", obj)))
    t_async = ContextHandleType("async", async_rundown)
    t_bad = ContextHandleType("bad", bad_rundown)
    table = HandleTable()
    for i, t in enumerate([t_async, t_bad, t_sync, t_bad, t_async]):
        table.new(t, i)
    with caplog.at_level(logging.DEBUG, logger="qm2qm.rpc"):
        await run_down(table.drain(), extra={"assoc_group": 7})
    assert seen == [("async", 0), ("bad", 1), ("sync", 2), ("bad", 3), ("async", 4)]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and all(r.handle_event == "rundown" and r.assoc_group == 7 for r in errors)
    assert all(r.exc_info for r in errors)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["new_a", "new_b", "close", "use_a", "use_b"]),
                          st.integers(0, 7)), max_size=40))
def test_table_agrees_with_a_dict_model(ops):
    table, model, wires = HandleTable(), {}, []
    for op, k in ops:
        if op.startswith("new"):
            t = TYPE_A if op == "new_a" else TYPE_B
            wire = table.new(t, len(wires))
            model[wire] = (t, len(wires))
            wires.append(wire)
            continue
        if not wires:
            continue
        wire = wires[k % len(wires)]
        if op == "close":
            if wire in model:
                assert table.close(wire).obj == model.pop(wire)[1]
            else:
                mismatch(table.close, wire)
        else:
            t = TYPE_A if op == "use_a" else TYPE_B
            if wire in model and model[wire][0] is t:
                assert table.lookup(wire, t) == model[wire][1]
            else:
                mismatch(table.lookup, wire, t)
    assert [e.obj for e in table.drain()] == [obj for _, obj in model.values()]


def test_a_table_at_its_limit_refuses_a_new_handle_until_one_is_closed():
    table = HandleTable(limit=2)
    first, _ = table.new(TYPE_A, 1), table.new(TYPE_B, 2)
    with pytest.raises(HandleLimitReached) as info:
        table.new(TYPE_A, 3)
    assert info.value.status == NCA_S_FAULT_REMOTE_NO_MEMORY == 0x1C00001B
    assert len(table) == 2 and table.refused == 1
    table.close(first)
    assert table.lookup(table.new(TYPE_A, 4), TYPE_A) == 4
    assert HandleTable().limit == MAX_CONTEXT_HANDLES == 4096
