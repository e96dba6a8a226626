"""Names that say the question (issue 47): no file name of src/stallbench is used by two modules
that answer different questions. A name is shared only by a family that answers ONE question,
at different floors or for different plugins of the same kind; each family is listed below
with why. A new module whose name is taken: name it for its own question, or, when it answers
the family's question on another floor, add it to the family and say so."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure

SRC = Path(__file__).resolve().parents[2] / "src" / "stallbench"

# a package's face and a package run as a program (`python -m`): their names are Python's
FACES = {"__init__.py", "__main__.py"}

SAME_QUESTION: dict[str, set[str]] = {
    # -- a command: its cli/ module (arguments, printing) beside what builds and renders its
    #    answer on the floors below
    "check.py": {"cli/check.py", "report/check.py"},              # `check`: the gate's lines
    "demo.py": {"cli/demo.py", "plan/demo.py"},                   # `demo`: its plan
    "deploy.py": {"cli/deploy.py", "fleet/deploy.py"},            # `deploy`: its work
    "query.py": {"cli/query.py", "compare/query.py"},             # `query`: the DuckDB views
    "reproduce.py": {"cli/reproduce.py", "report/reproduce.py"},  # `reproduce`: then vs now
    "series.py": {"cli/series.py", "compare/series.py", "report/series.py"},   # `series`
    "show.py": {"cli/show.py", "compare/show.py", "report/show.py"},           # `show`
    # -- one subject: its pure part in analysis/, its I/O, rendering or file format above
    "environment.py": {"analysis/environment.py", "report/environment.py"},  # the machines' diff
    "folded.py": {"analysis/folded.py", "exporters/folded.py"},        # folded stacks
    "hdr.py": {"analysis/hdr.py", "exporters/hdr.py"},                 # HdrHistogram
    "heatmap.py": {"analysis/heatmap.py", "report/heatmap.py"},        # latency over time
    "noise.py": {"analysis/noise.py", "report/noise.py"},              # a noise profile
    "stalltimeline.py": {"analysis/stalltimeline.py", "compare/stalltimeline.py"},  # stalls/time
    "bundle.py": {"exporters/bundle.py", "results/bundle.py"},  # a bundle: written, opened
    # -- one module per plugin on each floor that handles its data: a workload's program and
    #    log format (run live, parsed, imported), a monitor's tables (recorded, compared, a
    #    where step over them)
    "fio.py": {"workloads/fio.py", "logformats/fio.py", "importers/fio.py"},
    "pgbench.py": {"workloads/pgbench.py", "logformats/pgbench.py", "importers/pgbench.py"},
    "strace.py": {"logformats/strace.py", "importers/strace.py"},
    "counters.py": {"monitors/counters.py", "compare/counters.py", "analysis/where/counters.py"},
    "stacks.py": {"monitors/stacks.py", "analysis/where/stacks.py"},
    "perfstat.py": {"monitors/perfstat.py", "analysis/where/perfstat.py"},
    # -- the interface every plugin of its package implements (Workload, Monitor)
    "base.py": {"workloads/base.py", "monitors/base.py"},
    # -- may this variant run on this machine, asked before anything changes: a host
    #    variant's (root, tools, kernel features, safe folders) and a kernel variant's (the
    #    kernel file, the guest's memory, QEMU, busybox); bisect --git asks both
    "checks.py": {"env/checks.py", "vm/checks.py"},
}


def modules_by_file_name(src: Path = SRC) -> dict[str, set[str]]:
    """File name -> the modules of that name, as paths below src/stallbench."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in src.rglob("*.py"):
        found[path.name].add(path.relative_to(src).as_posix())
    return found


def test_no_file_name_is_shared_by_modules_of_different_questions():
    found = modules_by_file_name()
    names = {name for name, paths in found.items() if len(paths) > 1} | set(SAME_QUESTION)
    wrong = {name: sorted(found.get(name, set())) for name in sorted(names - FACES)
             if found.get(name, set()) != SAME_QUESTION.get(name)}
    assert not wrong, (
        "modules that share a file name but are not (or no longer) one family of "
        f"SAME_QUESTION: {wrong}; name each for its own question, or add it to its family "
        "with why")
