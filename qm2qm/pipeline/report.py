"""One self-contained HTML page (matplotlib PNGs embedded) of the stats and diff outputs (docs/pipeline.md)."""
from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

MAX_TABLE_ROWS = 200
STATS_TABLES = ("by_opnum", "over_time", "error_codes")
DIFF_OUTPUTS = ("mismatches", "diff_summary.json")


class ReportError(ValueError):
    """An input directory that is not the output it should be; the message names it."""


def _check_output(directory: Path, command: str, names: tuple[str, ...]) -> None:
    """Refuse a directory lacking what `qm2qm COMMAND` writes: reporting on it would show a false pass or no calls."""
    missing = [n for n in names if not (directory / n).exists()]
    if missing:
        raise ReportError(f"{directory}: not a `qm2qm {command}` output (lacks {', '.join(missing)})")


def _rows(directory: Path, name: str) -> list[dict]:
    path = directory / name
    if not path.exists():
        return []
    return pq.read_table(str(path)).to_pylist()


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return f'<img alt="" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode("ascii")}">'


def _label(row: dict) -> str:
    label = f"{row.get('opnum')} {row.get('op_name') or ''}".strip()
    return " " + label if label.startswith("_") else label     # matplotlib leaves "_..." labels out of legends


def _calls_chart(by_opnum: list[dict]) -> str:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 3.6))
    labels = [_label(r) for r in by_opnum]
    ok = [r["calls"] - (r["faults"] or 0) - (r["errors"] or 0) for r in by_opnum]
    ax.barh(labels, ok, color="#4c78a8", label="ok")
    ax.barh(labels, [r["errors"] or 0 for r in by_opnum], left=ok, color="#f58518", label="HRESULT error")
    ax.barh(labels, [r["faults"] or 0 for r in by_opnum],
            left=[a + (r["errors"] or 0) for a, r in zip(ok, by_opnum)], color="#e45756", label="fault")
    ax.set_xlabel("calls")
    ax.invert_yaxis()
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    ax.set_title("Calls per opnum")
    return _png(fig)


def _latency_chart(by_opnum: list[dict]) -> str:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 3.6))
    labels = [_label(r) for r in by_opnum]
    width = 0.27
    ys = range(len(labels))
    for i, (key, color) in enumerate((("latency_p50_ms", "#54a24b"), ("latency_p90_ms", "#eeca3b"),
                                      ("latency_p99_ms", "#e45756"))):
        ax.barh([y + (i - 1) * width for y in ys], [r[key] or 0 for r in by_opnum], height=width, color=color,
                label=key.split("_")[1])
    ax.set_yticks(list(ys), labels)
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_xlabel("latency (ms)")
    ax.invert_yaxis()
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    ax.set_title("Latency percentiles per opnum")
    return _png(fig)


def _time_chart(over_time: list[dict]) -> str:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 3.2))
    series: dict[str, list[tuple]] = {}
    for r in over_time:
        series.setdefault(_label(r), []).append((r["bucket_s"], r["calls"]))
    t0 = min((r["bucket_s"] for r in over_time), default=0)
    for label, points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] - t0 for p in points], [p[1] for p in points], marker="o", label=label)
    ax.set_xlabel("seconds from first bucket")
    ax.set_ylabel("calls")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    ax.set_title("Calls over time")
    return _png(fig)


def _mismatch_chart(mismatches: list[dict]) -> str:
    import matplotlib.pyplot as plt
    counts: dict[tuple[str, str], int] = {}
    for m in mismatches:
        key = (_label(m), m["kind"])
        counts[key] = counts.get(key, 0) + 1
    labels = sorted({k[0] for k in counts})
    kinds = sorted({k[1] for k in counts})
    fig, ax = plt.subplots(figsize=(9, max(2.0, 0.45 * len(labels) + 1)))
    left = [0] * len(labels)
    for kind in kinds:
        values = [counts.get((label, kind), 0) for label in labels]
        ax.barh(labels, values, left=left, label=kind)
        left = [a + b for a, b in zip(left, values)]
    ax.set_xlabel("mismatches")
    ax.invert_yaxis()
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    ax.set_title("Mismatches per opnum and kind")
    return _png(fig)


