"""Scenario 4: damaged results. `show` and `compare` name each damaged run and what is wrong
with it, one line each, and carry on with the runs that are intact."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from reliability_support import assert_one_line_exit_2, sb

from stallbench.results.opsfile import ops_batch
from stallbench.results.store import RunWriter

pytestmark = pytest.mark.machine

RNG_SEED = 7


def _make_run(results: Path, variant: str, n: int, scale: float) -> tuple[Path, np.ndarray]:
    """A complete run of workload `fake` with n `read` ops; returns its dir and latencies."""
    rng = np.random.default_rng([RNG_SEED, n])
    latency = (rng.lognormal(0, 0.5, n) * scale).astype(np.int64) + 1000
    start = np.cumsum(latency)
    writer = RunWriter(results, variant, "fake", {"n": n})
    writer.meta.ops_declared = ["read"]
    samples = writer.write_ops([ops_batch(["read"], np.zeros(n, np.int32), 0, start, latency)])
    writer.meta.samples = samples
    writer.meta.counted = samples
    writer.meta.duration_s = float(start[-1]) / 1e9
    writer.meta.rusage = {"user_s": 0.1, "system_s": 0.1, "elapsed_s": writer.meta.duration_s}
    writer.finalize("complete")
    return writer.path, latency


DAMAGE = {
    "truncated ops.parquet": lambda run: _truncate(run / "ops.parquet", 0.5),
    "empty ops.parquet": lambda run: _truncate(run / "ops.parquet", 0.0),
    "corrupt ops.parquet": lambda run: _scribble(run / "ops.parquet"),
    "ops.parquet missing": lambda run: (run / "ops.parquet").unlink(),
    "run.json missing": lambda run: (run / "run.json").unlink(),
    "run.json malformed": lambda run: (run / "run.json").write_text('{"schema_version": 1, "st'),
    "run.json not an object": lambda run: (run / "run.json").write_text("[1, 2]"),
    "newer schema": lambda run: _edit(run, schema_version=99),
    "killed (still 'running')": lambda run: _edit(run, status="running", pid=_dead_pid()),
}
EXPECTED = {
    "truncated ops.parquet": "ops.parquet: damaged",
    "empty ops.parquet": "ops.parquet: damaged",
    "corrupt ops.parquet": "ops.parquet: damaged",
    "ops.parquet missing": "no ops.parquet",
    "run.json missing": "not a run directory (no run.json)",
    "run.json malformed": "run.json: malformed JSON",
    "run.json not an object": "run.json: malformed (not a JSON object)",
    "newer schema": "written by a newer stallbench (schema 99, this one reads 1)",
    "killed (still 'running')": "incomplete: the run was killed",
}


def _truncate(path: Path, fraction: float) -> None:
    os.truncate(path, int(path.stat().st_size * fraction))


def _scribble(path: Path) -> None:
    """Overwrite 4 KiB in the middle of the column data (the footer stays intact)."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 3
    data[middle:middle + 4096] = np.random.default_rng(RNG_SEED).bytes(4096)
    path.write_bytes(bytes(data))


def _edit(run: Path, **changes) -> None:
    meta = json.loads((run / "run.json").read_text())
    meta.update(changes)
    (run / "run.json").write_text(json.dumps(meta))


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> dict:
    """Variant `good`: 2 intact runs. Variant `mixed`: 2 intact runs and one of each damage."""
    results = tmp_path_factory.mktemp("damaged") / "results"
    good = [_make_run(results, "good", 20_000 + k, 1000.0)[1] for k in range(2)]
    mixed = [_make_run(results, "mixed", 30_000 + k, 1500.0)[1] for k in range(2)]
    broken: dict[str, Path] = {}
    for k, (what, damage) in enumerate(DAMAGE.items()):
        run, _ = _make_run(results, "mixed", 1000 + k, 1500.0)
        damage(run)
        broken[what] = run
    return {"results": results, "good": good, "mixed": mixed, "broken": broken}


def _problem_lines(stderr: str, broken: dict[str, Path]) -> dict[str, str]:
    lines = stderr.strip().splitlines()
    found = {}
    for what, run in broken.items():
        hits = [line for line in lines if str(run) in line]
        assert len(hits) == 1, (what, lines)
        assert EXPECTED[what] in hits[0], (what, hits[0])
        found[what] = hits[0]
    assert len(lines) == len(broken), lines
    return found


def test_compare_names_each_damaged_run_and_uses_the_intact_ones(damaged):
    out = sb("compare", "good", "mixed", "--format", "json", "--results",
             str(damaged["results"]), state=damaged["results"].parent / "state")
    assert out.returncode == 0, out.stderr
    _problem_lines(out.stderr, damaged["broken"])
    report = json.loads(out.stdout)
    mixed = np.concatenate(damaged["mixed"])
    read = report["ops"]["read"]["variants"]
    assert read["mixed"]["samples"] == len(mixed)
    assert read["mixed"]["max_ns"] == mixed.max()
    assert read["mixed"]["p50_ns"] == pytest.approx(
        np.percentile(mixed, 50, method="inverted_cdf"),
        rel=report["accuracy"]["quantile_relative_error"])
    assert read["good"]["samples"] == sum(len(x) for x in damaged["good"])
    assert [r["iteration"] for r in report["variants"][1]["runs"]] == [1, 2]


def test_show_names_each_damaged_run_and_shows_the_intact_ones(damaged):
    out = sb("show", "mixed", "--format", "json", "--results", str(damaged["results"]),
             state=damaged["results"].parent / "state")
    assert out.returncode == 0, out.stderr
    # show lists incomplete runs too (flagged), so the killed one is shown, not a problem
    broken = {k: v for k, v in damaged["broken"].items() if not k.startswith("killed")}
    _problem_lines(out.stderr, broken)
    assert str(damaged["broken"]["killed (still 'running')"]) in out.stdout
    assert "incomplete: the run was killed" in out.stdout


def test_nothing_usable_is_one_line_exit_2(damaged, tmp_path):
    results = tmp_path / "results"
    run, _ = _make_run(results, "only", 5000, 1000.0)
    _truncate(run / "ops.parquet", 0.5)
    out = sb("compare", "only", "only", "--results", str(results), state=tmp_path / "state")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert all(str(run) in line for line in out.stderr.strip().splitlines())
    assert "'only': no usable run" in out.stderr.strip().splitlines()[-1]


def test_a_missing_variant_is_one_line(tmp_path):
    out = sb("show", "nosuch", "--results", str(tmp_path), state=tmp_path / "state")
    assert_one_line_exit_2(out, "nosuch")
