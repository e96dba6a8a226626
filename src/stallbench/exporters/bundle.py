"""`stallbench export RESULTS --format bundle`: one .tar.gz another engineer can open (the layout
and the reader: results/bundle.py). It holds each complete run's run.json, summary, monitor
tables, stacks and console log (ops.parquet only with --ops, its size said either way), each
plan as it ran, each kernel config once by its hash, and per workload the comparison of its
variants (the plan's first the baseline) as text, email and HTML. Written beside the output
under a temporary name and renamed when complete."""

from __future__ import annotations

import io
import json
import os
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compare.provenance import RecordedSet, recorded_sets
from ..core.errors import RunDataError, UsageError
from ..core.hostfacts import utc_now
from ..core.version import __version__
from ..results import bundle as layout
from ..results.rundirs import (
    KERNEL_CONFIG_FILE,
    OPS_FILE,
    OPS_LEFT_OUT_FILE,
    RUN_FILE,
    SUMMARY_FILE,
)
from ..results.store import Run


@dataclass
class BundleSummary:
    """What was written, for the command's line."""
    runs: int = 0
    variants: int = 0
    plans: int = 0
    reports: list[str] = field(default_factory=list)
    kernels: int = 0
    ops_bytes: int = 0          # ops.parquet of the runs, put in or not
    ops_included: bool = False
    bytes: int = 0              # the archive
    left_out: list[str] = field(default_factory=list)


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A member as anyone may unpack it: no owner names, plain modes."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = 0o755 if info.isdir() else 0o644
    return info


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    tar.addfile(_plain(info), io.BytesIO(data))


def _run_files(run: Run, with_ops: bool) -> list[Path]:
    """The run's regular files that travel (not ops.parquet unless asked, not its hidden
    spool, not kernel.config: the bundle has each config once)."""
    files = []
    for folder, dirs, names in os.walk(run.path, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in sorted(names):
            path = Path(folder) / name
            if name.startswith(".") or not path.is_file() or path.is_symlink():
                continue
            if path.parent == run.path and (name == KERNEL_CONFIG_FILE or
                                            (name == OPS_FILE and not with_ops)):
                continue
            files.append(path)
    return files


def _summary_current(run: Run) -> None:
    """The run's summary.parquet matching its ops (built and written where it was not)."""
    try:
        run.summary()
    except RunDataError:
        pass


def _reports(recorded: RecordedSet, results: Path) -> dict[str, bytes]:
    """The comparison of the workload's variants (the first the baseline) as text, email and
    HTML; {} with fewer than two variants."""
    if len(recorded.variants) < 2:
        return {}
    from ..compare.comparison import build_comparison
    from ..compare.model import CompareOptions
    from ..report import email, htmlout, plots, text
    from ..results.runselect import resolve_runs

    resolved = [resolve_runs(name, results, recorded.workload) for name in recorded.variants]
    comparison = build_comparison(resolved[0], resolved[1:], CompareOptions())
    name = f"{layout.REPORTS_DIR}/{recorded.workload}"
    return {f"{name}.txt": text.render(comparison).encode(),
            f"{name}.email.txt": email.render(comparison).encode(),
            f"{name}.html": htmlout.render(comparison, plots.render_plots(
                comparison, ("png",))).encode()}


def write(results: Path, output: Path, with_ops: bool = False,
          workload: str | None = None) -> BundleSummary:
    """The bundle of the results tree `results` (of one `workload` where given) as `output`
    (.tar.gz)."""
    results = Path(results)
    if not results.is_dir():
        raise UsageError(f"{results}: not a results directory (export --format bundle takes "
                         "the folder that `stallbench run --results` wrote)")
    sets, problems = recorded_sets(results)
    if workload is not None:
        sets = [s for s in sets if s.workload == workload]
    if not sets:
        raise UsageError(f"{results}: no complete run" + (f" of {workload}" if workload else "")
                         + " to put in a bundle")
    summary = BundleSummary(ops_included=with_ops, left_out=problems)
    tmp = output.with_name(f".{output.name}.tmp")
    plans: dict[str, str] = {}
    configs: set[str] = set()
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            for recorded in sets:
                for name in recorded.variants:
                    for run in recorded.runs[name]:
                        _summary_current(run)
                        rel = run.path.relative_to(results).as_posix()
                        for path in _run_files(run, with_ops):
                            inner = path.relative_to(run.path).as_posix()
                            tar.add(path, f"{layout.RESULTS_DIR}/{rel}/{inner}",
                                    recursive=False, filter=_plain)
                        ops = run.path / OPS_FILE
                        summary.ops_bytes += ops.stat().st_size if ops.is_file() else 0
                        if not with_ops:
                            _add_bytes(tar, f"{layout.RESULTS_DIR}/{rel}/{OPS_LEFT_OUT_FILE}",
                                       b"")
                        summary.runs += 1
                        plan = run.meta.plan or {}
                        if isinstance(plan.get("text"), str):
                            plans.setdefault(str(plan.get("hash") or len(plans)), plan["text"])
                        config = run.path / KERNEL_CONFIG_FILE
                        digest = (run.meta.kernel or {}).get("config_sha256") or \
                            ((run.meta.environment or {}).get("vm") or {}).get("config_sha256")
                        if config.is_file() and digest and digest not in configs:
                            configs.add(digest)
                            tar.add(config, f"{layout.KERNELS_DIR}/{digest}.config",
                                    recursive=False, filter=_plain)
                    summary.variants += 1
                for name, data in _reports(recorded, results).items():
                    _add_bytes(tar, name, data)
                    summary.reports.append(name)
            for key, text in plans.items():
                _add_bytes(tar, f"{layout.PLANS_DIR}/{key}.toml", text.encode())
            summary.plans, summary.kernels = len(plans), len(configs)
            _add_bytes(tar, layout.MANIFEST_FILE, json.dumps(_manifest(
                results, sets, summary), indent=1).encode())
        os.replace(tmp, output)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    summary.bytes = output.stat().st_size
    return summary


def _manifest(results: Path, sets: list[RecordedSet], summary: BundleSummary
              ) -> dict[str, Any]:
    return {"format": layout.FORMAT_VERSION, "stallbench_version": __version__,
            "made_utc": utc_now(), "source": str(results.resolve()),
            "results": layout.RESULTS_DIR,
            "workloads": {s.workload: s.variants for s in sets},
            "runs": summary.runs, "plans": summary.plans, "kernel_configs": summary.kernels,
            "reports": summary.reports, "ops_included": summary.ops_included,
            "ops_bytes": summary.ops_bytes, "left_out": summary.left_out,
            "files": {"run": RUN_FILE, "summary": SUMMARY_FILE, "ops": OPS_FILE}}
