"""Bad options to replay, stats, report and record (session 29's probe): a one-line error naming what is wrong
(exit 2), never a traceback, a replay that times every call out, or a recorder that forwards to itself."""
from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from qm2qm.cli import pipeline as cli
from tests.pipeline.test_bad_input_round28 import _write_stats


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "86401"])
def test_replay_timeout_must_be_seconds_above_zero(tmp_path, value):
    res = CliRunner().invoke(cli.replay, [str(tmp_path / "r.jsonl"), "--target", "127.0.0.1:2105",
                                          "--timeout", value])
    assert res.exit_code == 2 and "Invalid value for '--timeout': expected seconds more than 0 and at most 86400" \
        in res.output


def test_report_out_that_cannot_be_written_is_one_line_exit_2(tmp_path):
    _write_stats(tmp_path / "stats")
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "r.html"                  # its parent is a file
    res = CliRunner().invoke(cli.report, ["--stats", str(tmp_path / "stats"), "--out", str(out)])
    assert res.exit_code == 2 and res.output.startswith(f"qm2qm: error: cannot write {out}: ")
    assert res.output.count("\n") == 1


def test_stats_bucket_is_at_most_a_year(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_spark", lambda *a, **k: pytest.fail("Spark was started"))
    res = CliRunner().invoke(cli.stats, [str(tmp_path), "--out", str(tmp_path / "s"), "--bucket", "10000000000000"])
    assert res.exit_code == 2 and "Invalid value for '--bucket'" in res.output and "31622400" in res.output


def test_a_spark_master_that_cannot_start_is_one_line_exit_2(monkeypatch):
    from qm2qm.pipeline import spark_jobs

    def gateway_exited(master, conf=None):
        raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.\n"
                           "more lines")
    monkeypatch.setattr(spark_jobs, "spark_session", gateway_exited)
    with pytest.raises(SystemExit) as ended:
        with cli._spark("bogus://x"):
            pass
    assert ended.value.code == 2


def test_a_spark_master_that_cannot_start_names_it(monkeypatch, capsys):
    from qm2qm.pipeline import spark_jobs
    monkeypatch.setattr(spark_jobs, "spark_session",
                        lambda master, conf=None: (_ for _ in ()).throw(RuntimeError("[JAVA_GATEWAY_EXITED] gone\nx")))
    with pytest.raises(SystemExit):
        with cli._spark("bogus://x"):
            pass
    assert capsys.readouterr().err == ("qm2qm: error: cannot start Spark with master 'bogus://x': "
                                       "[JAVA_GATEWAY_EXITED] gone\n")


@pytest.mark.timeout(60)                # without the check the recorder relays to itself until stopped
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "0.0.0.0"])
def test_record_refuses_a_target_that_is_its_own_listening_address(tmp_path, host):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "loop.pcap"
    res = CliRunner().invoke(cli.record, ["--target", f"{host}:{port}", "--listen", str(port), "--out", str(out)])
    assert res.exit_code == 2 and res.output == (
        f"qm2qm: error: --target {host}:{port} is this recorder's own listening address: it would forward to "
        f"itself\n")
