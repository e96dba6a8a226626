"""A variant: one configuration of the machine, and the one table of its settings.

`VariantSettings` declares every variant setting once (`option(...)` per field: plan key, flag,
parser, help, root, schema); cli/run.py makes its flags from it, plan/planfile.py reads plan tables
with it, env/checks.py checks its shape with it, and schemas/plan.schema.json lists its keys.
The parsers here check shape only; what the machine offers is checked in env/.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.display import format_size
from ..core.errors import UsageError
from ..core.options import (
    APPEND,
    OFF_SWITCH,
    SWITCH,
    Excludes,
    Field,
    NestedUsageError,
    Requires,
    build,
    check_relations,
    fields_of,
    option,
)
from ..core.units import parse_size
from .fsoptions import check_mkfs_words, check_mount_words
from .shapes import (
    FILESYSTEMS,
    IO_MAX_KEYS,
    OPTION_KEY_RE,
    SCHEDULER_RE,
    SCHEDULERS,
    SYSCTL_KEY_RE,
    check_fs_name,
    check_io_weight,
    check_mkfs_opts,
    check_mount_opts,
    check_plain_path,
    check_scheduler_name,
    check_sysctl,
    check_vm_cpus,
    check_vm_memory,
    parse_io_latency,
    parse_io_max,
    parse_swap_limit,
    parse_sysctl_assignment,
)


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


# -- parsers of plan values that the checks above do not cover --------------------------------

def _string(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{what}: expected a string, got {value!r}")
    return value


def _boolean(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"{what}: expected true or false, got {value!r}")
    return value


def _size(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise UsageError(f"{what}: expected a size like \"512M\", got {value!r}")
    return parse_size(value, what)


MIN_MEMORY_LIMIT = 16 << 20


def _memory_limit(value: object, what: str) -> int:
    limit = _size(value, what)
    if limit < MIN_MEMORY_LIMIT:
        raise UsageError(f"{what} {format_size(limit)}: too small to run anything; use at least "
                         f"{format_size(MIN_MEMORY_LIMIT)}")
    return limit


def _name(value: object, what: str) -> str:
    from ..core.names import check_name

    return check_name(_string(value, what), f"{what}: variant name")


def _sysctls(value: object, what: str) -> dict[str, str]:
    """["KEY=VALUE", ...] (flags, plan list) or { "vm.dirty_ratio" = 10 } (plan table)."""
    result: dict[str, str] = {}
    if isinstance(value, list):
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise NestedUsageError(str(i), f"{what}: expected \"KEY=VALUE\" strings")
            key, text = parse_sysctl_assignment(item, what)
            result[key] = text
        return result
    if not isinstance(value, dict):
        raise UsageError(f"{what}: expected a table like {{ \"vm.dirty_ratio\" = 10 }}")
    for key, item in _flatten(value):
        try:
            result[key] = check_sysctl(key, item, what)[1]
        except UsageError as exc:
            raise NestedUsageError(key, str(exc)) from None
    return result


def _path(value: object, what: str) -> Path:
    return check_plain_path(value, what)


def _kernel(value: object, what: str) -> str:
    return str(check_plain_path(value, what))


def _vm_cpus(value: object, what: str) -> int:
    return check_vm_cpus(value, what)


def _vm_memory(value: object, what: str) -> int:
    return check_vm_memory(_size(value, what), what)


def workload_options_table(value: object, what: str) -> dict[str, Any]:
    """A table of workload options: keys as flags or plan keys, dashes made underscores."""
    if not isinstance(value, dict) or any(isinstance(v, dict) for v in value.values()):
        raise UsageError(f"{what}: expected a table of values")
    for key in value:
        if not OPTION_KEY_RE.match(key):
            raise NestedUsageError(key, f"{what}.{key}: not a workload option name")
    return {key.replace("-", "_"): item for key, item in value.items()}


def _hosts(value: object, what: str) -> list[str]:
    from .hosts import check_variant_hosts

    return check_variant_hosts(value, what)


def _boot(value: object, what: str) -> dict[str, str]:
    from .hosts import check_boot

    return check_boot(value, what)


_SIZE_SCHEMA = {"$ref": "#/$defs/size"}
_STRING = {"type": "string"}
_BOOL = {"type": "boolean"}
_SIZE_OR_ZERO = {"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]}
_STRINGS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}


# -- the table: every variant setting, declared once -------------------------------------------

@dataclass
class VariantSettings:
    """One configuration: where the workload's files live and what is changed on the system."""

    name: str = option(dataclasses.MISSING, parse=_name, flag="--variant",
                       help="name of this configuration (default: uname -r)",
                       schema={"type": "string",
                               "pattern": "^[A-Za-z0-9][A-Za-z0-9._+@=,:-]{0,99}$"})
    # an existing directory: only used, never formatted
    dir: Path | None = option(parse=_path, help="existing directory for the workload's files",
                              schema=_STRING)
    fs: str | None = option(parse=check_fs_name, choices=FILESYSTEMS, root="loop devices, "
                            "mkfs and mount", schema={"enum": list(FILESYSTEMS)},
                            help="make this filesystem on a loop device for the run (root)")
    fs_size: int | None = option(parse=_size, schema=_SIZE_SCHEMA,  # default: loopfs sizes it
                                 help="loop filesystem size (default: what the workload needs "
                                      "plus the filesystem's own overhead)")
    mkfs_opts: str = option("", parse=lambda v, w: check_mkfs_opts(_string(v, w), w),
                            help="options for mkfs", schema=_STRING)
    mount_opts: str = option("", parse=lambda v, w: check_mount_opts(_string(v, w), w),
                             help="options for mount -o", schema=_STRING)
    # where images live; default under the results directory
    work_dir: Path | None = option(parse=_path, help="where loop images live", schema=_STRING)
    keep_image: bool = option(False, kind=SWITCH, parse=_boolean, help="keep the loop image",
                              schema=_BOOL)
    memory: int | None = option(parse=_memory_limit, root="creating a memory cgroup",
                                schema=_SIZE_SCHEMA,
                                help="memory cgroup limit for the workload, e.g. 512M (root)")
    system_memory: int | None = option(
        parse=_size, root="reserving huge pages through vm.nr_hugepages", schema=_SIZE_SCHEMA,
        help="leave only about this much memory available system-wide (root)")
    sysctls: dict[str, str] = option(
        factory=dict, parse=_sysctls, flag="--sysctl", kind=APPEND, metavar="KEY=VALUE",
        root="writing /proc/sys", help="set a sysctl for the run (repeatable; root)",
        schema={"type": "object",
                "propertyNames": {"pattern": SYSCTL_KEY_RE.pattern},
                "additionalProperties": {"type": ["string", "integer"]}})
    scheduler: str | None = option(
        parse=check_scheduler_name, metavar="NAME",
        root="writing /sys/block/DEV/queue/scheduler",
        help=f"I/O scheduler for the device under the dir: one of {', '.join(SCHEDULERS)} "
             "that the device offers (root)",
        schema={"type": "string", "pattern": SCHEDULER_RE.pattern})
    drop_caches: bool = option(True, kind=OFF_SWITCH, flag="--no-drop-caches", parse=_boolean,
                               schema=_BOOL,
                               help="keep the page cache (default as root: sync and drop the "
                                    "page cache, dentries and inodes machine-wide before each "
                                    "run)")
    # override the plan's
    workload_options: dict[str, Any] = option(factory=dict, flag=None,
                                              parse=workload_options_table,
                                              schema={"$ref": "#/$defs/options"})
    kernel: str | None = option(parse=_kernel, metavar="IMAGE_OR_DEB", schema=_STRING,
                                help="boot this kernel (bzImage, linux-image-*.deb or unpacked "
                                     "dir) under QEMU and run the workload in the guest")
    vm_cpus: int | None = option(parse=_vm_cpus, cli_type=int,  # default vm/checks.py DEFAULT_CPUS
                                 help="the guest's vCPUs (with --kernel; 2)",
                                 schema={"type": "integer", "minimum": 1})
    vm_memory: int | None = option(parse=_vm_memory, schema=_SIZE_SCHEMA,
                                   help="the guest's memory (with --kernel; 1G)")
    hosts: list[str] | None = option(flag=None, parse=_hosts, schema=_STRINGS)   # fleet
    boot: dict[str, str] | None = option(  # fleet: kernel to boot first (planhosts.py,
        flag=None, parse=_boot, schema={"type": "object"})  # whose BOOT_SCHEMA the plan's has
    # cgroup knobs (env/memknobs.py, env/iocgroup.py)
    memory_high: int | None = option(parse=_size, schema=_SIZE_OR_ZERO,
                                     help="cgroup v2 memory.high for the workload (root)")
    memory_soft_limit: int | None = option(
        parse=_size, schema=_SIZE_OR_ZERO,
        help="cgroup v1 memory.soft_limit_in_bytes for the workload (root)")
    swap_limit: int | None = option(parse=parse_swap_limit, schema=_SIZE_OR_ZERO,
                                    help="swap the workload may use, e.g. 0 or 256M (root)")
    io_max: dict[str, int] = option(
        factory=dict, parse=parse_io_max, metavar="rbps=N,wbps=N,riops=N,wiops=N",
        schema={"oneOf": [{"type": "string"}, {
            "type": "object", "additionalProperties": False, "minProperties": 1,
            "properties": {key: {"oneOf": [{"type": "string"}, {"type": "integer"}]}
                           for key in IO_MAX_KEYS}}]},
        help="throttle I/O to the device under the directory (root; cgroup v2 io.max or v1 "
             "blkio.throttle)")
    io_weight: int | None = option(parse=check_io_weight, cli_type=int,
                                   help="I/O weight 1-10000 (root; io.weight)",
                                   schema={"type": "integer", "minimum": 1, "maximum": 10000})
    io_latency_us: int | None = option(
        name="io_latency", parse=parse_io_latency, metavar="TIME",
        schema={"oneOf": [{"type": "string"}, {"type": "number"}]},
        help="cgroup v2 io.latency target on the device, e.g. 5ms (root)")


