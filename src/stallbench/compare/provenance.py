"""What a variant's runs record of where they came from and what re-runs them (issue 46): the
plans as they ran (run.json plan.text, since 0.6.0), the stallbench versions that recorded them
and the kernel they ran (release, the image or .deb given with its sha256, a bisect --git
build's commit, the config's hash). Read from run.json alone; the email's kernels and `To
reproduce:` (report/email.py), `stallbench reproduce` and the bundle take it from here."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..results.store import Run

# plan keys that say where the results go or which hosts run it: left out of a plan printed to
# be run elsewhere (its command names the results directory; reproducing runs on one machine)
PLACE_KEYS = ("results", "hosts")
VARIANT_PLACE_KEYS = ("hosts", "boot")


@dataclass(frozen=True)
class RecordedPlan:
    """One plan as it ran: its hash, file and text (None: recorded before 0.6.0)."""
    hash: str | None
    file: str | None
    text: str | None

    def table(self) -> dict[str, Any] | None:
        """The plan's keys to run it elsewhere (PLACE_KEYS left out); None without a text or
        when the text is not TOML."""
        if self.text is None:
            return None
        try:
            data = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError:
            return None
        data = {k: v for k, v in data.items() if k not in PLACE_KEYS}
        if isinstance(data.get("variants"), list):
            data["variants"] = [{k: v for k, v in variant.items()
                                 if k not in VARIANT_PLACE_KEYS} if isinstance(variant, dict)
                                else variant for variant in data["variants"]]
        return data


@dataclass(frozen=True)
class KernelIdentity:
    release: str | None = None
    file: str | None = None           # the .deb or image a kernel variant gave
    sha256: str | None = None         # of that file
    commit: str | None = None         # a bisect --git build's
    config_sha256: str | None = None  # core/kernelconfig.py's hash of its config
    guest: bool = False               # booted under QEMU


@dataclass(frozen=True)
class Provenance:
    """A variant's runs: the variant name they recorded, their plans (distinct, in the order
    of the runs), the stallbench versions, the kernel (the first run's; `kernels_differ`
    when its runs ran others)."""
    variant: str
    workload: str
    plans: list[RecordedPlan] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    kernel: KernelIdentity = field(default_factory=KernelIdentity)
    kernels_differ: bool = False

    @property
    def plan_texts_missing(self) -> bool:
        return any(plan.text is None for plan in self.plans) or not self.plans


def kernel_of(run: Run) -> KernelIdentity:
    meta = run.meta
    plan = meta.plan or {}
    given = plan.get("kernel") if isinstance(plan.get("kernel"), dict) else {}
    vm = (meta.environment or {}).get("vm") or {}
    config = (meta.kernel or {}).get("config_sha256") or vm.get("config_sha256") \
        or given.get("config_sha256")
    return KernelIdentity(release=(meta.kernel or {}).get("release"), file=given.get("file"),
                          sha256=given.get("sha256"), commit=plan.get("commit"),
                          config_sha256=config, guest=bool(vm))


def provenance_of(runs: list[Run]) -> Provenance:
    """What the runs (of one variant) record of their plan, version and kernel."""
    plans: dict[tuple[Any, ...], RecordedPlan] = {}
    for run in runs:
        plan = run.meta.plan or {}
        text = plan.get("text") if isinstance(plan.get("text"), str) else None
        recorded = RecordedPlan(plan.get("hash"), plan.get("file"), text)
        plans.setdefault((recorded.hash, recorded.text), recorded)
    kernels = [kernel_of(run) for run in runs]
    return Provenance(
        variant=runs[0].meta.variant if runs else "", workload=runs[0].meta.workload
        if runs else "", plans=list(plans.values()),
        versions=sorted({run.meta.stallbench_version for run in runs
                         if run.meta.stallbench_version}),
        kernel=kernels[0] if kernels else KernelIdentity(),
        kernels_differ=len(set(kernels)) > 1)


@dataclass(frozen=True)
class RecordedSet:
    """The complete runs of one workload in a results tree, by variant in the order their
    plan gave (the first is the baseline a report compares the others with; variants no plan
    orders come after, by their first run)."""
    workload: str
    variants: list[str]
    runs: dict[str, list[Run]]


def recorded_sets(results: Path) -> tuple[list[RecordedSet], list[str]]:
    """Each workload's complete runs in `results`; the run folders that could not be read or
    did not complete, said."""
    from ..results.catalog import scan
    from ..results.runmeta import Status

    runs, problems = scan(results)
    by_workload: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda r: (r.meta.start_utc or "", str(r.path))):
        if run.status != Status.COMPLETE:
            problems.append(f"{run.path}: {run.describe_status()}")
            continue
        by_workload.setdefault(run.meta.workload, []).append(run)
    sets = []
    for workload, mine in sorted(by_workload.items()):
        order: list[str] = []
        for run in mine:
            table = RecordedPlan(None, None, (run.meta.plan or {}).get("text")).table() or {}
            for variant in table.get("variants") or []:
                if isinstance(variant, dict) and isinstance(variant.get("name"), str):
                    order.append(variant["name"])
        names = list(dict.fromkeys(run.meta.variant for run in mine))
        ordered = [n for n in dict.fromkeys(order) if n in names] + \
            [n for n in names if n not in order]
        sets.append(RecordedSet(workload, ordered,
                                {n: [r for r in mine if r.meta.variant == n] for n in ordered}))
    return sets, problems
