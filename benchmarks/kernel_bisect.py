"""`stallbench bisect --git` end to end on a real kernel tree: Debian's linux-source-6.1 made
into a git repository, five commits on top of it (four harmless, one real page-cache
regression), bisected with guest runs under QEMU to the commit that did it.

    .venv/bin/python benchmarks/kernel_bisect.py prepare [--dir /var/tmp/kbisect]
    .venv/bin/python benchmarks/kernel_bisect.py run     [--dir /var/tmp/kbisect] [--results R]

prepare: `apt-get download linux-source-6.1` (into DIR), the source unpacked into DIR/linux, a
git repository of it (the tree as Debian ships it, less the lines of its .gitignore that ignore
everything at the top level), then the commits below, tagged bench-good (the unchanged tree),
bench-regression and bench-bad (the last). Done once; a second prepare finds the tags and stops.

The regression (bench-regression, mm/filemap.c): filemap_get_pages() starts synchronous
readahead on a page-cache miss only once the file has a readahead window (`ra->size`), which
only readahead itself sets, so a newly opened file is never read ahead: a 64 KiB read() of
uncached data becomes sixteen 4 KiB reads, each waited for in turn. The guest workload, random
64 KiB reads of a file larger than the guest's memory, feels it in every read that misses.

run: `stallbench bisect --git DIR/linux --good bench-good --bad bench-bad --plan DIR/plan.toml
--metric read:p50 --max-regression 50%`, with the default build (the shipped config fragment
over allnoconfig, `make -j$(nproc) bzImage`, ccache in DIR/ccache), then a table of each
build's and each step's time from RESULTS (bisect.json and kernels/*/build.json) and whether
the answer is the regression's commit. The source, the repository and ccache stay in DIR for
the next run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

PACKAGE = "linux-source-6.1"
PLAN = """# the guest workload of benchmarks/kernel_bisect.py
workload = "randread"
duration = "5s"
warmup = "1s"
monitors = ["counters", "psi", "delay", "diskstats"]
[workload_options]
file_size = "768M"
record_size = "64K"
[[variants]]
name = "guest"
vm_cpus = 2
vm_memory = "512M"
"""
FILEMAP_BATCH = """	filemap_get_read_batch(mapping, index, last_index - 1, fbatch);
	if (!folio_batch_count(fbatch)) {
		if (iocb->ki_flags & IOCB_NOIO)
			return -EAGAIN;
		page_cache_sync_readahead(mapping, ra, filp, index,
				last_index - index);
		filemap_get_read_batch(mapping, index, last_index - 1, fbatch);
	}
"""
REGRESSION = """	filemap_get_read_batch(mapping, index, last_index - 1, fbatch);
	if (!folio_batch_count(fbatch)) {
		if (iocb->ki_flags & IOCB_NOIO)
			return -EAGAIN;
		/* read ahead where the file has a window; else read what was asked */
		if (ra->size) {
			page_cache_sync_readahead(mapping, ra, filp, index,
					last_index - index);
			filemap_get_read_batch(mapping, index, last_index - 1,
					fbatch);
		}
	}
