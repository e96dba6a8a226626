"""Plan / Variant / run options: what to run, under which configurations.

`stallbench run` builds a Plan from its flags; `stallbench run --plan FILE` from TOML
(`load_plan`). Everything is validated here, before anything on the machine changes.
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UsageError
from .monitors import parse_monitor_list
from .units import parse_duration, parse_size
from .workloads import available_workloads, get_workload


@dataclass
class VariantSettings:
    """One configuration: where the workload's files live and what is changed on the system."""

    name: str
    dir: Path | None = None            # an existing directory: only used, never formatted
    fs: str | None = None              # ext2|ext3|ext4|xfs|btrfs on a loop device
    fs_size: int | None = None         # bytes; default: loopfs.default_size (need + overhead)
    mkfs_opts: str = ""
    mount_opts: str = ""
    work_dir: Path | None = None       # where images live; default under the results directory
    keep_image: bool = False
    memory: int | None = None          # bytes: memory cgroup limit for the workload
    system_memory: int | None = None   # bytes: leave only about this much available system-wide
    sysctls: dict[str, str] = field(default_factory=dict)
    scheduler: str | None = None       # I/O scheduler of the block device under the directory
    drop_caches: bool = True
    workload_options: dict[str, Any] = field(default_factory=dict)  # override the plan's


@dataclass
class Plan:
    workload: str
    workload_options: dict[str, Any]
    variants: list[VariantSettings]
    duration_s: float = 10.0
    iterations: int = 1
    warmup_s: float | None = None      # None: the workload's default_warmup_s
    until_decided: list[str] | None = None  # iterations = "auto": these OP:STAT metrics decide
    monitors: list[str] | None = None  # None: the default set
    results: Path = Path("results")
    source: Path | None = None         # the plan file, for messages


# ------------------------------------------------------------------------------------------------
# plan files (TOML)

FILESYSTEMS = ("ext2", "ext3", "ext4", "xfs", "btrfs")
SCHEDULERS = ("none", "mq-deadline", "kyber", "bfq")   # blk-mq's; a device offers a subset
MAX_PLAN_BYTES = 1 << 20
MAX_ITERATIONS = 10_000
MAX_VARIANTS = 100

_TOP_KEYS = {"workload", "workload_options", "options", "duration", "iterations", "monitors",
             "results", "variants", "warmup", "max_iterations", "metrics"}
_VARIANT_KEYS = {"name", "dir", "fs", "fs_size", "mkfs_opts", "mount_opts", "work_dir",
                 "keep_image", "memory", "system_memory", "sysctls", "scheduler", "drop_caches",
                 "workload_options"}
_SYSCTL_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$")
_SCHEDULER_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
_OPTION_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def check_fs_name(fs: object, what: str = "--fs") -> str:
    if not isinstance(fs, str) or fs not in FILESYSTEMS:
        raise UsageError(f"{what}: {fs!r} is not a supported filesystem; "
                         f"choose one of {', '.join(FILESYSTEMS)}")
    return fs


def check_sysctl(key: object, value: object, what: str = "--sysctl") -> tuple[str, str]:
    """Validate the shape of one sysctl setting (whether the kernel has it is checked in env/)."""
    if not isinstance(key, str) or not _SYSCTL_KEY_RE.match(key) or len(key) > 200:
        raise UsageError(f"{what}: {key!r} is not a sysctl name (use e.g. vm.dirty_ratio)")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UsageError(f"{what}: {key} needs a string or number value, got {value!r}")
    text = str(value).strip()
    if not text or _CONTROL_RE.sub("", text.replace("\t", "")) != text.replace("\t", ""):
        raise UsageError(f"{what}: {key}={value!r} is not a usable value")
    if len(text) > 4096:
        raise UsageError(f"{what}: the value of {key} is too long")
    return key, text


def parse_sysctl_assignment(text: str, what: str = "--sysctl") -> tuple[str, str]:
    """'vm.dirty_ratio=10' -> ('vm.dirty_ratio', '10')."""
    key, sep, value = str(text).partition("=")
    if not sep:
        raise UsageError(f"{what} {text!r}: use KEY=VALUE, e.g. vm.dirty_ratio=10")
    return check_sysctl(key.strip(), value.strip(), what)


def check_scheduler_name(name: object, what: str = "--scheduler") -> str:
    if not isinstance(name, str) or not _SCHEDULER_RE.match(name):
        raise UsageError(f"{what}: {name!r} is not an I/O scheduler name (e.g. mq-deadline, none)")
    return name


