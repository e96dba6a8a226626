"""The where truth table's kernel rows (issues 37 and 44): kernel regressions of the two classes
a kernel engineer meets, built from the Linux tree benchmarks/kernel_bisect.py prepares and run in
a QEMU guest against the unchanged kernel: sleeps the kernel counts as block I/O waits while the
device serves nothing of the op (seed 000's, which needed a patched kernel to see), and cycles:
more work on a CPU in the read path, no sleep and no I/O.

    .venv/bin/python benchmarks/kernel_where.py prepare [--dir /var/tmp/kbisect]
    .venv/bin/python benchmarks/kernel_where.py run [--dir D] [--iterations 3] [--rows a,b]
    .venv/bin/python benchmarks/kernel_where.py judge --results D   # runs of an earlier `run`

prepare: the tree (kernel_bisect.prepare), then each row's commit on a branch of its own from
bench-good (tagged where-<row>), and the kernels of bench-good and of each row built once with
stallbench's default guest build (bisect/gitkernels.py KernelBuilder) into DIR/where-results.

run: per workload of WORKLOADS one plan (in a 512 MiB guest with 2 vCPUs) whose variants are the
good kernel and each of its rows' kernels, interleaved, --iterations runs each, once per monitor
set: the sleep rows with randread of 32 KiB records of a 256 MiB file in a 48 MiB memory cgroup,
with the default monitors and with `default,stacks`; the cycles row with cached random 4 KiB reads
of a 64 MiB file, with the default monitors and with `default,profile`. Each row compared with
the good kernel (`compare --format json`) and judged: its first "where" line for `read` must name
the injected cause (the row's pattern: the sleep, or time on a CPU in the kernel), the
device-or-above verdict for `read` must not be "waiting for the device" alone, with stacks the
line that says where the blocked tasks now sleep must name the function that sleeps, and with the
profile the line that names the hot function must name the function added. Prints the table for
BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernel_bisect  # noqa: E402  (the tree's preparation, shared)

GOOD = "bench-good"
# a where line's change, decided ("+90%:") or not ("+90% (not decided): if real,"), then, for a
# wait, the clause that says the added time was not on a CPU
CHANGE = r"[+\d]+%(?::| \(not decided\): if real,)"
WAITED = r"(?: the added time was (?:mostly )?spent waiting \([^)]*\);)?"


@dataclass(frozen=True)
class Row:
    name: str
    cause: str              # the injected cause, in words
    subject: str
    path: str
    edits: tuple[tuple[str, str], ...]   # (old text, new text), each there once
    expect: str             # what the first where line for read must name
    names: str              # the function the stacks (a sleep) or the profile (cycles) must name
    workload: str = "reclaim"   # WORKLOADS: what the guest runs


ROWS = [
    Row("reclaim-sleep", "a back-off in memcg reclaim: io_schedule_timeout(1) after every "
        "reclaim of a cgroup at its limit (mm/vmscan.c do_try_to_free_pages)",
        "mm/vmscan: let a cgroup at its limit back off after reclaim", "mm/vmscan.c",
        (("\t} while (--sc->priority >= 0);\n\n\tlast_pgdat = NULL;",
          "\t} while (--sc->priority >= 0);\n\n"
        "\t/*\n\t * A cgroup at its limit will be back here at once: give writeback\n"
        "\t * and the other reclaimers a moment before it allocates again.\n\t */\n"
        "\tif (cgroup_reclaim(sc)) {\n\t\t__set_current_state(TASK_UNINTERRUPTIBLE);\n"
        "\t\tio_schedule_timeout(1);\n\t}\n\n\tlast_pgdat = NULL;"),),
        rf"^read \S+ {CHANGE}{WAITED} \d+% of the read ops' time was in memcg reclaim",
        "do_try_to_free_pages"),
    Row("miss-sleep", "a sleep before every synchronous read of a page-cache miss: "
        "io_schedule_timeout(1) in filemap_get_pages (no tracepoint brackets it)",
        "mm/filemap: let in-flight readahead settle before a synchronous read", "mm/filemap.c",
        (("\t\tif (iocb->ki_flags & IOCB_NOIO)\n\t\t\treturn -EAGAIN;\n"
          "\t\tpage_cache_sync_readahead(mapping, ra, filp, index,",
          "\t\tif (iocb->ki_flags & IOCB_NOIO)\n\t\t\treturn -EAGAIN;\n"
        "\t\t/* let in-flight readahead of the file settle before reading more */\n"
        "\t\t__set_current_state(TASK_UNINTERRUPTIBLE);\n\t\tio_schedule_timeout(1);\n"
        "\t\tpage_cache_sync_readahead(mapping, ra, filp, index,"),),
        rf"^read \S+ {CHANGE}{WAITED} delay accounting: at least \d+% of the reader workers' "
        r"op time "
        r"was in block I/O waits beyond the device's time",
        "filemap_get_pages"),
    Row("read-cycles", "more work on every cached read: a noinline folio_read_check() that reads "
        "the copied bytes eight times before copy_folio_to_iter (mm/filemap.c filemap_read; no "
        "sleep, no I/O)",
        "mm/filemap: check the data of each folio a read copies out", "mm/filemap.c",
        (("static inline bool pos_same_folio(",
          "/*\n * Read the data of each folio a read copies out, so that a corrupted\n"
          " * page-cache page would be noticed before user space sees it.\n */\n"
          "static unsigned long folio_read_last_sum;\n\n"
          "static noinline void folio_read_check(struct folio *folio, size_t offset,\n"
          "\t\t\t\t      size_t bytes)\n{\n\tunsigned long sum = 0;\n\tint pass;\n\n"
          "\tfor (pass = 0; pass < 8; pass++) {\n\t\tsize_t done = 0;\n\n"
          "\t\twhile (done + sizeof(sum) <= bytes) {\n"
          "\t\t\tsize_t chunk = min_t(size_t, bytes - done,\n"
          "\t\t\t\tPAGE_SIZE - offset_in_page(offset + done));\n"
          "\t\t\tconst unsigned long *word = kmap_local_folio(folio, offset + done);\n"
          "\t\t\tsize_t i;\n\n"
          "\t\t\tfor (i = 0; i < chunk / sizeof(*word); i++)\n"
          "\t\t\t\tsum = ((sum << 7) | (sum >> 57)) ^ READ_ONCE(word[i]);\n"
          "\t\t\tkunmap_local(word);\n\t\t\tdone += chunk;\n\t\t}\n\t}\n"
          "\tWRITE_ONCE(folio_read_last_sum, sum);\n}\n\n"
          "static inline bool pos_same_folio("),
         ("\t\t\tcopied = copy_folio_to_iter(folio, offset, bytes, iter);",
          "\t\t\tfolio_read_check(folio, offset, bytes);\n"
          "\t\t\tcopied = copy_folio_to_iter(folio, offset, bytes, iter);")),
        rf"^read \S+ {CHANGE} \d+% of the added op time was on a CPU, in the kernel",
        "folio_read_check", workload="cached"),
]
@dataclass(frozen=True)
class Workload:
    """What the guest runs for a group of rows: randread's options, the variants' own settings
    and the monitor sets each plan is run with."""
    options: str
    variant: str
    monitor_sets: tuple[str, ...]


WORKLOADS = {
    # 32 KiB reads of a 256 MiB file in a 48 MiB memory cgroup, which 32 KiB reads fill within
    # the warm-up even on a slow guest
    "reclaim": Workload('file_size = "256M"\nrecord_size = "32K"\n', 'memory = "48M"\n',
                        ("default", "default,stacks")),
    # cached random 4 KiB reads: the file, written before the run, well inside the guest's
    # memory and kept in its page cache
    "cached": Workload('file_size = "64M"\nrecord_size = "4K"\n', "drop_caches = false\n",
                       ("default", "default,profile")),
}


def plan_text(kernels: dict[str, Path], iterations: int, monitors: str,
              workload: str = "reclaim") -> str:
    chosen = WORKLOADS[workload]
    variants = "".join(f'''
[[variants]]
name = "{name}"
kernel = "{path}"
vm_cpus = 2
vm_memory = "512M"
{chosen.variant}''' for name, path in kernels.items())
    return f'''# the guest workload of benchmarks/kernel_where.py ({workload})
workload = "randread"
duration = "8s"
warmup = "2s"
iterations = {iterations}
monitors = {json.dumps(monitors.split(","))}
[workload_options]
{chosen.options}{variants}'''


def prepare(base: Path) -> dict[str, Path]:
    """The kernels by variant name: good, and each row's (built once)."""
    from stallbench.bisect.gitcommits import named_commits
    from stallbench.bisect.gitkernels import KernelBuilder

    repo = kernel_bisect.prepare(base)
    tags = kernel_bisect.git(repo, "tag").split()
    for row in ROWS:
        tag = f"where-{row.name}"
        if tag in tags:
            continue
        kernel_bisect.git(repo, "checkout", "-q", "--detach", GOOD)
        path = repo / row.path
        text = path.read_text()
        for old, new in row.edits:
            assert text.count(old) == 1, f"{row.path}: the text to change is not there once"
            text = text.replace(old, new)
        path.write_text(text)
        kernel_bisect.git(repo, "commit", "-q", "-a", "-m", row.subject)
        kernel_bisect.git(repo, "tag", "-f", tag)
    kernel_bisect.git(repo, "checkout", "-q", "main")
    revs = [GOOD] + [f"where-{row.name}" for row in ROWS]
    commits = named_commits([(kernel_bisect.git(repo, "rev-parse", rev),
                              kernel_bisect.git(repo, "log", "-1", "--format=%s", rev))
                             for rev in revs])
    builder = KernelBuilder(repo, base / "where-results", commits, None, print)
    for commit in commits:
        why = builder.prepare(commit.name)
        if why is not None:
            raise SystemExit(f"{commit.name}: {why}")
    return {name: builder.kernels / commit.sha
            for name, commit in zip(["good"] + [r.name for r in ROWS], commits, strict=True)}


