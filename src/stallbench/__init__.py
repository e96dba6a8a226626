"""stallbench: record the latency of every I/O operation under several system configurations,
compare them honestly and show where the time went.

Public API for notebooks and scripts::

    import stallbench
    run = stallbench.load_run("results/vanilla/pgioperf/1")
    run.meta.status, run.op_arrays()["read"].latency_ns
    cmp = stallbench.load_comparison("vanilla", "patched")   # as `stallbench compare`
    cmp.frame("changes", "polars")      # also "stats", "calls"; "arrow", "pandas"
    stallbench.load_series("v1", "v2", "v3").frame("change_points")
"""

from .core.version import __version__

__all__ = ["Run", "__version__", "load_comparison", "load_run", "load_series", "resolve_runs"]


def __getattr__(name: str):
    # store imports numpy and pyarrow: only when asked for, so that the command line starts fast
    if name in ("Run", "load_run"):
        from .results import store

        return getattr(store, name)
    if name == "resolve_runs":
        from .results import runselect

        return runselect.resolve_runs
    if name in ("load_comparison", "load_series"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'stallbench' has no attribute {name!r}")
