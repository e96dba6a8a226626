"""`variant@host`: how `compare` and `check` tell apart runs of one variant from several hosts.

Runs are told apart by run.json's `host` (a fleet run sets it to the inventory name). A variant
whose runs come from several hosts is shown per host (`A@db1`, `A@db2`) unless the user pools
them (`--pool-hosts`); `check` names one host or pools, never guesses. Needs no Ansible.
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import UsageError
from ..results.runselect import Resolved, resolve_runs
from ..results.store import Run


def host_of(run: Run) -> str:
    return run.meta.host or "?"


def hosts_of(resolved: Resolved) -> list[str]:
    return sorted({host_of(run) for run in resolved.runs})


def resolve_spec(spec: str, results: Path | None, workload: str | None,
                 allow_incomplete: bool) -> Resolved:
    """A variant, a path, or VARIANT@HOST: that variant's runs from that host only."""
    try:
        return resolve_runs(spec, results, workload, allow_incomplete)
    except UsageError:
        variant, sep, host = spec.rpartition("@")
        if not sep or not variant or not host:
            raise
        whole = resolve_runs(variant, results, workload, allow_incomplete)
    runs = [run for run in whole.runs if host_of(run) == host]
    if not runs:
        raise UsageError(f"{spec!r}: variant {variant!r} has no runs from host {host!r} "
                         f"(its hosts: {', '.join(hosts_of(whole))})")
    return Resolved(label=spec, runs=runs, problems=whole.problems)


def split_hosts(resolved: list[Resolved], pool: bool, split: bool = True
                ) -> tuple[list[Resolved], list[str]]:
    """Each side with runs from several hosts -> one side per host (or pooled, when asked).
    split=False (check): refuse instead of splitting. Returns (sides, notes for the user)."""
    sides: list[Resolved] = []
    notes: list[str] = []
    for side in resolved:
        hosts = hosts_of(side)
        if len(hosts) < 2:
            sides.append(side)
            continue
        if pool:
            notes.append(f"{side.label}: runs from {len(hosts)} hosts ({', '.join(hosts)}) "
                         "pooled (--pool-hosts)")
            sides.append(side)
            continue
        if not split:
            raise UsageError(f"{side.label} has runs from {len(hosts)} hosts "
                             f"({', '.join(hosts)}): name one as {side.label}@{hosts[0]}, or "
                             "pool them with --pool-hosts")
        notes.append(f"{side.label}: runs from {len(hosts)} hosts, shown per host "
                     f"({', '.join(f'{side.label}@{h}' for h in hosts)}); --pool-hosts pools them")
        for host in hosts:
            sides.append(Resolved(label=f"{side.label}@{host}",
                                  runs=[r for r in side.runs if host_of(r) == host],
                                  problems=side.problems if host == hosts[0] else []))
    return sides, notes


def variant_specs(specs: list[str], results: Path | None) -> list[str]:
    """The specs with any @HOST removed where it names a variant's host (for prepare steps)."""
    from ..results.rundirs import default_results_dir

    root = Path(results) if results else default_results_dir()
    return [spec if Path(spec).is_dir() or (root / spec).is_dir() or "@" not in spec
            else spec.rpartition("@")[0] for spec in specs]
