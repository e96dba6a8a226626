"""How `stallbench series` scales with the runs of a history: N nightly points of one plan, read
from the runs' summaries (summary.parquet, never the raw ops): seconds and peak memory.

    .venv/bin/python benchmarks/series_scale.py --source 'DIR/aa-*/p*/randread/*' --data DIR2
                                                [--runs 50,100,200]

The history is made of real recorded runs (--source, e.g. benchmarks/series_trials.py's A/A
runs): each is copied (run.json, ops.parquet, summary.parquet; the originals are only read)
into DATA/runs-N/nightly/<workload>/<i> with the start date of night i (run.json start_utc, one
day apart), so `series nightly --by date` sees N points of one run each, as a nightly job's
results tree would hold. Each measurement is one `stallbench series` process under
/usr/bin/time (elapsed seconds and maximum resident set size).
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

FILES = ("ops.parquet", "summary.parquet")


def make_history(sources: list[Path], target: Path, runs: int) -> None:
    start = datetime.datetime(2026, 1, 1, 2, 0, tzinfo=datetime.UTC)
    for i in range(runs):
        source = sources[i % len(sources)]
        meta = json.loads((source / "run.json").read_text())
        night = start + datetime.timedelta(days=i)
        meta.update(variant="nightly", iteration=i + 1,
                    start_utc=night.isoformat(), end_utc=night.isoformat())
        out = target / "nightly" / meta["workload"] / str(i + 1)
        out.mkdir(parents=True)
        for name in FILES:
            shutil.copy2(source / name, out / name)
        (out / "run.json").write_text(json.dumps(meta))


def measure(results: Path) -> tuple[float, int, int]:
    """(seconds, peak RSS in MiB, exit status) of one `series nightly --by date`."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "src")}
    proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", sys.executable, "-m", "stallbench",
                           "series", "nightly", "--by", "date", "--results", str(results),
                           "--format", "json", "--output", os.devnull],
                          env=env, capture_output=True, text=True)
    seconds, kib = proc.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(kib) // 1024, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True, help="glob of real run directories")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--runs", default="50,100,200")
    args = parser.parse_args()
    sources = sorted(Path(p) for p in glob.glob(args.source) if Path(p, "run.json").is_file())
    if not sources:
        parser.error(f"--source {args.source}: no run directories")
    ops = [sum(json.loads((s / "run.json").read_text())["samples"].values()) for s in sources]
    print(f"{len(sources)} real runs as the source; ops per run: {sum(ops) // len(ops):,}")
    print("runs  seconds  peak RSS (MiB)  exit")
    for runs in (int(n) for n in args.runs.split(",")):
        target = args.data / f"runs-{runs}"
        if not target.exists():
            make_history(sources, target, runs)
        seconds, mib, code = measure(target)
        print(f"{runs:4}  {seconds:7.2f}  {mib:14}  {code:4}", flush=True)


if __name__ == "__main__":
    main()
