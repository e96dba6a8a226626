"""The evaluation half of benchmarks/power.py (imported by it): every comparison goes through
the same code as `stallbench compare` and `check`.

Per set (a change recorded as ROUNDS interleaved rounds of base, twin and changed):
- true size: all base and twin runs against all changed runs (pooled estimate);
- real change, 3 rounds: base vs changed of the same 3 rounds (TRIALS random choices of 3 of
  the rounds); 1 round: base vs changed of one round, with a noise profile made from the twin
  runs of the other rounds (as `stallbench calibrate` would, at other times than the trial);
- A/A: base vs twin of the same rounds, 1 (with that profile and without), 2 and 3 rounds;
- scaled: base vs twin runs with every latency x1.10 (p50 +10%) or the ops above p98 x1.25
  (p99 +25%), 3 rounds; x1.25 and x1.50 with 1 round and the profile.
detected = called worse (the true direction); coverage = the 95% interval holds the true size.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from aa import scaled_copy  # noqa: E402

from stallbench.compare.calibration import duet_profile_from_runs, profile_from_runs  # noqa: E402
from stallbench.compare.comparison import build_comparison  # noqa: E402
from stallbench.compare.gate import gate, gate_exit_code, gate_options  # noqa: E402
from stallbench.compare.metrics import Metric, parse_metric  # noqa: E402
from stallbench.compare.model import CompareOptions  # noqa: E402
from stallbench.results.runselect import Resolved  # noqa: E402
from stallbench.results.store import Run, load_run  # noqa: E402

TRIALS = 20
DECIDING = ("p50", "p99", "rate")
OPS = {"randread": ("read",), "pgioperf": ("read", "commit", "wal")}
CHECK = {"randread": ["read:p50", "read:p99"], "pgioperf": ["read:p50", "read:p99",
                                                            "commit:p99"]}
SCALED = {3: (("whole", 0.10, "p50"), ("tail", 0.25, "p99")),
          1: (("whole", 0.25, "p50"), ("tail", 0.50, "p99"))}


def load_set(path: Path) -> dict[str, dict[int, Run]]:
    out: dict[str, dict[int, Run]] = {}
    for variant in ("base", "twin", "changed"):
        runs = {}
        for run_dir in path.glob(f"{variant}/*/*"):
            if (run_dir / "run.json").exists():
                run = load_run(run_dir)
                if run.complete:
                    runs[int(run_dir.name)] = run
        out[variant] = runs
    return out


def compare(base: list[Run], cand: list[Run], profile=None, metrics=None, duet_profile=None):
    """`metrics` (Metric list): the comparison `check` judges (gate_options)."""
    options = gate_options(metrics) if metrics else CompareOptions(explain=False)
    options.use_profiles, options.noise_profile = False, profile
    options.duet_profile = duet_profile
    return build_comparison(Resolved("A", base, []), [Resolved("B", cand, [])], options)


_PROFILES: dict = {}


def profile_without(runs: dict[int, Run], rounds: tuple[int, ...]):
    key = (id(runs), rounds)
    if key not in _PROFILES:
        others = [run for r, run in sorted(runs.items()) if r not in rounds]
        _PROFILES[key] = profile_from_runs(Resolved("twin", others, []))
    return _PROFILES[key]


def trials_of(rounds: list[int], k: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    if k == 1:
        return [(r,) for r in rounds]
    combos = list(itertools.combinations(rounds, k))
    chosen = rng.choice(len(combos), size=min(TRIALS, len(combos)), replace=False)
    return [combos[i] for i in sorted(chosen)]


def op_changes(comparison, ops):
    found = {op.op: op.changes["B"] for op in comparison.ops}
    return {(op, stat): found[op][stat] for op in ops if op in found for stat in DECIDING}


def tally(cells: dict, key, change, truth: float) -> None:
    cell = cells.setdefault(key, {"trials": 0, "detected": 0, "covered": 0, "with_interval": 0,
                                  "truth": truth})
    cell["trials"] += 1
    wanted = "worse" if (truth > 0) != (key[1] == "rate") else "better"
    cell["detected"] += change.verdict == wanted
    if change.low is not None:
        cell["with_interval"] += 1
        cell["covered"] += change.low <= truth <= change.high


def evaluate_set(path: Path, rng: np.random.Generator) -> dict:
    runs = load_set(path)
    rounds = sorted(set(runs["base"]) & set(runs["twin"]) & set(runs["changed"]))
    workload = runs["base"][rounds[0]].workload
    ops = OPS[workload]
    out: dict = {"rounds": len(rounds)}
    everything = compare([runs["base"][r] for r in rounds] + [runs["twin"][r] for r in rounds],
                         [runs["changed"][r] for r in rounds])
    truth = {key: c.change for key, c in op_changes(everything, ops).items()}
    out["truth"] = {f"{op}:{stat}": v for (op, stat), v in truth.items()}

    real: dict = {}
    for k in (1, 3):
        for trial in trials_of(rounds, k, rng):
            profile = profile_without(runs["twin"], trial) if k == 1 else None
            comparison = compare([runs["base"][r] for r in trial],
                                 [runs["changed"][r] for r in trial], profile)
            for key, change in op_changes(comparison, ops).items():
                if truth.get(key) is not None:
                    tally(real, (key[0], key[1], k), change, truth[key])
    out["real"] = {f"{op}:{stat} k={k}": cell for (op, stat, k), cell in real.items()}

    aa: dict = {}
    metrics = [parse_metric(m) for m in CHECK[workload]]
    for k, with_profile in ((1, False), (1, True), (2, False), (3, False), (3, True)):
        cell = {"comparisons": 0, "rows": 0, "called": 0, "any_call": 0, "check_exit_1": 0,
                "check_exit_0": 0, "covered": 0}
        for trial in trials_of(rounds, k, rng):
            profile = profile_without(runs["twin"], trial) if with_profile else None
            base = [runs["base"][r] for r in trial]
            twin = [runs["twin"][r] for r in trial]
            comparison = compare(base, twin, profile)
            cell["comparisons"] += 1
            called = False
            for op in comparison.ops:
                for change in op.changes["B"].values():
                    if change.low is None and change.verdict not in ("better", "worse"):
                        continue
                    cell["rows"] += 1
                    cell["covered"] += change.low is not None and change.low <= 0 <= change.high
                    if change.verdict in ("better", "worse"):
                        cell["called"] += 1
                        called = True
            cell["any_call"] += called
            gated = compare(base, twin, profile, metrics)
            code = gate_exit_code(gate(gated, metrics, 0.10))
            cell["check_exit_1"] += code == 1
            cell["check_exit_0"] += code == 0
        aa[f"k={k}{' profile' if with_profile else ''}"] = cell
    out["aa"] = aa

    scaled: dict = {}
    scratch = path / "scaled"
    for k, cases in SCALED.items():
        for trial in trials_of(rounds, k, rng):
            profile = profile_without(runs["twin"], trial) if k == 1 else None
            base = [runs["base"][r] for r in trial]
            for mode, delta, stat in cases:
                cand = [scaled_copy(runs["twin"][r], scratch, delta, mode) for r in trial]
                comparison = compare(base, cand, profile)
                tally_scaled(scaled, comparison, ops, stat, delta, k)
    out["scaled"] = {f"{op}:{what} k={k}": cell for (op, what, k), cell in scaled.items()}
    return out


def tally_scaled(scaled: dict, comparison, ops, stat: str, delta: float, k: int) -> None:
    """Tally candidate B's change of `stat` for each op, against the known scaling `delta`."""
    for op_name in ops:
        found = next((o for o in comparison.ops if o.op == op_name), None)
        if found is not None:
            tally(scaled, (op_name, f"{stat} +{delta:.0%}", k), found.changes["B"][stat], delta)


