"""Power and honesty of stallbench's verdicts on real configuration changes of this machine.

    .venv/bin/python benchmarks/power.py record   [--data DIR] [--rounds 8] [--seconds 5]
    .venv/bin/python benchmarks/power.py evaluate [--data DIR] [--sets ...] [--json FILE]
    .venv/bin/python benchmarks/power.py record   --duet [--data /var/tmp/stallbench-duet] ...
    .venv/bin/python benchmarks/power.py evaluate --duet [--data /var/tmp/stallbench-duet] ...

1. record: for each change, ROUNDS interleaved rounds of three variants — the baseline, its
   A/A twin (the same configuration under another name) and the changed configuration — each
   round in a random order (Abedi & Brecht), one `stallbench run` process per run as a user
   would, with `--monitors none`. A set of 8 rounds is 24 runs.
2. evaluate: the true size of each change is the pooled estimate over all its rounds (the
   change of the statistic of all baseline runs against all changed runs); then, for disjoint
   groups of 1 and 3 rounds, the share of comparisons that call it worse (power), the share of
   95% intervals that hold the true size (coverage), and the same for the twin against the
   baseline (A/A: rows called, comparisons with any call, `check` exit 1).
   Scaled copies: latencies of real baseline runs multiplied by a known factor, against other
   real baseline runs (true change exactly the factor).

With --duet (`stallbench run --plan --duet`, two CPUs hold two variants): ROUNDS rounds of the
A/A duet (a, twin: the baseline twice), then ROUNDS of the change duet (b, changed), one
`stallbench run --plan` process each; the changes that are per process only
(recsize, threads, direct-bs, memcg; a sysctl is system-wide, refused). Evaluated the same way,
pair by pair, on windows of consecutive rounds (as a user's plan would run them, CPU 0
alternating): real = b vs changed, A/A = a vs twin, scaled = a vs twin with the twin's
latencies scaled (the partner of each scaled run is its real A/A twin).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

CHANGES = {
    # name: (base args, changed args, op, statistics judged)
    "recsize": (["randread", "--file-size", "256M", "--no-drop-caches"],
                ["randread", "--file-size", "256M", "--no-drop-caches", "--record-size", "8K"]),
    "threads": (["randread", "--file-size", "256M", "--no-drop-caches"],
                ["randread", "--file-size", "256M", "--no-drop-caches", "--threads", "2"]),
    "direct-bs": (["randread", "--file-size", "256M", "--direct"],
                  ["randread", "--file-size", "256M", "--direct", "--record-size", "16K"]),
    "sysctl": (["pgioperf", "--readers", "2", "--data-size", "384M"],
               ["pgioperf", "--readers", "2", "--data-size", "384M",
                "--sysctl", "vm.dirty_background_bytes=1048576"]),
    "memcg": (["pgioperf", "--readers", "2", "--data-size", "384M", "--memory", "160M"],
              ["pgioperf", "--readers", "2", "--data-size", "384M", "--memory", "112M"]),
}
VARIANTS = ("base", "twin", "changed")

# duet sets: (workload, [workload_options], baseline variant keys, changed variant keys)
DUET_CHANGES = {
    "recsize": ("randread", {"file_size": "256M"}, {"drop_caches": False},
                {"drop_caches": False, "workload_options": {"record_size": "8K"}}),
    "threads": ("randread", {"file_size": "256M"}, {"drop_caches": False},
                {"drop_caches": False, "workload_options": {"threads": 2}}),
    "direct-bs": ("randread", {"file_size": "256M", "direct": True}, {},
                  {"workload_options": {"record_size": "16K"}}),
    "memcg": ("pgioperf", {"readers": 2, "data_size": "384M"}, {"memory": "160M"},
              {"memory": "112M"}),
}
DUET_VARIANTS = (("a", "twin"), ("b", "changed"))


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(str(value))


def duet_plan(workload: str, options: dict, names: tuple[str, str], keys: list[dict],
              seconds: float, rounds: int) -> str:
    lines = [f'workload = "{workload}"', f'duration = "{seconds:g}s"', f"iterations = {rounds}",
             'monitors = "none"', "duet = true", "", "[workload_options]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in options.items()]
    for name, variant in zip(names, keys, strict=True):
        lines += ["", "[[variants]]", f'name = "{name}"']
        lines += [f"{k} = {_toml_value(v)}" for k, v in variant.items()
                  if k != "workload_options"]
        if variant.get("workload_options"):
            lines.append("[variants.workload_options]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in variant["workload_options"].items()]
    return "\n".join(lines) + "\n"


def record_duet(data: Path, sets: list[str], rounds: int, seconds: float, seed: int) -> None:
    """Per set: ROUNDS duet rounds of the A/A duet in one `stallbench run --plan` (its CPU
    sets alternate by round), then ROUNDS of the change duet. No comparison crosses the two
    (each pairs runs of one duet), so they need no interleaving; within each, the rounds
    alternate CPU 0 between the sides, as a user's plan with iterations does."""
    for name in sets:
        workload, options, base, changed = DUET_CHANGES[name]
        results = data / name
        results.mkdir(parents=True, exist_ok=True)
        for names, keys in ((DUET_VARIANTS[0], [base, base]), (DUET_VARIANTS[1], [base, changed])):
            plan = results / f"duet-{names[0]}-{names[1]}.toml"
            plan.write_text(duet_plan(workload, options, names, keys, seconds, rounds))
            started = time.time()
            stallbench("run", "--plan", str(plan), "--results", str(results), "--no-progress")
            print(f"  {name} {'+'.join(names)}: {rounds} duet rounds "
                  f"({time.time() - started:.0f} s)", flush=True)


