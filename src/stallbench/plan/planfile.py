"""A plan file: `load_plan` reads TOML through the option tables (the Plan's run settings,
settings/variant.py's VariantSettings, each workload's Options), with every problem a
UsageError naming file, line and key (core/tomllines.py: where each key is written).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from ..core.errors import UsageError
from ..core.options import (
    Field,
    NestedUsageError,
    check_relations,
    parse_values,
    unknown_key,
)
from ..core.tomllines import key_lines
from ..results.rundirs import default_results_dir
from ..settings.shapes import check_plain_path
from ..settings.variant import (
    RELATIONS,
    VARIANT_FIELDS,
    VariantSettings,
    check_fs_options,
    workload_options_table,
)
from ..workloads import available_workloads, get_workload
from .plan import (
    DEFAULT_MAX_ITERATIONS,
    MAX_ITERATIONS,
    PLAN_FIELDS,
    RUN_FIELDS,
    Plan,
    merged_options,
)

MAX_PLAN_BYTES = 1 << 20
MAX_VARIANTS = 100
OTHER_TOP_KEYS = (   # plan keys read by the reader itself
    Field("options", flag=None, schema={"$ref": "#/$defs/options"}),
    Field("max_iterations", flag=None, schema={"type": "integer", "minimum": 1}),
    Field("metrics", flag=None, schema={"type": "array", "minItems": 1, "items": {
        "type": "string", "pattern": "^[^:]+:[A-Za-z0-9_.]+$"}}),
)
_TOP_KEYS = {f.name for f in PLAN_FIELDS + OTHER_TOP_KEYS}
_VARIANT_KEYS = {f.name for f in VARIANT_FIELDS}


def load_plan(path: Path | str, kernel_given: bool = False) -> Plan:
    """Read and validate a plan file; every problem is a UsageError naming file, line and key.
    `kernel_given`: each variant's kernel comes from elsewhere (bisect --git builds it), so the
    keys that need one (vm_cpus, vm_memory) are allowed without it."""
    path = Path(path)
    try:
        with open(path, "rb") as f:        # never more than the limit (/dev/zero never ends)
            raw = f.read(MAX_PLAN_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read plan file: {exc.strerror or exc}") from None
    if len(raw) > MAX_PLAN_BYTES:
        raise UsageError(f"{path}: plan file larger than {MAX_PLAN_BYTES // 1024} KiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"\(at line (\d+), column \d+\)", message)
        where = f"{path}:{match.group(1)}" if match else str(path)
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", message)
        message = re.sub(r"\s*\(at end of document\)", "", message)
        raise UsageError(f"{where}: invalid TOML: {message}") from None
    except RecursionError:
        raise UsageError(f"{path}: invalid TOML: nested too deeply") from None
    return _PlanReader(path, text, kernel_given).read(data)


class _PlanReader:
    def __init__(self, path: Path, text: str, kernel_given: bool = False):
        self.path = path
        self.text = text
        self.kernel_given = kernel_given
        try:
            self.lines = key_lines(text)
        except Exception:  # noqa: BLE001 - line numbers are a courtesy; never fail on them
            self.lines = {}

    # -- messages -------------------------------------------------------------------------------
    def where(self, key_path: tuple[Any, ...]) -> str:
        for n in range(len(key_path), 0, -1):
            line = self.lines.get(key_path[:n])
            if line is not None:
                return f"{self.path}:{line}"
        return str(self.path)

    def error(self, key_path: tuple[Any, ...], message: str) -> UsageError:
        return UsageError(f"{self.where(key_path)}: {_dotted(key_path)}: {message}")

    def wrap(self, key_path: tuple[Any, ...], fn: Any, *args: Any) -> Any:
        """Call a checker that raises UsageError('<what>: ...') and add the location."""
        try:
            return fn(*args)
        except UsageError as exc:
            raise UsageError(f"{self.where(key_path)}: {exc}") from None

    def unknown(self, key_path: tuple[Any, ...], key: str, known: Any, table: str) -> UsageError:
        return self.error(key_path, unknown_key(key, known, table))

    def parse(self, fields: tuple[Field, ...], given: dict[str, Any],
              base: tuple[Any, ...]) -> dict[str, Any]:
        """parse_values with each complaint located at its key (or the table entry named)."""
        checked: dict[str, Any] = {}
        for f in fields:
            if f.name not in given:
                continue
            path = (*base, f.name)
            try:
                checked.update(parse_values((f,), {f.name: given[f.name]},
                                            lambda _, at=path: _dotted(at)))
            except NestedUsageError as exc:
                full = (*path, exc.key)
                if full not in self.lines:
                    full = (*path, *exc.key.split("."))
                raise UsageError(f"{self.where(full)}: {exc}") from None
            except UsageError as exc:
                raise UsageError(f"{self.where(path)}: {exc}") from None
        return checked

    # -- reading --------------------------------------------------------------------------------
    def read(self, data: dict[str, Any]) -> Plan:
        for key in data:
            if key not in _TOP_KEYS:
                raise self.unknown((key,), key, _TOP_KEYS, "the top level")
        if "workload" not in data:
            raise UsageError(f"{self.path}: no 'workload' key (e.g. workload = \"pgioperf\")")
        workload = data["workload"]
        if not isinstance(workload, str):
            raise self.error(("workload",), f"expected a workload name string, got {workload!r}")
        known = available_workloads()
        if workload not in known:
            raise self.error(("workload",), f"unknown workload {workload!r}; choose one of: "
                             f"{', '.join(known)}")
        if "workload_options" in data and "options" in data:
            raise self.error(("options",), "give either [workload_options] or [options], not both")
        options_key = "workload_options" if "workload_options" in data else "options"
        raw_options = data.get(options_key, {})
        if not isinstance(raw_options, dict):
            raise self.error((options_key,), "expected a table of workload options")
        options = self._options_table(options_key, raw_options)
        self._check_workload_options(workload, options, (options_key,),
                                     {key.replace("-", "_"): key for key in raw_options})

        given = {k: data[k] for k in ("duration", "warmup", "monitors", "duet") if k in data}
        until_decided = None
        if data.get("iterations") == "auto":
            iterations = data.get("max_iterations", DEFAULT_MAX_ITERATIONS)
            metrics = data.get("metrics")
            if not isinstance(metrics, list) or not metrics or \
                    not all(isinstance(m, str) for m in metrics):
                raise self.error(("metrics",) if "metrics" in data else ("iterations",),
                                 'iterations = "auto" needs metrics = ["OP:STAT", ...] '
                                 '(e.g. ["read:p99"])')
            until_decided = metrics
            if isinstance(iterations, bool) or not isinstance(iterations, int) \
                    or not 1 <= iterations <= MAX_ITERATIONS:
                raise self.error(("max_iterations",),
                                 f"expected a whole number from 1 to {MAX_ITERATIONS}")
            given["iterations"] = iterations
        elif "max_iterations" in data or "metrics" in data:
            key = "max_iterations" if "max_iterations" in data else "metrics"
            raise self.error((key,), 'only with iterations = "auto"')
        elif "iterations" in data:
            given["iterations"] = data["iterations"]
        run = self.parse(RUN_FIELDS, given, ())
        results = default_results_dir()
        if "results" in data:
            results = self.wrap(("results",), check_plain_path, data["results"], "results")

        raw_variants = data.get("variants", [])
        if not isinstance(raw_variants, list) or not all(isinstance(v, dict)
                                                         for v in raw_variants):
            raise self.error(("variants",), "expected [[variants]] tables")
        if len(raw_variants) > MAX_VARIANTS:
            raise self.error(("variants",), f"more than {MAX_VARIANTS} variants")
        variants = [self._variant(i, v) for i, v in enumerate(raw_variants)]
        if not variants:
            variants = [VariantSettings(name=_default_variant_name())]
        for i, variant in enumerate(variants):
            if variant.workload_options:
                merged = merged_options(options, variant)
                written = raw_variants[i]["workload_options"]
                self._check_workload_options(
                    workload, merged, ("variants", i, "workload_options"),
                    {key.replace("-", "_"): key for key in written})
        seen: set[str] = set()
        for i, variant in enumerate(variants):
            if variant.name in seen:
                raise self.error(("variants", i, "name"),
                                 f"variant name {variant.name!r} is used twice")
            seen.add(variant.name)
        hosts = None
        if "hosts" in data:
            from ..settings.hosts import check_plan_hosts
            hosts = self.wrap(("hosts",), check_plan_hosts, data["hosts"], "hosts",
                              self.path.parent)
        return Plan(workload=workload, workload_options=options, variants=variants,
                    until_decided=until_decided, results=results, source=self.path,
                    text=self.text, hosts=hosts, **run)

    def _options_table(self, key: str, raw: dict[str, Any]) -> dict[str, Any]:
        for name, value in raw.items():
            if isinstance(value, dict):
                raise self.error((key, name), "expected a value, not a table")
        try:
            return workload_options_table(raw, key)
        except NestedUsageError as exc:
            raise UsageError(f"{self.where((key, exc.key))}: {exc}") from None

    def _check_workload_options(self, workload: str, options: dict[str, Any],
                                path: tuple[Any, ...], written: dict[str, str]) -> None:
        """Refuse keys the workload does not declare, then let it check the values (the
        runner does it again)."""
        try:
            cls = get_workload(workload)
        except UsageError:
            return
        known = cls.option_names()
        for key, original in written.items():
            if key not in known:
                raise self.unknown((*path, original), original, known, f"[{_dotted(path)}]")
        try:
            cls.from_options(dict(options))
        except Exception as exc:  # noqa: BLE001 - a workload's own checks may raise anything
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if not isinstance(exc, UsageError):
                message = f"invalid options ({message})"
            # point at the option the workload complained about, if it names one
            location: tuple[Any, ...] = path
            for name, original in written.items():
                if f"--{name.replace('_', '-')}" in message or f"{name!r}" in message:
                    location = (*path, original)
                    dashed = (*path, original.replace("_", "-"))
                    if location not in self.lines and dashed in self.lines:
                        location = dashed
                    break
            raise UsageError(f"{self.where(location)}: {_dotted(path)}: {message}") from None

    def _variant(self, index: int, table: dict[str, Any]) -> VariantSettings:
        base: tuple[Any, ...] = ("variants", index)
        for key in table:
            if key not in _VARIANT_KEYS:
                raise self.unknown((*base, key), key, _VARIANT_KEYS, f"[{_dotted(base)}]")
        if "name" not in table:
            raise self.error(base, "every variant needs a name (name = \"ext4\")")
        settings = VariantSettings(**self.parse(VARIANT_FIELDS, table, base))

        def fail(key: str, message: str, about_key: bool) -> UsageError:
            return self.error((*base, key), message)

        values = vars(settings)
        if self.kernel_given and settings.kernel is None:
            values = {**values, "kernel": "(each commit's)"}
        check_relations(values, VARIANT_FIELDS, RELATIONS, fail, str)
        check_fs_options(settings, fail)
        return settings


def _dotted(key_path: tuple[Any, ...]) -> str:
    text = ""
    for part in key_path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _default_variant_name() -> str:
    release = re.sub(r"[^A-Za-z0-9._+@=,:-]", "_", os.uname().release)[:100]
    return release if release and release[0].isalnum() else f"v{release}"[:100]