def check_mount_opts(opts: object, what: str = "--mount-opts") -> str:
    if not isinstance(opts, str):
        raise UsageError(f"{what}: expected a string like 'noatime,data=journal', got {opts!r}")
    if any(c.isspace() for c in opts) or _CONTROL_RE.search(opts) or len(opts) > 1024:
        raise UsageError(f"{what}: {opts!r} must be one comma-separated list without spaces")
    return opts


def check_mkfs_opts(opts: object, what: str = "--mkfs-opts") -> str:
    """mkfs options may not name a device or path: mkfs only ever formats our own loop device."""
    if not isinstance(opts, str):
        raise UsageError(f"{what}: expected a string like '-O ^has_journal', got {opts!r}")
    if _CONTROL_RE.search(opts.replace("\t", " ")) or len(opts) > 1024:
        raise UsageError(f"{what}: {opts!r} contains control characters or is too long")
    try:
        tokens = shlex.split(opts)
    except ValueError as exc:
        raise UsageError(f"{what}: {opts!r} cannot be split into arguments ({exc})") from None
    for token in tokens:
        if token.startswith("/dev") or "/dev/" in token or token.startswith("/"):
            raise UsageError(f"{what}: {token!r} looks like a device or path; stallbench formats "
                             "only the loop device it created, so mkfs options may not name one")
    return opts


def check_plain_path(value: object, what: str) -> Path:
    if isinstance(value, Path):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{what}: expected a path string, got {value!r}")
    if _CONTROL_RE.search(value) or len(value) > 4096:
        raise UsageError(f"{what}: {value!r} contains control characters or is too long")
    path = Path(value).expanduser()
    if ".." in path.parts:
        raise UsageError(f"{what}: {value!r} contains '..'; give a path without it")
    return path


def load_plan(path: Path | str) -> Plan:
    """Read and validate a plan file; every problem is a UsageError naming file, line and key."""
    path = Path(path)
    try:
        raw = path.read_bytes()[: MAX_PLAN_BYTES + 1]
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
    return _PlanReader(path, text).read(data)