def evaluate(data: Path, sets: list[str]) -> dict:
    rng = np.random.default_rng(11)
    result = {}
    for name in sets:
        if not (data / name).exists():
            continue
        result[name] = evaluate_set(data / name, rng)
        print_set(name, result[name])
    return result


def _rate(cell: dict, key: str, of: str = "trials") -> str:
    return f"{cell[key] / cell[of]:.0%}" if cell[of] else "-"


def print_set(name: str, r: dict) -> None:
    print(f"\n== {name} ({r['rounds']} rounds); true sizes: " + ", ".join(
        f"{k} {v:+.1%}" for k, v in r["truth"].items() if v is not None))
    for title in ("real", "scaled"):
        for key, cell in r[title].items():
            print(f"  {title:<6} {key:<28} true {cell['truth']:+7.1%}  detected "
                  f"{_rate(cell, 'detected'):>5}  coverage "
                  f"{_rate(cell, 'covered', 'with_interval'):>5}  ({cell['trials']} trials, "
                  f"{cell['with_interval']} with an interval)")
    for key, cell in r["aa"].items():
        print(f"  A/A    {key:<12} rows called {cell['called']}/{cell['rows']}  any call "
              f"{cell['any_call']}/{cell['comparisons']}  coverage "
              f"{cell['covered']}/{cell['rows']}  check=1 {cell['check_exit_1']}  "
              f"check=0 {cell['check_exit_0']}")
    sys.stdout.flush()


