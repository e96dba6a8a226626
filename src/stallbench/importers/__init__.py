"""Foreign logs -> runs: `stallbench import KIND PATH --variant NAME`.

Each importer parses a log into `imported.Imported`; `import_log` writes it as a normal run
directory through store.RunWriter.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from ..core.errors import UsageError
from ..logformats.loglines import LogError
from .imported import Imported, write_run


def _lazy(module: str, function: str) -> Callable[[Path], Imported]:
    """The parser, imported when first called (workloads import this package; some parsers
    import numpy and pyarrow)."""
    def parse(path: Path) -> Imported:
        return getattr(importlib.import_module(f".{module}", __name__), function)(path)

    parse.__name__ = function
    return parse


IMPORTERS: dict[str, Callable[[Path], Imported]] = {
    "mmtests-pgioperf": _lazy("mmtests", "parse_pgioperf"),
    "strace": _lazy("strace", "parse_strace"),
    "fio": _lazy("fio", "parse_fio"),
    "pgbench": _lazy("pgbench", "parse_pgbench"),
}


def parse_log(kind: str, path: Path) -> Imported:
    if kind not in IMPORTERS:
        raise UsageError(f"unknown log kind {kind!r}; choose one of: {', '.join(IMPORTERS)}")
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    return IMPORTERS[kind](path)


def import_log(kind: str, path: Path, variant: str, results: Path,
               workload: str | None = None) -> Path:
    """Parse a log and write it as RESULTS/<variant>/<workload>/<n>/; returns the run dir."""
    return write_run(parse_log(kind, path), results, variant, workload)


__all__ = ["IMPORTERS", "Imported", "LogError", "import_log", "parse_log"]
