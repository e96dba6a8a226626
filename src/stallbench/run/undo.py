"""Every kind of change a run journals (core/journal.py) and the module whose undo carries it
out, in one table: `stallbench cleanup` (cli/cleanup.py) and every process that journals
(run/runner.py, run/vmhost.py, bisect/gitkernels.py) take the undo actions from here, so an
entry a run wrote can be undone after kill -9 whatever module made it.

A new kind of change: write its undo beside the change with `@register_undo("kind")`, and
name that module here (tests/project/test_layers.py fails for a kind journaled anywhere in the
source that this table does not name, or whose module does not register it)."""

from __future__ import annotations

from types import ModuleType

from ..core import journal, tracefs
from ..env import loopfs, memcg, sysctl
from ..monitors import delayacct
from ..results import recovery
from ..workloads import pgserver

# kind -> the module that registers its undo (register_undo)
UNDO_MODULES: dict[str, ModuleType] = {
    "write": journal, "unlink": journal, "rmdir": journal, "rmtree": journal,
    "umount": journal, "kill": journal,
    "tracefs_instance": tracefs,
    "sysctl": sysctl,
    "detach_loop": loopfs, "loop_umount": loopfs,
    "cgroup": memcg, "cgroup_evict": memcg,
    "delayacct": delayacct,
    "pg_stop": pgserver,
    "finalize_run": recovery,
}


def undo_kinds() -> dict[str, journal.UndoFn]:
    """kind -> its undo action, each the one its module registered."""
    kinds = {}
    for kind, module in UNDO_MODULES.items():
        undo = journal.UNDO_ACTIONS.get(kind)
        if undo is None or undo.__module__ != module.__name__:
            raise RuntimeError(f"undo kind {kind!r}: {module.__name__} registers no undo of it")
        kinds[kind] = undo
    return kinds