if __name__ == "__main__":
    print(json.dumps(evaluate(Path(sys.argv[1]), sys.argv[2].split(",")), indent=1))


# -- duets (power.py --duet): rounds of an A/A duet (a, twin) and a change duet (b, changed) ----

def load_duet_set(path: Path) -> dict[str, list[Run]]:
    """The runs of each variant in round order, each list paired by duet id with its partner's:
    out["twin"][i] ran with out["a"][i], out["changed"][i] with out["b"][i]."""
    runs: dict[str, dict[str, Run]] = {}
    for variant in ("a", "twin", "b", "changed"):
        runs[variant] = {}
        for run_dir in path.glob(f"{variant}/*/*"):
            if (run_dir / "run.json").exists():
                run = load_run(run_dir)
                if run.complete and run.meta.duet:
                    runs[variant][run.meta.duet["id"]] = run
    out: dict[str, list[Run]] = {}
    for first, second in (("a", "twin"), ("b", "changed")):
        ids = sorted(set(runs[first]) & set(runs[second]),
                     key=lambda i: runs[first][i].meta.start_utc)
        out[first] = [runs[first][i] for i in ids]
        out[second] = [runs[second][i] for i in ids]
    return out


def duet_profile_without(runs: dict[str, list[Run]], rounds: tuple[int, ...]):
    """The duet profile of the A/A duets outside `rounds` (those a trial compares)."""
    key = ("duet", id(runs["a"]), rounds)
    if key not in _PROFILES:
        keep = [i for i in range(len(runs["a"])) if i not in rounds]
        _PROFILES[key] = duet_profile_from_runs(
            Resolved("a", [runs["a"][i] for i in keep], []),
            Resolved("twin", [runs["twin"][i] for i in keep], []))
    return _PROFILES[key]


def _aa_cell(pairs: list[tuple[list[Run], list[Run]]], metrics: list[Metric],
             profiles: list | None = None) -> dict:
    cell = {"comparisons": 0, "rows": 0, "called": 0, "any_call": 0, "check_exit_1": 0,
            "check_exit_0": 0, "covered": 0, "by_stat": {}}
    for index, (base, twin) in enumerate(pairs):
        profile = profiles[index] if profiles else None
        comparison = compare(base, twin, duet_profile=profile)
        cell["comparisons"] += 1
        called = False
        for op in comparison.ops:
            for stat, change in op.changes["B"].items():
                if change.low is None and change.verdict not in ("better", "worse"):
                    continue
                cell["rows"] += 1
                inside = change.low is not None and change.low <= 0 <= change.high
                cell["covered"] += inside
                per = cell["by_stat"].setdefault(stat, [0, 0])
                per[0] += inside
                per[1] += 1
                if change.verdict in ("better", "worse"):
                    cell["called"] += 1
                    called = True
        cell["any_call"] += called
        gated = compare(base, twin, None, metrics, profile)
        code = gate_exit_code(gate(gated, metrics, 0.10))
        cell["check_exit_1"] += code == 1
        cell["check_exit_0"] += code == 0
    return cell


def windows(n: int, k: int) -> list[tuple[int, ...]]:
    """Every run of k consecutive rounds: what a plan with iterations = k would have run."""
    return [tuple(range(i, i + k)) for i in range(n - k + 1)]