def judge(row: Row, where: dict, monitors: str) -> tuple[str, str, bool]:
    lines = [e["text"] for e in where.get("explanations", []) if e["variant"] == row.name]
    mine = [t for t in lines if t.startswith("read ")]
    first = mine[0] if mine else "(no line for read)"
    verdict = (where.get("device", {}).get(row.name, {}).get("read") or {}).get("verdict") or "-"
    right = re.search(row.expect, first) is not None and verdict != "waiting for the device"
    if "stacks" in monitors:
        right &= any(f"sleep in {row.names}" in t for t in lines)
    if "profile" in monitors:
        right &= any(f"CPU samples in {row.names}" in t for t in lines)
    return first, verdict, right


def groups(rows: list[Row]) -> list[tuple[str, str, list[Row]]]:
    """(workload, monitors, its rows) in the order they run: each workload's rows share a plan
    with the good kernel, once per monitor set."""
    return [(name, monitors, [r for r in rows if r.workload == name])
            for name, workload in WORKLOADS.items()
            if any(r.workload == name for r in rows) for monitors in workload.monitor_sets]


def results_dir(results: Path, workload: str, monitors: str) -> Path:
    # the reclaim rows' folders keep the names earlier runs of this script gave them
    name = monitors.replace(",", "+")
    return results / (name if workload == "reclaim" else f"{workload}-{name}")