class _PlanReader:
    def __init__(self, path: Path, text: str):
        self.path = path
        try:
            self.lines = _key_lines(text)
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

    # -- reading --------------------------------------------------------------------------------
    def read(self, data: dict[str, Any]) -> Plan:
        from .store import default_results_dir

        for key in data:
            if key not in _TOP_KEYS:
                raise self.error((key,), f"unknown key; known keys: {', '.join(sorted(_TOP_KEYS))}")
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
        options = data.get(options_key, {})
        if not isinstance(options, dict):
            raise self.error((options_key,), "expected a table of workload options")
        for key, value in options.items():
            if not _OPTION_KEY_RE.match(key):
                raise self.error((options_key, key), "not a workload option name")
            if isinstance(value, dict):
                raise self.error((options_key, key), "expected a value, not a table")
        written = {key.replace("-", "_"): key for key in options}
        options = {key.replace("-", "_"): value for key, value in options.items()}
        self._check_workload_options(workload, options, options_key, written)

        duration = 10.0
        if "duration" in data:
            duration = self.wrap(("duration",), _duration, data["duration"], "duration")
        warmup = None
        if "warmup" in data:
            warmup = self.wrap(("warmup",), _warmup, data["warmup"], "warmup")
        iterations = 1
        until_decided = None
        if data.get("iterations") == "auto":
            iterations = data.get("max_iterations", 10)
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
        elif "max_iterations" in data or "metrics" in data:
            key = "max_iterations" if "max_iterations" in data else "metrics"
            raise self.error((key,), 'only with iterations = "auto"')
        elif "iterations" in data:
            iterations = data["iterations"]
            if isinstance(iterations, bool) or not isinstance(iterations, int):
                raise self.error(("iterations",), f"expected a whole number, got {iterations!r}")
            if not 1 <= iterations <= MAX_ITERATIONS:
                raise self.error(("iterations",), f"must be between 1 and {MAX_ITERATIONS}")
        monitors = None
        if "monitors" in data:
            value = data["monitors"]
            if not isinstance(value, (str, list)) or (
                    isinstance(value, list) and not all(isinstance(v, str) for v in value)):
                raise self.error(("monitors",), "expected a string or a list of monitor names")
            try:
                monitors = parse_monitor_list(value)
            except UsageError as exc:
                raise self.error(("monitors",), str(exc)) from None
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
                merged = {**options, **variant.workload_options}
                self._check_workload_options(
                    workload, merged, ("variants", i, "workload_options"),
                    {k: k for k in variant.workload_options})
        seen: set[str] = set()
        for i, variant in enumerate(variants):
            if variant.name in seen:
                raise self.error(("variants", i, "name"),
                                 f"variant name {variant.name!r} is used twice")
            seen.add(variant.name)
        return Plan(workload=workload, workload_options=options, variants=variants,
                    duration_s=duration, iterations=iterations, warmup_s=warmup,
                    until_decided=until_decided,
                    monitors=monitors,
                    results=results, source=self.path)

    def _check_workload_options(self, workload: str, options: dict[str, Any],
                                key: str | tuple[Any, ...], written: dict[str, str]) -> None:
        """Let the workload validate its options when it is built in (the runner does it again)."""
        try:
            cls = get_workload(workload)
        except UsageError:
            return
        try:
            cls.from_options(dict(options))
        except Exception as exc:  # noqa: BLE001 - a workload's own checks may raise anything
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if not isinstance(exc, UsageError):
                message = f"invalid options ({message})"
            # point at the option the workload complained about, if it names one
            path = key if isinstance(key, tuple) else (key,)
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

        def key_path(key: str) -> tuple[Any, ...]:
            return (*base, key)

        def what(key: str) -> str:
            return _dotted(key_path(key))

        for key in table:
            if key not in _VARIANT_KEYS:
                raise self.error(key_path(key),
                                 f"unknown key; known keys: {', '.join(sorted(_VARIANT_KEYS))}")
        if "name" not in table:
            raise self.error(base, "every variant needs a name (name = \"ext4\")")
        name = table["name"]
        if not isinstance(name, str):
            raise self.error(key_path("name"), f"expected a string, got {name!r}")
        from .store import check_name

        self.wrap(key_path("name"), check_name, name, f"{what('name')}: variant name")
        settings = VariantSettings(name=name)

        def string(key: str) -> str:
            value = table[key]
            if not isinstance(value, str):
                raise self.error(key_path(key), f"expected a string, got {value!r}")
            return value

        def boolean(key: str) -> bool:
            value = table[key]
            if not isinstance(value, bool):
                raise self.error(key_path(key), f"expected true or false, got {value!r}")
            return value

        def size(key: str) -> int:
            value = table[key]
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise self.error(key_path(key), f"expected a size like \"512M\", got {value!r}")
            return self.wrap(key_path(key), parse_size, value, what(key))

        if "dir" in table:
            settings.dir = self.wrap(key_path("dir"), check_plain_path, table["dir"], what("dir"))
        if "fs" in table:
            settings.fs = self.wrap(key_path("fs"), check_fs_name, table["fs"], what("fs"))
        if "fs_size" in table:
            settings.fs_size = size("fs_size")
        if "mkfs_opts" in table:
            settings.mkfs_opts = self.wrap(key_path("mkfs_opts"), check_mkfs_opts,
                                           string("mkfs_opts"), what("mkfs_opts"))
        if "mount_opts" in table:
            settings.mount_opts = self.wrap(key_path("mount_opts"), check_mount_opts,
                                            string("mount_opts"), what("mount_opts"))
        if "work_dir" in table:
            settings.work_dir = self.wrap(key_path("work_dir"), check_plain_path,
                                          table["work_dir"], what("work_dir"))
        if "keep_image" in table:
            settings.keep_image = boolean("keep_image")
        if "memory" in table:
            settings.memory = size("memory")
        if "system_memory" in table:
            settings.system_memory = size("system_memory")
        if "scheduler" in table:
            settings.scheduler = self.wrap(key_path("scheduler"), check_scheduler_name,
                                           table["scheduler"], what("scheduler"))
        if "drop_caches" in table:
            settings.drop_caches = boolean("drop_caches")
        if "sysctls" in table:
            settings.sysctls = self._sysctls(key_path("sysctls"), table["sysctls"])
        if "workload_options" in table:
            options = table["workload_options"]
            if not isinstance(options, dict) or any(isinstance(v, dict) for v in options.values()):
                raise self.error(key_path("workload_options"), "expected a table of values")
            for key in options:
                if not _OPTION_KEY_RE.match(key):
                    raise self.error((*key_path("workload_options"), key),
                                     "not a workload option name")
            settings.workload_options = {k.replace("-", "_"): v for k, v in options.items()}
        if settings.dir is not None and settings.fs is not None:
            raise self.error(key_path("fs"), "give either dir (an existing directory) or fs "
                             "(a new loop filesystem), not both")
        if settings.fs is None:
            for key in ("fs_size", "mkfs_opts", "mount_opts", "keep_image"):
                if key in table:
                    raise self.error(key_path(key), "only makes sense with fs = \"ext4\" etc.")
        return settings

    def _sysctls(self, key_path: tuple[Any, ...], value: Any) -> dict[str, str]:
        result: dict[str, str] = {}
        what = _dotted(key_path)
        if isinstance(value, list):
            for i, item in enumerate(value):
                if not isinstance(item, str):
                    raise self.error((*key_path, i), "expected \"KEY=VALUE\" strings")
                key, text = self.wrap((*key_path, i), parse_sysctl_assignment, item, what)
                result[key] = text
            return result
        if not isinstance(value, dict):
            raise self.error(key_path, "expected a table like { \"vm.dirty_ratio\" = 10 }")
        for key, item in _flatten(value):
            full = (*key_path, key)
            if full not in self.lines:
                full = (*key_path, *key.split("."))
            result[key] = self.wrap(full, check_sysctl, key, item, what)[1]
        return result


