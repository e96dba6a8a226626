"""compare end to end on real run directories: numbers against numpy on the raw ops.parquet,
words for empty ops and unresolvable percentiles, sign convention, text/JSON agreement and a
snapshot of the text layout."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from compare_fixtures import lognormal_ns, ops_span_s, write_run

from stallbench.cli import main
from stallbench.report.wording import JSON_KEYS

pytestmark = pytest.mark.pure

SNAPSHOT = Path(__file__).with_name("test_report_text_snapshot.txt")


def make_results(results: Path) -> None:
    """Two variants x 2 iterations: reads get a slow tail and fall in rate in the candidate,
    wal is paced (intended_ns), 'trim' never completes, 'rare' has too few samples for p99."""
    rng = np.random.default_rng(42)
    declared = ["read", "wal", "trim", "rare"]
    for iteration in range(2):
        for variant, slow_share, reads in (("vanilla", 0.0, 20000), ("memcg", 0.08, 14000)):
            read = lognormal_ns(rng, reads, 600e3, 0.3)
            slow = rng.random(reads) < slow_share
            read[slow] = lognormal_ns(rng, int(slow.sum()), 30e6, 0.4)
            n_wal = 2000
            intended = (np.arange(n_wal) * 5_000_000).astype(np.int64)
            wal_latency = lognormal_ns(rng, n_wal, 50e3, 0.5)
            wal_start = intended + rng.integers(0, 200_000, n_wal)
            write_run(results, variant, {
                "read": read, "wal": wal_latency, "rare": lognormal_ns(rng, 40, 2e6, 0.3),
            }, duration_s=10.0, declared=declared, seed=iteration * 10 + len(variant),
                starts={"wal": wal_start}, intended={"wal": intended},
                workers={"read": rng.integers(0, 4, reads).astype(np.int32)},
                rusage={"user_s": 1.0 + iteration * 0.1, "system_s": 2.0 + iteration * 0.1,
                        "elapsed_s": 10.0})


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("results")
    make_results(path)
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def reports(results, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    for fmt in ("text", "json", "markdown"):
        assert main(["compare", "vanilla", "memcg", "--results", str(results), "--format", fmt,
                     "--output", str(out / f"report.{fmt}")]) == 0
    return {fmt: (out / f"report.{fmt}").read_text() for fmt in ("text", "json", "markdown")}


def raw_latencies(results: Path, variant: str, op: str) -> np.ndarray:
    """The oracle: pyarrow + numpy straight from the files, no stallbench reader."""
    parts = []
    for path in sorted((results / variant).glob("*/*/ops.parquet")):
        table = pq.read_table(path)
        ops = np.array(table.column("op").to_pylist())
        parts.append(table.column("latency_ns").to_numpy()[ops == op])
    return np.concatenate(parts)


def test_json_percentiles_equal_numpy_on_the_raw_ops(results, reports):
    data = json.loads(reports["json"])
    for variant in ("vanilla", "memcg"):
        for op in ("read", "wal"):
            raw = raw_latencies(results, variant, op)
            entry = data["ops"][op]["variants"][variant]
            assert entry["samples"] == raw.size
            seconds = sum(ops_span_s(p.parent) for p in (results / variant).glob("*/*/ops.parquet"))
            assert entry["rate"] == pytest.approx(raw.size / seconds)
            for stat, p in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99),
                            ("p999", 99.9)):
                if entry[JSON_KEYS[stat]] is not None:   # within the stated accuracy
                    np.testing.assert_allclose(
                        entry[JSON_KEYS[stat]],
                        np.percentile(raw, p, method="inverted_cdf"),
                        rtol=data["accuracy"]["quantile_relative_error"])
            assert entry["min_ns"] == raw.min() and entry["max_ns"] == raw.max()
            np.testing.assert_allclose(entry["mean_ns"], raw.mean(), rtol=1e-12)


def test_response_time_of_paced_ops(results, reports):
    data = json.loads(reports["json"])
    entry = data["ops"]["wal (response)"]["variants"]["vanilla"]
    response = []
    for path in sorted((results / "vanilla").glob("*/*/ops.parquet")):
        table = pq.read_table(path)
        ops = np.array(table.column("op").to_pylist())
        keep = ops == "wal"
        start = table.column("start_ns").to_numpy()[keep]
        latency = table.column("latency_ns").to_numpy()[keep]
        intended = table.column("intended_ns").to_numpy()[keep]
        response.append(start + latency - intended)
    np.testing.assert_allclose(entry["p99_ns"],
                               np.percentile(np.concatenate(response), 99, method="inverted_cdf"),
                               rtol=data["accuracy"]["quantile_relative_error"])


def test_empty_op_says_no_samples_never_zero(reports):
    data = json.loads(reports["json"])
    trim = data["ops"]["trim"]["variants"]["memcg"]
    assert trim["samples"] == 0 and trim["no_samples"] is True
    assert all(trim[JSON_KEYS[s]] is None for s in ("min", "p50", "p99", "max", "mean"))
    block = section(reports["text"], "trim — latency")
    for stat in ("min", "p50", "p90", "p99", "max", "mean"):
        row = next(line for line in block if line.split()[0] == stat)
        assert "no samples" in row and not re.search(r"\s0(\.0+)?\s", row), row


def test_unresolvable_percentiles_are_shown_as_such(reports):
    data = json.loads(reports["json"])
    rare = data["ops"]["rare"]["variants"]["vanilla"]  # 80 samples: p99 has 1 beyond it
    assert rare["p99_ns"] is None and rare["not_resolvable"]["p99_ns"]["samples_at_or_beyond"] == 1
    assert rare["p50_ns"] is not None
    block = section(reports["text"], "rare — latency")
    p99 = next(line for line in block if line.split()[0] == "p99")
    assert "n/r (1≥)" in p99 and "not resolvable" in p99


def test_sign_convention_and_words(reports):
    data = json.loads(reports["json"])
    read = data["ops"]["read"]["variants"]["memcg"]
    # the candidate's reads are slower in the tail and fewer: + and worse for p99, - for rate
    assert read["change"]["p99_ns"]["change"] > 0 and read["change"]["p99_ns"]["verdict"] == "worse"
    # -30% of the rate with two runs each: 2 measured degrees of freedom, so the A/A table still
    # weighs in (analysis/intervals.py assumed_prior) and the interval is wide; it excludes 0,
    # but the multiple-comparison adjustment does not allow the call, and the row says so
    rate = read["change"]["rate"]
    assert rate["change"] < 0 and rate["low"] < -0.3 < rate["high"] < 0
    assert rate["verdict"] == "unclear" and rate["note"] == "adjusted" and \
        rate["p_adjusted"] >= 0.05 > rate["p_value"], rate
    assert rate["verdict_text"] == "unclear (adjusted)" and 0 < rate["prior_dof"] < 4
    # 30% fewer reads, but none stopped while others went on: fewer, not starved
    assert read["rate_fell"] is True and read["starved"] is False
    block = section(reports["text"], "read — latency")
    rate = next(line for line in block if line.split()[0] == "rate/s")
    assert "FEWER OPS" in rate and "STARVED" not in rate and "-30" in rate
    assert "+ means the number got larger" in reports["text"]
    sentence = data["ops"]["read"]["variants"]["memcg"]["shift"]["sentence"]
    # 8% of the candidate's reads were drawn around 30 ms; part of the loss is outside the
    # bands named, so the share named is a little under 8%
    assert sentence.endswith("of read ops moved from 256 µs–1 ms into 16–64 ms"), sentence
    assert 6.5 <= float(sentence.split("%")[0]) <= 8.5
    assert sentence in reports["text"]


def section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


_UNITS = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}


def test_text_and_json_agree_number_for_number(reports):
    data = json.loads(reports["json"])
    checked = 0
    for op, op_data in data["ops"].items():
        block = section(reports["text"], f"{op} — ")
        unit = _UNITS[re.search(r" in (\S+)$", block[0]).group(1)]
        base, cand = (op_data["variants"][v] for v in ("vanilla", "memcg"))
        for line in block[2:]:
            cells = re.split(r"\s{2,}", line.strip())
            stat = cells[0]
            if stat not in ("samples", "rate/s", "min", "p50", "p90", "p95", "p99", "p99.9",
                            "max", "mean"):
                continue  # the P(slower) and iteration lines below the table
            key = {"rate/s": "rate", "p99.9": "p999_ns", "samples": "samples"}.get(
                stat, f"{stat}_ns")
            for text_value, entry in zip(cells[1:3], (base, cand), strict=True):
                json_value = entry[key]
                if json_value is None:
                    assert text_value in ("no samples",) or text_value.startswith("n/r")
                    continue
                number = float(text_value.replace(",", ""))
                scale = 1 if key in ("samples", "rate") else unit
                decimals = len(text_value.split(".")[1]) if "." in text_value else 0
                assert abs(number - json_value / scale) <= 0.5 * 10 ** -decimals + 1e-9, \
                    (op, stat, text_value, json_value)
                checked += 1
            change = cand.get("change", {}).get(key)
            if change and change["change"] is not None and len(cells) > 3 and \
                    cells[3].endswith("%"):
                shown = float(cells[3].rstrip("%"))
                decimals = len(cells[3].rstrip("%").split(".")[1]) if "." in cells[3] else 0
                assert abs(shown - change["change"] * 100) <= 0.5 * 10 ** -decimals + 1e-9
                checked += 1
    assert checked > 60


def test_every_text_line_fits_100_columns(reports):
    assert max(len(line) for line in reports["text"].splitlines()) <= 100


def test_text_layout_snapshot(reports):
    text = reports["text"]
    if os.environ.get("STALLBENCH_SNAPSHOT_UPDATE"):
        SNAPSHOT.write_text(text)
    assert text == SNAPSHOT.read_text(), \
        "text layout changed: review and rerun with STALLBENCH_SNAPSHOT_UPDATE=1"


def test_markdown_has_the_tables(reports):
    md = reports["markdown"]
    assert "| p99 |" in md and "**FEWER OPS**" in md and "## read — latency in" in md


def test_incomplete_run_is_left_out_with_one_line(results, tmp_path, capsys):
    import shutil
    shutil.copytree(results, tmp_path / "r")
    run = tmp_path / "r" / "memcg" / "sim" / "2" / "run.json"
    meta = json.loads(run.read_text())
    meta["status"] = "interrupted"
    meta["reason"] = "SIGTERM"
    run.write_text(json.dumps(meta))
    code, out, err = run_cli(capsys, "compare", "vanilla", "memcg", "--results",
                             str(tmp_path / "r"), "--format", "json")
    assert code == 0
    assert err.count("\n") == 1 and "interrupted: SIGTERM; left out" in err
    assert json.loads(out)["ops"]["read"]["variants"]["memcg"]["iterations"]["samples"] \
        == [14000]


def test_nothing_usable_is_exit_2(tmp_path, capsys):
    code, _, err = run_cli(capsys, "compare", "nosuch", "other", "--results", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    code, _, err = run_cli(capsys, "compare", "a", "b", "--noise", "lots")
    assert code == 2


def add_counters(run_dir: Path, reclaim_per_s: float, free_pages: int) -> None:
    """A `counters` monitor table shaped as monitors/counters.py writes it: t_ns + int64."""
    import pyarrow as pa

    from stallbench.results import store
    t_ns = np.arange(0, 11) * 1_000_000_000
    table = pa.table({
        "t_ns": pa.array(t_ns, pa.int64()),
        "vmstat.pgscan_direct": pa.array((np.arange(11) * reclaim_per_s).astype(np.int64)),
        "meminfo.MemFree": pa.array(np.full(11, free_pages), pa.int64()),
    })
    writer = store.RunWriter.__new__(store.RunWriter)
    writer.path = run_dir
    writer.write_monitor("counters", table)


def test_plots_written_as_png_and_svg(results, tmp_path, capsys):
    import shutil
    shutil.copytree(results, tmp_path / "r")
    add_counters(tmp_path / "r" / "vanilla" / "sim" / "1", 10, 500_000)
    add_counters(tmp_path / "r" / "memcg" / "sim" / "1", 4000, 20_000)
    code, out, _ = run_cli(capsys, "compare", "vanilla", "memcg", "--results",
                           str(tmp_path / "r"), "--plots", str(tmp_path / "plots"),
                           "--format", "json")
    assert code == 0
    counters = json.loads(out)["counters"]
    # a cumulative counter becomes a rate, a gauge stays a value
    assert counters["memcg"]["vmstat.pgscan_direct"]["kind"] == "per second"
    assert counters["memcg"]["vmstat.pgscan_direct"]["values"] == [4000.0] * 10
    assert counters["vanilla"]["meminfo.MemFree"]["kind"] == "value"
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    for figure in ("ccdf", "shift", "timeline", "iterations", "counters"):
        assert f"{figure}.png" in names and f"{figure}.svg" in names
    assert (tmp_path / "plots" / "ccdf.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (tmp_path / "plots" / "ccdf.svg").read_text()


def test_several_candidates_mixed_iterations_and_imported_maxima(tmp_path, capsys):
    rng = np.random.default_rng(17)
    for variant, scale, runs in (("vanilla-with-a-long-name", 1.0, 3), ("ext3", 1.2, 1),
                                 ("xfs", 0.9, 2)):
        for i in range(runs):
            path = write_run(tmp_path, variant, {"read": lognormal_ns(rng, 20000, 4e5, 0.5,
                                                                      scale)},
                             duration_s=5.0, seed=i)
            if variant == "xfs":  # as the MMTests importer marks its runs
                meta = json.loads((path / "run.json").read_text())
                meta["interval_sampled"] = True
                (path / "run.json").write_text(json.dumps(meta))
    code, out, _ = run_cli(capsys, "compare", "vanilla-with-a-long-name", "ext3", "xfs",
                           "--results", str(tmp_path))
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "imported interval maxima (MMTests)" in out
    code, out, _ = run_cli(capsys, "compare", "vanilla-with-a-long-name", "ext3", "xfs",
                           "--results", str(tmp_path), "--format", "json")
    data = json.loads(out)
    p50 = data["ops"]["read"]["variants"]["ext3"]["change"]["p50_ns"]
    xfs = data["ops"]["read"]["variants"]["xfs"]["change"]["p50_ns"]
    # one run of ext3, several of xfs: the intervals say how many runs are behind them
    assert p50["runs"][1] == 1 and xfs["runs"][1] > 1 and xfs["run_sd_measured"]
    # true change +20%: inside the interval; vanilla's 3 runs measure 2 degrees of freedom of
    # spread, too few for the A/A table to have faded out, so one run of ext3 cannot call it
    assert p50["low"] < 0.2 < p50["high"] and p50["verdict"] == "unclear"
    assert p50["run_sd_measured"] and 0 < p50["prior_dof"] < 4


def test_an_op_that_stops_while_others_go_on_is_starved(tmp_path, capsys):
    rng = np.random.default_rng(21)
    for variant, gap in (("steady", False), ("stuck", True)):
        start = np.sort(rng.uniform(0, 10e9, 20_000)).astype(np.int64)
        if gap:     # the reads stop for 3 s while the WAL writes go on
            start = start[(start < 4e9) | (start > 7e9)]
        write_run(tmp_path, variant, {"read": lognormal_ns(rng, start.size, 300e3),
                                      "wal": lognormal_ns(rng, 2000, 40e3)},
                  duration_s=10.0, starts={"read": start})
    code, out, _ = run_cli(capsys, "compare", "steady", "stuck", "--results", str(tmp_path),
                           "--format", "json")
    read = json.loads(out)["ops"]["read"]["variants"]["stuck"]
    assert read["starved"] is True and read["rate_fell"] is True
    assert any(e["kind"] == "starved" and 3.5e9 <= e["start_ns"] <= 5e9
               for e in read["stalls"]["episodes"])
    code, out, _ = run_cli(capsys, "compare", "steady", "stuck", "--results", str(tmp_path))
    rate = next(line for line in section(out, "read — latency") if line.split()[0] == "rate/s")
    assert "STARVED" in rate


def test_a_failing_where_analysis_leaves_the_latency_comparison(results, capsys, monkeypatch):
    """A bug in the monitors' analysis must not hide the comparison: every format says it in one
    line where the section would be, and the op tables are all there."""
    import stallbench.compare.where

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(stallbench.compare.where, "build", broken)
    said = "where did the time go: analysis failed (RuntimeError: a bug)"
    for fmt in ("text", "markdown", "html"):
        code, out, _ = run_cli(capsys, "compare", "vanilla", "memcg", "--results", str(results),
                               "--format", fmt)
        assert code == 0 and said in out and "read" in out, fmt
    code, out, _ = run_cli(capsys, "compare", "vanilla", "memcg", "--results", str(results),
                           "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["where"] == {"error": said} and "read" in data["ops"]


def test_output_dash_writes_the_report_to_standard_output(results, tmp_path, capsys,
                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "compare", "vanilla", "memcg", "--results", str(results),
                           "--format", "json", "--output", "-")
    assert code == 0 and not (tmp_path / "-").exists()
    assert json.loads(out)["baseline"] == "vanilla"