def run(base: Path, results: Path, iterations: int, names: list[str]) -> int:
    kernels = prepare(base)
    rows = table_head(names)
    all_right = True
    for workload, monitors, chosen_rows in groups(rows):
        out = results_dir(results, workload, monitors)
        plan = out.with_suffix(".toml")
        out.mkdir(parents=True, exist_ok=True)
        chosen = {"good": kernels["good"], **{r.name: kernels[r.name] for r in chosen_rows}}
        plan.write_text(plan_text(chosen, iterations, monitors, workload))
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "stallbench", "run", "--plan", str(plan),
                               "--results", str(out), "--no-progress"],
                              capture_output=True, text=True)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{monitors}: {done.stderr.strip()[-400:]}")
        print(f"<!-- {workload} {monitors}: {time.monotonic() - started:.0f} s -->", flush=True)
        all_right &= table_rows(out, chosen_rows, monitors, iterations)
    return 0 if all_right else 1


def table_head(names: list[str]) -> list[Row]:
    """Prints the table's head; returns the rows named (all where none is)."""
    print("| kernel change (injected) | monitors | runs | first \"where\" line for read | "
          "device or above | right |\n|---|---|---|---|---|---|", flush=True)
    return [r for r in ROWS if not names or r.name in names]


def table_rows(out: Path, rows: list[Row], monitors: str, iterations: int | str) -> bool:
    """Each row compared with the good kernel in the runs under `out`; prints the table rows."""
    all_right = True
    for row in rows:
        compared = subprocess.run([sys.executable, "-m", "stallbench", "compare", "good",
                                   row.name, "--results", str(out), "--format", "json"],
                                  capture_output=True, text=True, check=True)
        where = json.loads(compared.stdout)["where"]
        first, verdict, right = judge(row, where, monitors)
        all_right &= right
        print(f"| {row.cause} | {monitors} | {iterations}+{iterations} | {first} | "
              f"{verdict} | {'yes' if right else 'NO'} |", flush=True)
    return all_right


def judge_again(results: Path, names: list[str]) -> int:
    """The table from runs recorded before (`run --results DIR`), compared with this code."""
    rows = table_head(names)
    all_right = True
    for workload, monitors, chosen_rows in groups(rows):
        out = results_dir(results, workload, monitors)
        if not out.is_dir():
            print(f"<!-- {out}: not recorded -->")
            continue
        runs = len(list((out / "good").glob("*/[0-9]*")))
        all_right &= table_rows(out, chosen_rows, monitors, runs)
    return 0 if all_right else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["prepare", "run", "judge"])
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp/kbisect"))
    parser.add_argument("--results", type=Path, default=None)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--rows", default="")
    args = parser.parse_args()
    if args.command == "prepare":
        for name, path in prepare(args.dir).items():
            print(f"{name}: {path}")
        return 0
    if args.command == "judge":
        if args.results is None:
            parser.error("judge needs --results DIR (of an earlier run)")
        return judge_again(args.results, [n for n in args.rows.split(",") if n])
    results = args.results or args.dir / f"where-{time.strftime('%Y%m%d-%H%M%S')}"
    return run(args.dir, results, args.iterations, [n for n in args.rows.split(",") if n])


if __name__ == "__main__":
    sys.exit(main())