def _flatten(table: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Unquoted dotted TOML keys (vm.dirty_ratio = 5) arrive nested: join them back."""
    items: list[tuple[str, Any]] = []
    for key, value in table.items():
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            items.extend(_flatten(value, name))
        else:
            items.append((name, value))
    return items


def _warmup(value: Any, what: str) -> float:
    return parse_warmup(value if isinstance(value, str) else str(value), what)


def parse_warmup(text: str, what: str = "--warmup") -> float:
    """A warm-up duration ('3s', '0'), a multiple of 0.1 s (it ends on a time block's edge)."""
    seconds = parse_duration(text, what) if str(text).strip() not in ("0", "0s") else 0.0
    tenths = round(seconds * 10)
    if abs(seconds * 10 - tenths) > 1e-6:
        raise UsageError(f"{what}: {text!r} must be a multiple of 0.1 s (e.g. 2.5s)")
    return tenths / 10


def _duration(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UsageError(f"{what}: expected a duration like \"30s\", got {value!r}")
    return parse_duration(value, what)


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


# -- where keys are: a small line scanner, since tomllib keeps no positions -----------------------

_HEADER_RE = re.compile(r"^\s*(\[\[?)\s*(.+?)\s*(\]\]?)\s*(#.*)?$")
_KEY_RE = re.compile(r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"\n]*\"|'[^'\n]*')"
                     r"(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"\n]*\"|'[^'\n]*'))*)\s*=")
_KEY_PART_RE = re.compile(r"[A-Za-z0-9_-]+|\"[^\"\n]*\"|'[^'\n]*'")


def _split_key(text: str) -> list[str]:
    return [p[1:-1] if p[0] in "\"'" else p for p in _KEY_PART_RE.findall(text)]


def _key_lines(text: str) -> dict[tuple[Any, ...], int]:
    """Map key paths like ('variants', 1, 'memory') to the line where they are written."""
    lines: dict[tuple[Any, ...], int] = {}
    array_counts: dict[tuple[str, ...], int] = {}
    table: tuple[Any, ...] = ()
    in_multiline: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_multiline:
            if line.count(in_multiline) % 2 == 1:
                in_multiline = None
            continue
        header = _HEADER_RE.match(line)
        if header and header.group(1) == header.group(3)[::-1].replace("]", "["):
            names = _split_key(header.group(2))
            resolved = _resolve_arrays(tuple(names), array_counts)
            if header.group(1) == "[[":
                count = array_counts.get(tuple(names), 0)
                array_counts[tuple(names)] = count + 1
                resolved = (*_resolve_arrays(tuple(names[:-1]), array_counts), names[-1], count)
            table = resolved
            lines.setdefault(table, number)
            continue
        key = _KEY_RE.match(line)
        if key:
            lines.setdefault((*table, *_split_key(key.group(1))), number)
            rest = line[key.end():]
            for quote in ('"""', "'''"):
                if rest.count(quote) % 2 == 1:
                    in_multiline = quote
    return lines


def _resolve_arrays(names: tuple[str, ...], array_counts: dict[tuple[str, ...], int]
                    ) -> tuple[Any, ...]:
    """[variants.sysctls] after [[variants]] means the last variants entry: add its index."""
    resolved: list[Any] = []
    for i, name in enumerate(names):
        resolved.append(name)
        count = array_counts.get(names[: i + 1])
        if count:
            resolved.append(count - 1)
    return tuple(resolved)
