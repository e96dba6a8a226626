"""The saturated machine's run-to-run floor (analysis/interference.py SATURATED_SD): the A/A
comparisons of benchmarks/aa.py on runs recorded on a saturated machine, for several floors.

    .venv/bin/python benchmarks/saturated_prior.py [--data /var/tmp/stallbench-aa7-loaded]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aa  # noqa: E402

from stallbench.analysis import interference  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=Path("/var/tmp/stallbench-aa7-loaded"))
    parser.add_argument("--floors", default="0.5,1,1.5,2,2.5")
    args = parser.parse_args()
    print("floor   set              runs: (rows called, rows, any call, check exit 1)")
    for factor in (float(f) for f in args.floors.split(",")):
        interference.SATURATED_SD = factor
        rng = np.random.default_rng(7)
        for name in ("randread-cached", "pgioperf"):
            runs = aa.runs_of(args.data, name)
            result = aa.aa(runs, aa.SETS[name][0], rng)
            cells = {k: (v["called"], v["rows"], round(v["any_call_rate"], 2), v["check_exit_1"])
                     for k, v in result.items()}
            print(f"{factor:>6g}  {name:<16} {cells}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
