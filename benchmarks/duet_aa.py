"""Duet A/A as tests/run/test_duet.py runs it: how often its twin is called, and why.

    .venv/bin/python benchmarks/duet_aa.py [--data /var/tmp/stallbench-duet-aa] [--plans 30]
                                           [--noise 10%] [--draws 200000] [--skip-record]

1. Record: PLANS separate `stallbench run --plan` of the test's A/A plan (3 duets of 2 s cached
   4 KiB randreads of a 32 MiB file; a2 and twin are the same configuration), and each one's
   `stallbench compare a2 twin --noise NOISE --format json`, as a user would.
2. Calls: how many comparisons called a deciding row (p50, p99, rate), with the change.
3. Pairs (numpy on each run's raw ops.parquet, not the tool's summaries): per statistic the
   log ratio twin/a2 of every duet round, its mean, sd and kurtosis; a t-test that neither side
   is favoured; a one-way ANOVA by plan (are a plan's pairs more alike than other plans'?).
4. Bootstrap: DRAWS windows of 3 pairs drawn from all pairs with random signs (a true A/A is
   symmetric), each given analysis/paired.py's t interval (its formula, vectorised here with
   scipy's t quantile so that 200,000 windows take seconds); the share called at
   2%, 5% and NOISE (interval excludes 0 and |change| > noise, no BH), i.e. how often a single
   A/A comparison of this machine's pairs is called by chance alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from scipy import stats

from stallbench.analysis.tdist import CONFIDENCE

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "run")]   # test_duet.py and the conftest it imports
from test_duet import PLAN as TEST_PLAN  # noqa: E402 (the test's plan, so the two cannot drift)

PLAN = TEST_PLAN.format(a="a2", b="twin", changed="")
SIDES = ("a2", "twin")
STATS = ("p50", "p99", "rate")
STALLBENCH = [sys.executable, "-m", "stallbench"]


def percent(text: str) -> float:
    return float(text.rstrip("%")) / 100


def record(data: Path, plans: int, noise: str) -> None:
    data.mkdir(parents=True, exist_ok=True)
    plan = data / "aa.toml"
    plan.write_text(PLAN)
    started = time.monotonic()
    for i in range(1, plans + 1):
        results = data / f"r{i}"
        subprocess.run([*STALLBENCH, "run", "--plan", str(plan), "--results", str(results),
                        "--no-progress"], check=True, stdout=subprocess.DEVNULL)
        compared = subprocess.run([*STALLBENCH, "compare", *SIDES, "--results", str(results),
                                   "--noise", noise, "--format", "json"], check=True,
                                  capture_output=True, text=True).stdout
        (data / f"c{i}.json").write_text(compared)
        print(f"plan {i}/{plans} recorded ({time.monotonic() - started:.0f} s)", flush=True)


def run_values(run: Path) -> list[float]:
    latency = pq.read_table(run / "ops.parquet", columns=["latency_ns"]).column(0).to_numpy()
    duration = json.loads((run / "run.json").read_text())["duration_s"]
    return [float(np.percentile(latency, 50)), float(np.percentile(latency, 99)),
            latency.size / duration]


def plan_pairs(results: Path) -> np.ndarray:
    """Rows: duet rounds; columns: log(twin/a2) of STATS, partners matched by duet id."""
    runs = {}
    for side in SIDES:
        for meta in sorted((results / side / "randread").glob("*/run.json")):
            runs.setdefault(json.loads(meta.read_text())["duet"]["id"], {})[side] = meta.parent
    return np.array([np.log(np.array(run_values(pair["twin"])) / np.array(run_values(pair["a2"])))
                     for pair in runs.values()])


def called_share(pairs: np.ndarray, noise: float, draws: int, rng) -> float:
    """Share of 3-pair windows (drawn with random signs) whose paired t interval is called."""
    window = pairs[rng.integers(0, pairs.size, size=(draws, 3))] \
        * rng.choice((-1.0, 1.0), size=(draws, 3))
    mean, sd = window.mean(axis=1), window.std(axis=1, ddof=1)
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, 2) * sd / np.sqrt(3)
    return float(np.mean((np.abs(mean) > half) & (np.abs(np.expm1(mean)) > noise)))


def analyse(data: Path, noise: float, draws: int) -> dict:
    comparisons = sorted(data.glob("c*.json"), key=lambda p: int(p.stem[1:]))
    calls, per_plan = {}, []
    for path in comparisons:
        change = json.loads(path.read_text())["ops"]["read"]["variants"]["twin"]["change"]
        called = {stat: [row["verdict"], round(row["change"], 4)] for stat, row in change.items()
                  if row["verdict"] in ("better", "worse")}
        if called:
            calls[path.stem] = called
        per_plan.append(plan_pairs(data / f"r{path.stem[1:]}"))
    rng = np.random.default_rng(1)
    pairs = np.concatenate(per_plan)
    result = {"comparisons": len(comparisons), "called": calls, "pairs": len(pairs)}
    for j, name in enumerate(STATS):
        x = pairs[:, j]
        result[name] = {
            "mean": round(float(x.mean()), 4), "sd": round(float(x.std(ddof=1)), 4),
            "kurtosis": round(float(stats.kurtosis(x)), 2),
            "twin_lower": round(float(np.mean(x < 0)), 3),
            "mean_zero_p": round(float(stats.ttest_1samp(x, 0).pvalue), 3),
            "by_plan_anova_p": round(float(stats.f_oneway(*(p[:, j] for p in per_plan)).pvalue), 3),
            "bootstrap_called": {f"{level:.0%}": round(called_share(x, level, draws, rng), 4)
                                 for level in sorted({0.02, 0.05, noise})},
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/var/tmp/stallbench-duet-aa"))
    parser.add_argument("--plans", type=int, default=30)
    parser.add_argument("--noise", default="10%")
    parser.add_argument("--draws", type=int, default=200_000)
    parser.add_argument("--skip-record", action="store_true")
    args = parser.parse_args()
    if not args.skip_record:
        record(args.data, args.plans, args.noise)
    print(json.dumps(analyse(args.data, percent(args.noise), args.draws), indent=1))


if __name__ == "__main__":
    main()
