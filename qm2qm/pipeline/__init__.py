"""The conformance pipeline: trace, capture ingest, call tables, Spark jobs, replay (docs/pipeline.md)."""