VARIANT_FIELDS: tuple[Field, ...] = fields_of(VariantSettings)
RELATIONS = (
    Excludes("dir", "fs", "give either {first} (an existing directory) or {second} "
                          "(a new loop filesystem), not both"),
    Requires(("fs_size", "mkfs_opts", "mount_opts", "keep_image"), "fs"),
    Requires(("vm_cpus", "vm_memory"), "kernel",
             cli="--vm-cpus and --vm-memory only make sense with --kernel"),
    Excludes("kernel", "dir", "a kernel variant runs on the guest's own virtual disk; leave out "
                              "{second} ({fs} chooses the disk's filesystem)"),
)


def flag_of(f: Field) -> str:
    """What a setting is called in messages about flags: its flag, or its key if it has none."""
    return f.option or f.name


def variant_from_flags(given: dict[str, Any]) -> VariantSettings:
    """The settings given as flags (`options.values_from_args`), checked."""
    given.setdefault("name", os.uname().release)
    settings = build(VariantSettings, given, flag_of)
    check_shape(settings, cli=True)
    return settings


def check_shape(settings: VariantSettings, prefix: str = "", cli: bool = False) -> None:
    """Every set value through its parser again (settings built in code were never parsed;
    the parsers take what they return) and the relations between settings, by flag."""
    flags = {f.name: flag_of(f) for f in VARIANT_FIELDS}
    values = vars(settings)
    for f in VARIANT_FIELDS:
        if f.option is not None and f.parse is not None and f.is_set(values[f.target]):
            try:
                f.parse(values[f.target], flags[f.name])
            except UsageError as exc:
                raise UsageError(f"{prefix}{exc}") from None

    def fail(key: str, message: str, about_key: bool) -> UsageError:
        return UsageError(prefix + (f"{flags[key]} {message}" if about_key else message))

    check_relations(values, VARIANT_FIELDS, RELATIONS, fail, flags.__getitem__, cli)
    check_fs_options(settings, fail)


def check_fs_options(settings: VariantSettings, fail: Callable[[str, str, bool], Exception]
                     ) -> None:
    """--mkfs-opts and --mount-opts against the chosen filesystem's own options (their shape
    parsers knew no filesystem yet)."""
    if settings.fs is None:
        return
    for key, check in (("mkfs_opts", check_mkfs_words), ("mount_opts", check_mount_words)):
        try:
            check(getattr(settings, key), "", settings.fs)
        except UsageError as exc:
            raise fail(key, str(exc).removeprefix(": "), True) from None
