"""Change points of `stallbench series` on real series of this machine: A/A series and step series.

    .venv/bin/python benchmarks/series_trials.py record --data DIR [--aa 10] [--steps 5]
    .venv/bin/python benchmarks/series_trials.py evaluate --data DIR [--json FILE]

record: each trial is its own plan and results directory under DIR, recorded with `stallbench
run --plan` as a user would (interleaved rounds, POINTS variants x RUNS runs each):
  aa-N     the same configuration POINTS times (randread of a 128 MiB file in 128 KiB records in
           a 384 MiB memory cgroup: the file stays cached);
  step-N   memory limits that shrink, 512 MiB down in 32 MiB steps while the file fits, then from
           25 MiB (or more, to end at 17) down in 2 MiB steps, where the cgroup binds: the first
           binding point is at index 3 + N % 5, so the step moves along the series.
evaluate: `stallbench series` of each trial's variants in order (compare/series.py, the same code
as the command), its change points over the deciding statistics (read p50, p99, rate): an A/A
series must show none in at least 9 of 10 trials, a step series one at the first binding point
(+-1) and none elsewhere. Also each run's machine_load.others_cpus (near 0: a quiet machine).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

POINTS = 10
RUNS = 2
PLAN_HEAD = """workload = "randread"
duration = "1s"
warmup = "2s"
iterations = {runs}
monitors = []
results = "{results}"
[workload_options]
file_size = "128M"
record_size = "128K"
"""
VARIANT = '[[variants]]\nname = "{name}"\nmemory = "{memory}"\nfs = "ext4"\n'


def step_limits(knee: int) -> list[str]:
    """Limits that shrink: the file fits before `knee`, the cgroup binds from it on."""
    fitting = [f"{512 - 32 * i}M" for i in range(knee)]
    top = max(25, 17 + 2 * (POINTS - knee - 1))     # down to 17 MiB at most (16: the floor)
    binding = [f"{top - 2 * i}M" for i in range(POINTS - knee)]
    return fitting + binding


def trial_plans(aa: int, steps: int) -> dict[str, list[tuple[str, str]]]:
    """trial name -> [(variant name, memory limit)] in series order."""
    plans = {}
    for n in range(aa):
        plans[f"aa-{n + 1}"] = [(f"p{i:02d}", "384M") for i in range(POINTS)]
    for n in range(steps):
        limits = step_limits(3 + n % 5)
        plans[f"step-{n + 1}"] = [(f"p{i:02d}-{m}", m) for i, m in enumerate(limits)]
    return plans


def record(data: Path, aa: int, steps: int) -> None:
    data.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "src")}
    for name, variants in trial_plans(aa, steps).items():
        results = data / name
        if results.exists():
            print(f"{name}: already recorded", flush=True)
            continue
        plan = data / f"{name}.toml"
        plan.write_text(PLAN_HEAD.format(runs=RUNS, results=results) + "".join(
            VARIANT.format(name=v, memory=m) for v, m in variants))
        proc = subprocess.run([sys.executable, "-m", "stallbench", "-q", "run", "--plan",
                               str(plan)], env=env, capture_output=True, text=True)
        (data / f"{name}.log").write_text(proc.stdout + proc.stderr)
        print(f"{name}: exit {proc.returncode}", flush=True)


def _knee(name: str, variants: list[str]) -> int | None:
    if not name.startswith("step-"):
        return None
    return next(i for i, v in enumerate(variants) if int(v.split("-")[1][:-1]) < 100)


def evaluate(data: Path, out: Path | None) -> None:
    from stallbench.compare.series import SeriesOptions, build_series
    from stallbench.results.runselect import resolve_runs

    rows = []
    for plan in sorted(data.glob("*.toml"), key=lambda p: (p.stem.split("-")[0],
                                                           int(p.stem.split("-")[1]))):
        name, results = plan.stem, data / plan.stem
        if not (data / f"{name}.log").is_file():        # not recorded (yet)
            continue
        variants = sorted(p.name for p in results.iterdir() if p.name.startswith("p"))
        series = build_series([resolve_runs(v, results) for v in variants],
                              SeriesOptions(results=results))
        knee = _knee(name, variants)
        found = [(c.metric, c.index) for c in series.change_points if c.verdict != "unclear"]
        distrusted = [(c.metric, c.index, c.change.note) for c in series.change_points
                      if c.verdict == "unclear"]
        others = [json.loads((r.path / "run.json").read_text())["machine_load"]["others_cpus"]
                  for point in series.points for r in point.runs]
        right = knee is not None and any(abs(i - knee) <= 1 for _, i in found)
        wrong = [m for m, i in found if knee is None or abs(i - knee) > 1]
        rows.append({"trial": name, "knee": knee, "change_points": found, "right": right,
                     "elsewhere": wrong, "distrusted": distrusted, "others_cpus_max": max(others),
                     "others_cpus_mean": sum(others) / len(others)})
        where = ", ".join(f"{m}@{i}" for m, i in found) or "none"
        where += "".join(f"; {m}@{i} unclear ({note})" for m, i, note in distrusted)
        print(f"{name:8} knee {knee if knee is not None else '-':>2}  change points: {where}"
              f"  others_cpus mean {rows[-1]['others_cpus_mean']:.2f} max "
              f"{rows[-1]['others_cpus_max']:.2f}", flush=True)
    aa = [r for r in rows if r["knee"] is None]
    steps = [r for r in rows if r["knee"] is not None]
    print(f"A/A series with a change point: {sum(bool(r['change_points']) for r in aa)} of "
          f"{len(aa)}")
    print(f"step series found at the knee (+-1): {sum(r['right'] for r in steps)} of "
          f"{len(steps)}; with a change point elsewhere: "
          f"{sum(bool(r['elsewhere']) for r in steps)} of {len(steps)}")
    if out is not None:
        out.write_text(json.dumps(rows, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    rec = sub.add_parser("record", help="record the trials' series")
    rec.add_argument("--data", type=Path, required=True)
    rec.add_argument("--aa", type=int, default=10, help="A/A series trials")
    rec.add_argument("--steps", type=int, default=5, help="step series trials")
    ev = sub.add_parser("evaluate", help="their change points")
    ev.add_argument("--data", type=Path, required=True)
    ev.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.what == "record":
        record(args.data, args.aa, args.steps)
    else:
        evaluate(args.data, args.json)


if __name__ == "__main__":
    main()
