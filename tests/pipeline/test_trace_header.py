"""A trace's header version must be a whole number (docs/pipeline.md "Call table": `"version": 1`); anything else
is named as such, not as a newer version."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from qm2qm.pipeline import schema
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.trace import TraceError, read_calls


@pytest.mark.parametrize("version", ["1", 1.0, True, None])
def test_a_jsonl_header_version_that_is_not_a_whole_number_is_named(tmp_path, version):
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps({"format": schema.FORMAT_NAME, "version": version}) + "\n")
    with pytest.raises(TraceError) as caught:
        read_calls(path)
    assert str(caught.value) == (f"{path}: line 1 (offset 0): trace format version {version!r} is not a whole "
                                 f"number (this qm2qm writes 1)")
    (problem,) = ingest_file(path).problems
    assert problem["kind"] == "bad_trace" and "not a whole number" in problem["message"]


def test_a_parquet_version_that_is_not_a_number_is_named(tmp_path):
    path = tmp_path / "odd.parquet"
    table = schema.table([], schema.CALL_SCHEMA).replace_schema_metadata(
        {b"format": schema.FORMAT_NAME.encode(), b"version": b"one"})
    pq.write_table(table, path)
    with pytest.raises(TraceError, match="version 'one' is not a whole number"):
        read_calls(path)
