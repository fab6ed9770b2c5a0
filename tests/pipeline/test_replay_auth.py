"""Replaying authenticated recordings (docs/pipeline.md "Replay"): replay binds unauthenticated, so sealed calls
are refused or counted failed by name, and a live access-denied the recording did not have counts as failed."""
from __future__ import annotations

import asyncio

import pytest

from qm2qm.client import Qm2qmClient
from qm2qm.pipeline.ingest import ingest_file
from qm2qm.pipeline.recorder import PcapSink, RecordingProxy
from qm2qm.pipeline.replay import ReplayError, replay

from tests.pipeline.conftest import LiveServer


def _record(tmp_path, auth_level: int, users) -> list[dict]:
    server = LiveServer(users=str(users))
    try:
        sink = PcapSink(tmp_path / "auth.pcap")
        proxy = RecordingProxy(("127.0.0.1", server.port), sink)
        try:
            with Qm2qmClient("127.0.0.1", proxy.port, user="alice", domain="QM2QM", password="Secret-123",
                             auth_level=auth_level) as c:
                c.get_version()
                c.get_qmqm_server_port(0)
        finally:
            proxy.close()
            sink.close()
    finally:
        server.close()
    return ingest_file(tmp_path / "auth.pcap").calls


@pytest.fixture
def users(tmp_path):
    path = tmp_path / "users.txt"
    path.write_text("QM2QM:alice:Secret-123\n")
    return path


def _replay(rows, tmp_path, users, **config):
    server = LiveServer(users=str(users), **config)
    try:
        return asyncio.run(replay(rows, "127.0.0.1", server.port, tmp_path / "replay.parquet", call_timeout=30))
    finally:
        server.close()


def test_a_recording_of_sealed_calls_is_refused_naming_the_auth_level(tmp_path, users):
    rows = _record(tmp_path, 6, users)
    with pytest.raises(ReplayError, match=r"2 qm2qm call\(s\) are sealed \(auth level 6"):
        _replay(rows, tmp_path, users)


def test_sealed_sessions_of_a_mixed_recording_are_counted_failed(tmp_path, users):
    sealed = _record(tmp_path, 6, users)
    (tmp_path / "auth.pcap").rename(tmp_path / "sealed.pcap")
    plain = _record(tmp_path, 1, users)
    for row in sealed:
        row["session_id"], row["session_seq"] = "sealed", 1
    result = _replay(plain + sealed, tmp_path, users)
    assert (result.calls, result.sent, result.failed) == (4, 2, 2)
    assert result.problems == ["session sealed: 2 sealed call(s) (auth level 6, RPC_C_AUTHN_LEVEL_PKT_PRIVACY) "
                               "not replayed"]


def test_signed_calls_denied_live_are_failed_with_a_hint(tmp_path, users):
    rows = _record(tmp_path, 5, users)
    assert [r["status_kind"] for r in rows] == ["ok", "ok"]
    result = _replay(rows, tmp_path, users, auth="required")
    assert (result.sent, result.failed) == (2, 1)            # RemoteQMGetQMQMServerPort needs no authentication
    (problem,) = result.problems
    assert "RemoteQmGetVersion" in problem and "access denied live" in problem and "unauthenticated" in problem