def evaluate_duet_set(path: Path, rng: np.random.Generator) -> dict:
    from stallbench.analysis import paired

    runs = load_duet_set(path)
    n_aa, n_change = len(runs["a"]), len(runs["b"])
    workload = (runs["a"] or runs["b"])[0].workload
    ops = OPS[workload]
    out: dict = {"rounds": {"aa": n_aa, "change": n_change}}
    # true size: the paired estimate over every change duet (the difference under shared load)
    everything = compare(runs["b"], runs["changed"])
    truth = {key: c.change for key, c in op_changes(everything, ops).items()}
    out["truth"] = {f"{op}:{stat}": v for (op, stat), v in truth.items()}
    out["truth_interval"] = {f"{op}:{stat}": (c.low, c.high)
                             for (op, stat), c in op_changes(everything, ops).items()}
    real: dict = {}
    every_aa = duet_profile_without(runs, ()) if n_aa >= 3 else None
    for k, profile in ((1, None), (3, None), (1, every_aa), (3, every_aa)):
        for trial in windows(n_change, k):
            comparison = compare([runs["b"][r] for r in trial], [runs["changed"][r] for r in trial],
                                 duet_profile=profile)
            for key, change in op_changes(comparison, ops).items():
                if truth.get(key) is not None:
                    tally(real, (key[0], key[1], f"{k}{' profile' if profile else ''}"), change,
                          truth[key])
    out["real"] = {f"{op}:{stat} k={k}": cell for (op, stat, k), cell in real.items()}
    metrics = [parse_metric(m) for m in CHECK[workload]]
    aa: dict = {}
    for k in (1, 2, 3):
        trials = windows(n_aa, k)
        pairs = [([runs["a"][r] for r in t], [runs["twin"][r] for r in t]) for t in trials]
        aa[f"k={k}"] = _aa_cell(pairs, metrics)
        if n_aa - k >= 3:
            aa[f"k={k} profile"] = _aa_cell(pairs, metrics,
                                            [duet_profile_without(runs, t) for t in trials])
        if k == 3:
            paired.TAIL_FLOOR = False
            try:
                aa["k=3 no tail floor"] = _aa_cell(pairs, metrics)
            finally:
                paired.TAIL_FLOOR = True
    out["aa"] = aa
    scaled: dict = {}
    scratch = path / "scaled"
    for k, cases, profiled in (
            (3, (("whole", 0.10, "p50"), ("tail", 0.25, "p99")), False),
            (2, (("whole", 0.10, "p50"), ("tail", 0.25, "p99")), False),
            (3, (("whole", 0.10, "p50"), ("tail", 0.25, "p99")), True),
            (1, (("whole", 0.25, "p50"), ("tail", 0.50, "p99")), True)):
        if profiled and n_aa - k < 3:
            continue
        for trial in windows(n_aa, k):
            base = [runs["a"][r] for r in trial]
            profile = duet_profile_without(runs, trial) if profiled else None
            for mode, delta, stat in cases:
                cand = [scaled_copy(runs["twin"][r], scratch, delta, mode) for r in trial]
                comparison = compare(base, cand, duet_profile=profile)
                tally_scaled(scaled, comparison, ops, stat, delta,
                             f"{k}{' profile' if profiled else ''}")
    out["scaled"] = {f"{op}:{what} k={k}": cell for (op, what, k), cell in scaled.items()}
    out["methods"] = sorted(set(everything.method.values()))
    return out


def evaluate_duet(data: Path, sets: list[str]) -> dict:
    rng = np.random.default_rng(11)
    result = {}
    for name in sets:
        if not (data / name).exists():
            continue
        result[name] = evaluate_duet_set(data / name, rng)
        r = result[name]
        print_set(name, {**r, "rounds": f"{r['rounds']['aa']} A/A + {r['rounds']['change']} "
                                        "change duets"})
        for key, cell in r["aa"].items():
            print(f"  A/A    {key:<18} coverage by statistic: " + ", ".join(
                f"{stat} {a}/{b}" for stat, (a, b) in cell["by_stat"].items()))
    return result