"""
# (subject, file, old text, new text): each a real edit of the 6.1 tree
COMMITS = [
    ("mm/filemap: say what the batch of filemap_get_pages() holds", "mm/filemap.c",
     "\t/* \"last_index\" is the index of the page beyond the end of the read */",
     "\t/* \"last_index\" is the index of the page beyond the end of the read;\n"
     "\t * fbatch gets the folios of [index, last_index) found in the cache */"),
    ("mm/readahead: note where the initial window comes from", "mm/readahead.c",
     "static unsigned long get_init_ra_size(unsigned long size, unsigned long max)\n{",
     "/* the first window: the request rounded up, x4 for small ones, x2 up to max/16 */\n"
     "static unsigned long get_init_ra_size(unsigned long size, unsigned long max)\n{"),
    ("mm/filemap: only read ahead once a file has a readahead window", "mm/filemap.c",
     FILEMAP_BATCH, REGRESSION),
    ("mm/filemap: document filemap_read()'s return value", "mm/filemap.c",
     " * Return: Total number of bytes copied, including those already read by",
     " * Return (as read(2) returns it): Total number of bytes copied, including\n"
     " * those already read by"),
    ("Documentation: readahead is per open file", "Documentation/mm/index.rst",
     None, "\n.. readahead state (struct file_ra_state) is per open file\n"),
]
REGRESSION_INDEX = 2
# A step between two good kernels is decided "good" only when p50's interval lies within the
# bound; under TCG one run a side spans about +-40%, so 10% would take more rounds than a step
# may add, while the regression is x9: 50% separates them in one or two rounds.
BOUND = "50%"


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "stallbench benchmark",
           "GIT_AUTHOR_EMAIL": "bench@localhost", "GIT_COMMITTER_NAME": "stallbench benchmark",
           "GIT_COMMITTER_EMAIL": "bench@localhost", "GIT_AUTHOR_DATE": "2026-12-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-12-01T00:00:00Z"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def prepare(base: Path) -> Path:
    repo = base / "linux"
    base.mkdir(parents=True, exist_ok=True)
    if (repo / ".git").is_dir() and "bench-bad" in git(repo, "tag").split():
        print(f"{repo}: prepared already ({git(repo, 'rev-parse', 'bench-bad')[:12]})")
        return repo
    debs = sorted(base.glob(f"{PACKAGE}_*.deb"))
    if not debs:
        subprocess.run(["apt-get", "download", PACKAGE], cwd=base, check=True)
        debs = sorted(base.glob(f"{PACKAGE}_*.deb"))
    started = time.monotonic()
    if not repo.is_dir():
        tarball = f"./usr/src/{PACKAGE}.tar.xz"
        unpack = base / ".unpack"
        unpack.mkdir(exist_ok=True)
        subprocess.run(f"dpkg-deb --fsys-tarfile {debs[-1]} | tar -xO {tarball} | tar -xJ",
                       shell=True, cwd=unpack, check=True)
        (unpack / PACKAGE).rename(repo)
        unpack.rmdir()
    ignore = repo / ".gitignore"
    text = ignore.read_text()
    if "# Debian packaging" in text:                 # "/*": Debian ignores the whole tree
        ignore.write_text(text[:text.index("#\n# Debian packaging")])
    if not (repo / ".git").is_dir():
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"Linux 6.1 from Debian's {debs[-1].name}")
    if "bench-good" not in git(repo, "tag").split():
        git(repo, "tag", "bench-good")
    git(repo, "checkout", "-q", "--detach", "bench-good")    # again from the tree as shipped
    for i, (subject, name, old, new) in enumerate(COMMITS):
        path = repo / name
        text = path.read_text()
        if old is None:
            text += new
        else:
            assert text.count(old) == 1, f"{name}: the text to change is not there once"
            text = text.replace(old, new)
        path.write_text(text)
        git(repo, "commit", "-q", "-a", "-m", subject)
        if i == REGRESSION_INDEX:
            git(repo, "tag", "-f", "bench-regression")
    git(repo, "tag", "-f", "bench-bad")
    git(repo, "checkout", "-q", "-B", "main", "bench-bad")
    print(f"{repo}: {len(COMMITS)} commits on Linux 6.1 in {time.monotonic() - started:.0f} s")
    return repo


def run(base: Path, results: Path, extra: list[str]) -> int:
    repo = prepare(base)
    plan = base / "plan.toml"
    plan.write_text(PLAN)
    env = {**os.environ, "CCACHE_DIR": str(base / "ccache")}
    argv = [sys.executable, "-m", "stallbench", "bisect", "--git", str(repo), "--good",
            "bench-good", "--bad", "bench-bad", "--plan", str(plan), "--metric", "read:p50",
            "--max-regression", BOUND,
            "--results", str(results), "--no-progress", *extra]
    print("$", " ".join(argv[1:]), flush=True)
    started = time.monotonic()
    code = subprocess.run(argv, env=env).returncode
    total = time.monotonic() - started
    report(repo, results, total)
    return code


def report(repo: Path, results: Path, total: float) -> None:
    state = json.loads((results / "bisect.json").read_text())
    print("\n| commit | subject | build | s |\n|---|---|---|---|")
    for record_path in sorted((results / "kernels").glob("*/build.json"),
                              key=lambda p: p.stat().st_mtime):
        record = json.loads(record_path.read_text())
        subject = git(repo, "log", "-1", "--format=%s", record["commit"])
        print(f"| {record['commit'][:12]} | {subject} | {record['status']} | "
              f"{record['seconds']:.0f} |")
    print("\n| step | pair | outcome | rounds | build s | measure s |\n|---|---|---|---|---|---|")
    for step in state["steps"]:
        metric = step["metrics"][0] if step["metrics"] else {}
        change = metric.get("change")
        print(f"| {step['number']} | {step['baseline']} vs {step['candidate']} | "
              f"{step['outcome']} ({'' if change is None else f'{change:+.0%} '}"
              f"{metric.get('outcome', '')}) | {step['rounds']} | {step['build_s']:.0f} | "
              f"{step['seconds'] - step['build_s']:.0f} |")
    answer = state["answer"]
    regression = git(repo, "rev-parse", "bench-regression")[:12]
    verdict = "no answer (interrupted)" if answer is None else \
        f"{answer['kind']} {answer['first_bad']}: " + \
        ("RIGHT" if answer["first_bad"] == regression else "WRONG")
    print(f"\nanswer: {verdict}; the regression is {regression}; total {total / 60:.1f} min")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["prepare", "run", "report"])
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp/kbisect"),
                        help="where the source, the repository and ccache are kept")
    parser.add_argument("--results", type=Path, default=None,
                        help="the bisect's results (default DIR/results-<time>)")
    args, extra = parser.parse_known_args()
    results = args.results or args.dir / f"results-{time.strftime('%Y%m%d-%H%M%S')}"
    if args.command == "prepare":
        prepare(args.dir)
        return 0
    if args.command == "report":
        report(args.dir / "linux", results, 0.0)
        return 0
    return run(args.dir, results, extra)


if __name__ == "__main__":
    sys.exit(main())
