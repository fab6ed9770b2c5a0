"""`qm2qm replay` refuses an --out it cannot or must not write in one line, exit 2 (docs/pipeline.md "Problems
table": bad input gets a clear answer, never a traceback)."""
from __future__ import annotations

import shutil

from click.testing import CliRunner

from qm2qm.cli import pipeline as cli
from qm2qm.pipeline.recorder import PcapSink
from qm2qm.rpc.pdu import build_request

from tests.pipeline.test_capture import Wire


def test_replay_out_onto_the_recording_is_refused_and_the_recording_kept(recorded, tmp_path):
    src, _ = recorded
    path = tmp_path / "w.pcap"
    shutil.copy(src, path)
    before = path.read_bytes()
    res = CliRunner().invoke(cli.replay, [str(path), "--target", "127.0.0.1:1", "--no-progress",
                                          "--out", str(tmp_path / "." / "w.pcap")])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert res.output == f"qm2qm: error: --out {tmp_path / '.' / 'w.pcap'} is the recording itself; give another file\n"
    assert path.read_bytes() == before


def test_replay_out_that_cannot_be_written_is_one_line_exit_2(recorded, tmp_path):
    src, _ = recorded
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "r.parquet"                       # under a file, not a directory
    res = CliRunner().invoke(cli.replay, [str(src), "--target", "127.0.0.1:1", "--no-progress", "--out", str(out)])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert res.output == f"qm2qm: error: cannot write {out}: File exists ({tmp_path / 'file'})\n"
    res = CliRunner().invoke(cli.replay, [str(src), "--target", "127.0.0.1:1", "--no-progress",
                                          "--out", "/proc/r.parquet"])
    assert (res.exit_code, res.output) == (2, "qm2qm: error: cannot write /proc/r.parquet: No such file or directory\n")


def test_replay_of_a_capture_started_after_the_bind_says_so(tmp_path):
    path = tmp_path / "midstream.pcap"
    sink = PcapSink(path)
    wire = Wire(sink)
    for call_id in (1, 2):
        wire.send(True, build_request(call_id, 0, 8, b""))
    sink.close()
    res = CliRunner().invoke(cli.replay, [str(path), "--target", "127.0.0.1:1", "--no-progress",
                                          "--out", str(tmp_path / "r.parquet")])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert res.output.splitlines()[-1] == (
        "qm2qm: error: the recording holds no qm2qm calls to replay: its 2 call(s) are on presentation contexts "
        "never bound in the capture (it started after the bind); capture from the start of the connections")
