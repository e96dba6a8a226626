"""E-divisive with a t-test (Apache Otava) on the same recorded series as series_trials.py, for
the comparison in analysis/changepoints.py's docstring and BENCHMARKS.md.

    .venv/bin/python benchmarks/series_otava.py --data DIR --otava-python /path/to/python
                                                [--max-pvalue 0.001] [--min-magnitude 0]

Otava sees one number per test run, as a CI history gives it: here each run's p50, p99 and rate
of `read` (`stallbench query`'s view `summaries`, the numbers compare computes), the runs in
series order. Otava is not a dependency of stallbench (it pins its own numpy and brings cloud
clients): --otava-python is an interpreter of a separate virtual environment with
`pip install apache-otava`. A change point between runs i-1 and i is reported at the point of
run i; a step series' knee is found when one lands there (+-1 point).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

METRICS = ("p50_ns", "p99_ns", "rate")
OTAVA = """
import json, sys
from otava.analysis import compute_change_points
job = json.load(sys.stdin)
out = {}
for key, values in job["series"].items():
    found = compute_change_points(values, window_len=job["window"],
                                  max_pvalue=job["max_pvalue"],
                                  min_magnitude=job["min_magnitude"])
    points = found[0] if isinstance(found, tuple) else found
    out[key] = [int(c.index) for c in points]
json.dump(out, sys.stdout)
"""


def runs_in_order(results: Path) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "src")}
    sql = ("SELECT variant, iteration, p50_ns, p99_ns, rate FROM summaries WHERE op = 'read' "
           "ORDER BY variant, iteration")
    proc = subprocess.run([sys.executable, "-m", "stallbench", "query", sql, "--results",
                           str(results), "--format", "json"], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--otava-python", required=True)
    parser.add_argument("--max-pvalue", type=float, default=0.001)
    parser.add_argument("--min-magnitude", type=float, default=0.0)
    parser.add_argument("--window", type=int, default=50)
    args = parser.parse_args()
    trials = sorted((p.stem for p in args.data.glob("*.toml") if (args.data / p.stem).is_dir()),
                    key=lambda n: (n.split("-")[0], int(n.split("-")[1])))
    series, point_of = {}, {}
    for name in trials:
        rows = runs_in_order(args.data / name)
        variants = sorted({r["variant"] for r in rows})
        point_of[name] = [variants.index(r["variant"]) for r in rows]
        for metric in METRICS:
            series[f"{name}/{metric}"] = [float(r[metric]) for r in rows]
    job = {"series": series, "window": args.window, "max_pvalue": args.max_pvalue,
           "min_magnitude": args.min_magnitude}
    proc = subprocess.run([args.otava_python, "-c", OTAVA], input=json.dumps(job),
                          capture_output=True, text=True, check=True)
    found = json.loads(proc.stdout)
    aa_called = steps_right = steps_elsewhere = aa_total = steps_total = 0
    for name in trials:
        knee = None
        if name.startswith("step-"):
            variants = sorted(p.name for p in (args.data / name).iterdir()
                              if p.name.startswith("p"))
            knee = next(i for i, v in enumerate(variants) if int(v.split("-")[1][:-1]) < 100)
        at = sorted({(m, point_of[name][i]) for m in METRICS for i in found[f"{name}/{m}"]})
        print(f"{name:8} knee {knee if knee is not None else '-':>2}  change points: "
              + (", ".join(f"{m}@{i}" for m, i in at) or "none"))
        if knee is None:
            aa_total += 1
            aa_called += bool(at)
        else:
            steps_total += 1
            steps_right += any(abs(i - knee) <= 1 for _, i in at)
            steps_elsewhere += any(abs(i - knee) > 1 for _, i in at)
    print(f"Otava (max_pvalue {args.max_pvalue}, min_magnitude {args.min_magnitude}): A/A "
          f"series with a change point {aa_called} of {aa_total}; steps found at the knee "
          f"{steps_right} of {steps_total}, elsewhere too {steps_elsewhere} of {steps_total}")


if __name__ == "__main__":
    main()
