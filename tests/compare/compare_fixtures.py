"""Helpers shared by the compare/report/check tests: real run directories written through
store.RunWriter from simulated latencies (no mocks: the readers see exactly what a run leaves)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from stallbench.analysis import intervals as iv
from stallbench.analysis import summary as sm
from stallbench.analysis.quantiles import percentiles
from stallbench.compare.changes import compare_op
from stallbench.compare.loading import VariantRuns, measured_seconds, op_side
from stallbench.compare.model import CompareOptions
from stallbench.results import store
from stallbench.results.opsfile import ops_batch


def write_run(results: Path, variant: str, ops: dict[str, np.ndarray], *, duration_s: float,
              workload: str = "sim", workers: dict[str, np.ndarray] | None = None,
              starts: dict[str, np.ndarray] | None = None,
              intended: dict[str, np.ndarray] | None = None,
              declared: list[str] | None = None, status: str = "complete",
              rusage: dict[str, float] | None = None, seed: int = 0) -> Path:
    """One run with the given latencies per op; start times spread evenly unless given."""
    rng = np.random.default_rng(seed)
    names = list(ops)
    writer = store.RunWriter(results, variant, workload, {"seed": seed})
    batches = []
    for code, name in enumerate(names):
        latency = np.asarray(ops[name], dtype=np.int64)
        n = latency.size
        if n == 0:
            continue
        start = starts[name] if starts and name in starts else \
            np.sort(rng.uniform(0, duration_s * 1e9 - latency.clip(max=duration_s * 5e8), n)
                    ).astype(np.int64)
        worker = workers[name] if workers and name in workers else np.zeros(n, dtype=np.int32)
        paced = intended.get(name) if intended else None
        batches.append(ops_batch(names, np.full(n, code), worker, start, latency, paced))
    counts = writer.write_ops(batches)
    writer.meta.update({
        "ops_declared": declared if declared is not None else names,
        "duration_s": duration_s,
        "samples": counts,
        "counted": counts,
        "rusage": rusage or {"user_s": 1.0, "system_s": 0.5, "elapsed_s": duration_s},
        "workload_summary": {},
        # fixed so that report snapshots do not depend on the machine the tests run on
        "kernel": {"release": "6.1.0-test", "version": "#1", "machine": "x86_64", "cmdline": ""},
    })
    writer.finalize(status)
    return writer.path


def ops_span_s(run_dir: Path) -> float:
    """The oracle of a run's measured time (no warm-up): numpy on its raw ops, from the first
    op's start to the last completion."""
    import pyarrow.parquet as pq

    table = pq.read_table(Path(run_dir) / "ops.parquet", columns=["start_ns", "latency_ns"])
    start, latency = (table.column(c).to_numpy() for c in ("start_ns", "latency_ns"))
    return float((start + latency).max() - start.min()) / 1e9


def lognormal_ns(rng: np.random.Generator, n: int, median_ns: float, sigma: float = 0.5,
                 scale: float = 1.0) -> np.ndarray:
    return np.maximum((rng.lognormal(np.log(median_ns), sigma, n) * scale), 1).astype(np.int64)


def compare_summaries(baseline: list[sm.RunSummary], candidate: list[sm.RunSummary], op: str,
                      options: CompareOptions | None = None) -> dict[str, iv.Change]:
    """Changes of every statistic of one op between two lists of run summaries as measured
    (no verdict), as build_comparison computes them."""
    options = options or CompareOptions()
    probabilities = sorted({s.probability for s in percentiles(options.percentiles)})
    sides = []
    for summaries in (baseline, candidate):
        sides.append(op_side(op, VariantRuns("", [], summaries, measured_seconds(summaries)),
                             options.percentiles))
    return compare_op(sides[0], sides[1], probabilities, options, op=op).changes
