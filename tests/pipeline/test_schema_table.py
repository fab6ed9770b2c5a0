"""schema.table: rows as an Arrow table of the call schema, built slice by slice (TABLE_SLICE_ROWS)."""
from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, given, settings, strategies as st

from qm2qm.pipeline import schema

_ROW = st.fixed_dictionaries(
    {"source": st.sampled_from(["trace", "capture", "replay"]), "session_id": st.text(max_size=8)},
    optional={"opnum": st.integers(0, 2**31 - 1), "request_stub": st.binary(max_size=16),
              "hresult": st.integers(0, 2**32 - 1), "queue_name": st.none() | st.text(max_size=12),
              "call_index": st.none() | st.integers(0, 1000)})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(_ROW, max_size=40), slice_rows=st.integers(1, 7))
def test_a_table_built_in_slices_holds_every_row_as_arrow_reads_them(monkeypatch, rows, slice_rows):
    monkeypatch.setattr(schema, "TABLE_SLICE_ROWS", slice_rows)
    built = schema.table(rows, schema.CALL_SCHEMA)
    expected = pa.Table.from_pylist(rows, schema=schema.CALL_SCHEMA)
    assert built.schema.equals(schema.CALL_SCHEMA, check_metadata=True)
    assert built.num_rows == len(rows)
    assert built.combine_chunks().equals(expected.combine_chunks())


def test_an_empty_table_keeps_the_schema_and_its_format_metadata():
    built = schema.table(iter(()), schema.CALL_SCHEMA)
    assert built.num_rows == 0
    assert built.schema.metadata == {b"format": b"qm2qm-calls", b"version": b"1"}