def _table(rows: list[dict], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape('' if r.get(c) is None else str(r.get(c)))}</td>"
                                    for c in columns) + "</tr>" for r in rows[:MAX_TABLE_ROWS])
    more = (f"<p>{len(rows) - MAX_TABLE_ROWS} more rows not shown.</p>" if len(rows) > MAX_TABLE_ROWS else "")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;
font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#eee}.verdict{font-size:1.4em;padding:.4em .8em;display:inline-block;border-radius:6px}
.pass{background:#dff0d8}.fail{background:#f2dede}td{max-width:420px;overflow-wrap:anywhere}"""


def build_report(out: str | Path, *, stats_dir: str | Path | None = None, diff_dir: str | Path | None = None,
                 title: str = "qm2qm conformance report") -> Path:
    """Write the HTML report from a stats output directory and/or a diff output directory."""
    import matplotlib
    matplotlib.use("Agg")
    # a name from a capture or trace is text, not matplotlib mathtext: "$\\bad{x}$" raised ValueError mid-page, and
    # well-formed "$...$" drew something else than the table shows
    with matplotlib.rc_context({"text.parse_math": False}):
        return _build_report(out, stats_dir=stats_dir, diff_dir=diff_dir, title=title)


def _build_report(out: str | Path, *, stats_dir: str | Path | None, diff_dir: str | Path | None, title: str) -> Path:
    if diff_dir is not None:
        _check_output(Path(diff_dir), "diff", DIFF_OUTPUTS)
    if stats_dir is not None:
        _check_output(Path(stats_dir), "stats", STATS_TABLES)
    parts = [f"<h1>{html.escape(title)}</h1>"]
    if diff_dir is not None:
        diff_dir = Path(diff_dir)
        mismatches = _rows(diff_dir, "mismatches")
        summary_path = diff_dir / "diff_summary.json"
        try:
            summary = json.loads(summary_path.read_text())
        except (OSError, ValueError) as exc:
            raise ReportError(f"{summary_path}: unreadable diff summary: {exc}") from None
        if not isinstance(summary, dict):
            raise ReportError(f"{summary_path}: unreadable diff summary: not a JSON object")
        verdict = "pass" if not mismatches else "fail"
        parts.append(f'<p class="verdict {verdict}">{len(mismatches)} mismatch(es) over '
                     f'{html.escape(str(summary.get("aligned_calls", "?")))} aligned calls</p>')
        parts.append(f"<p>left: {html.escape(str(summary.get('left', '?')))}<br>"
                     f"right: {html.escape(str(summary.get('right', '?')))}</p>")
        if mismatches:
            parts.append(_mismatch_chart(mismatches))
            parts.append("<h2>Mismatches</h2>")
            parts.append(_table(mismatches, ["file_rank", "session_seq", "call_index", "opnum", "op_name", "kind",
                                             "field", "left", "right"]))
    if stats_dir is not None:
        stats_dir = Path(stats_dir)
        by_opnum = sorted(_rows(stats_dir, "by_opnum"), key=lambda r: (r["opnum"] is None, r["opnum"] or 0))
        over_time = _rows(stats_dir, "over_time")
        codes = _rows(stats_dir, "error_codes")
        parts.append("<h2>Calls</h2>")
        if by_opnum:
            parts.append(_calls_chart(by_opnum))
            parts.append(_latency_chart(by_opnum))
            parts.append(_table(by_opnum, ["opnum", "op_name", "calls", "faults", "errors", "request_bytes",
                                           "response_bytes", "latency_p50_ms", "latency_p90_ms", "latency_p99_ms",
                                           "latency_max_ms"]))
        else:
            parts.append("<p>No calls.</p>")
        if over_time:
            parts.append(_time_chart(over_time))
        if codes:
            parts.append("<h2>Status codes</h2>")
            parts.append(_table(sorted(codes, key=lambda r: (r["opnum"] or 0, r["code"] or "")),
                                ["opnum", "op_name", "code", "calls"]))
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out