def stallbench(*args: str) -> None:
    cmd = [sys.executable, "-m", "stallbench", *args]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} -> {result.returncode}\n{result.stderr[-2000:]}")


def record(data: Path, sets: list[str], rounds: int, seconds: float, seed: int) -> None:
    rng = random.Random(seed)
    for name in sets:
        base, changed = CHANGES[name]
        results = data / name
        have = min((len(list((results / v).glob("*/*/run.json"))) if (results / v).exists()
                    else 0) for v in VARIANTS)
        if have < rounds and "--no-drop-caches" in base:
            stallbench("run", base[0], "--variant", "warming", "--results", str(results),
                       "--duration", "2s", "--monitors", "none", "--no-progress", *base[1:])
        for i in range(have, rounds):
            order = list(VARIANTS)
            rng.shuffle(order)
            started = time.time()
            for variant in order:
                args = changed if variant == "changed" else base
                stallbench("run", args[0], "--variant", variant, "--results", str(results),
                           "--duration", f"{seconds}s", "--monitors", "none", "--no-progress",
                           *args[1:])
            print(f"  {name} round {i + 1}/{rounds} ({' '.join(order)}, "
                  f"{time.time() - started:.0f} s)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("record", "evaluate"))
    parser.add_argument("--data", type=Path, default=Path("/var/tmp/stallbench-power"))
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--sets", default=",".join(CHANGES))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--duet", action="store_true",
                        help="duet rounds (stallbench run --duet), data in "
                             "/var/tmp/stallbench-duet by default")
    args = parser.parse_args()
    if args.duet and args.data == Path("/var/tmp/stallbench-power"):
        args.data = Path("/var/tmp/stallbench-duet")
    if args.duet and args.sets == ",".join(CHANGES):
        args.sets = ",".join(DUET_CHANGES)
    sets = [s for s in args.sets.split(",") if s]
    if args.command == "record":
        if os.geteuid() != 0:
            raise SystemExit("power.py record: run as root (memory cgroups, sysctls)")
        (record_duet if args.duet else record)(args.data, sets, args.rounds, args.seconds,
                                                args.seed)
        return 0
    from power_eval import evaluate, evaluate_duet  # noqa: PLC0415 (numpy, the comparison)
    result = (evaluate_duet if args.duet else evaluate)(args.data, sets)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
