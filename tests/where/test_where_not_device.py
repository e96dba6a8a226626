"""A sleep the kernel counts as a block I/O wait while the device serves nothing of the op
(issue 37), made for real on this host: an unpaced buffered writer under vm.dirty_bytes=1M
sleeps in balance_dirty_pages (io_schedule_timeout) while writeback, not its own write, keeps
the device busy. The where line's first cause must be that sleep, the device-or-above table
must not say "waiting for the device", and the stacks monitor must name the sleeping function.

Oracles: the reclaim monitor's raw pause intervals intersected with the ops in ops.parquet by
numpy (the where section's in-op time must match them), and the stacks monitor's raw D-state
samples of the writer (where it slept, counted by numpy).
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import run_stallbench

pytestmark = [pytest.mark.machine, pytest.mark.root]

DIRTY = ("--sysctl", "vm.dirty_bytes=1048576", "--sysctl", "vm.dirty_background_bytes=524288")


def _run(results: Path, variant: str, *extra: str) -> Path:
    out = run_stallbench("run", "pgioperf", "--variant", variant, "--results", str(results),
                         "--no-progress", "--duration", "4", "--warmup", "1s", "--readers", "0",
                         "--data-size", "64M", "--checkpoint-interval", "1us", "--fs", "ext4",
                         "--fs-size", "512M", "--monitors", "default,stacks", *extra, timeout=300)
    assert out.returncode == 0, out.stderr
    return next((results / variant / "pgioperf").iterdir())


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> dict:
    results = tmp_path_factory.mktemp("notdevice") / "results"
    runs = {"base": _run(results, "base"), "dirty": _run(results, "dirty", *DIRTY)}
    out = run_stallbench("compare", "base", "dirty", "--results", str(results), "--format",
                         "json", check=True)
    return {"runs": runs, "where": json.loads(out.stdout)["where"]}


def _checkpointer(run: Path) -> int:
    meta = json.loads((run / "run.json").read_text())
    summary = meta["workload_summary"]
    worker = next(int(w) for w, role in summary["worker_roles"].items() if role == "checkpointer")
    return int(summary["worker_pids"][str(worker)])


def test_pauses_inside_the_ops_are_counted_exactly(pair: dict) -> None:
    run = pair["runs"]["dirty"]
    pid = _checkpointer(run)
    stalls = pq.read_table(run / "monitors" / "reclaim.parquet").to_pydict()
    pauses = [(t, d) for t, d, tid, kind in zip(stalls["t_ns"], stalls["duration_ns"],
                                                 stalls["tid"], stalls["kind"], strict=True)
              if tid == pid and kind == "balance_dirty_pages" and d > 0]
    assert pauses, "the oracle: the writer was throttled"
    ops = pq.read_table(run / "ops.parquet").to_pydict()
    warmup = json.loads((run / "run.json").read_text())["warmup_s"] * 1e9
    first = min(ops["start_ns"])
    start = np.array([s for s, op in zip(ops["start_ns"], ops["op"], strict=True)
                      if op == "checkpoint"])
    end = start + np.array([lat for lat, op in zip(ops["latency_ns"], ops["op"], strict=True)
                            if op == "checkpoint"])
    # the warm-up counts from the first op, in whole time blocks: allow the ops of one block
    keep = start >= first + warmup
    inside = sum(np.clip(np.minimum(end[keep], t + d) - np.maximum(start[keep], t), 0, None).sum()
                 for t, d in pauses)
    traced = pair["where"]["stalls"]["dirty"]["checkpoint"]["balance_dirty_pages"]
    assert abs(traced["in_ops_ns"] - inside) <= 0.1 * inside + 8e6, (traced, inside)
    assert pair["where"]["stalls"]["base"] == {} or \
        "balance_dirty_pages" not in pair["where"]["stalls"]["base"].get("checkpoint", {})


def test_the_first_cause_is_the_sleep_and_not_the_device(pair: dict) -> None:
    where = pair["where"]
    lines = [e["text"] for e in where["explanations"]
             if e["variant"] == "dirty" and e["op"] == "checkpoint"]
    assert lines, where["explanations"]
    first = lines[0]
    assert "dirty throttling (balance_dirty_pages)" in first, first
    # the sleep leads; block I/O is only named after it
    assert first.index("dirty throttling") < first.find("block I/O") or "block I/O" not in first
    verdict = where["device"]["dirty"]["checkpoint"]["verdict"]
    assert not verdict.startswith("waiting for the device"), verdict
    assert "dirty throttling" in verdict, verdict


def test_the_stacks_name_the_sleeping_function(pair: dict) -> None:
    run = pair["runs"]["dirty"]
    pid = _checkpointer(run)
    samples = pq.read_table(run / "monitors" / "stacks.parquet").to_pydict()
    leaves = collections.Counter(stack.split(";")[-1] for stack, tid
                                 in zip(samples["stack"], samples["tid"], strict=True)
                                 if tid == pid and stack)
    assert leaves.most_common(1)[0][0] == "balance_dirty_pages", leaves
    where = pair["where"]
    top = where["stacks"]["dirty"]["top"][0]
    assert top["sleeps_in"] == "balance_dirty_pages", top
    changes = [e["text"] for e in where["explanations"]
               if e["variant"] == "dirty" and e["op"] is None and "blocked tasks sleep in" in
               e["text"]]
    assert changes and "sleep in balance_dirty_pages" in changes[0], where["explanations"]
