"""stallbench: record the latency of every I/O operation under several system configurations,
compare them honestly and show where the time went.

Public API for notebooks and scripts::

    import stallbench
    run = stallbench.load_run("results/vanilla/pgioperf/1")
    run.meta["status"], run.op_arrays()["read"].latency_ns
"""

__version__ = "0.1.0"

from .store import Run, load_run, resolve_runs  # noqa: E402

__all__ = ["Run", "load_run", "resolve_runs", "__version__"]
