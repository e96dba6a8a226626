"""The run record: run.json as a typed `RunMeta`, with the run's `Status` and each monitor's
`MonitorStatus` (docs/architecture.md lists the keys; schemas/run.schema.json is their schema).

`RunMeta.from_json` and `RunMeta.to_json` are the only places that turn run.json into the record
and back; `read_meta` and `write_meta` below are the only reader and writer of the file. A key
this version does not know is kept in `extra` and written back, and a record remembers the
order of its keys (as read, then as set), so a run.json read and written again keeps its keys,
values and order: files of earlier versions stay readable and are not rewritten into another
shape.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import RunDataError
from ..core.jsonfile import write_json_atomic
from .rundirs import RUN_FILE

SCHEMA_VERSION = 1


class Status(enum.StrEnum):
    """A run's status; a str, so JSON and comparisons with the plain strings keep working."""

    RUNNING = "running"
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class MonitorStatus(enum.StrEnum):
    """run.json monitors.<name>.status."""

    OK = "ok"
    SKIPPED = "skipped"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"


@dataclass
class RunMeta:
    """One run.json. Optional keys a file may lack are None or empty here and not written."""

    variant: str
    workload: str
    start_utc: str
    status: Status = Status.RUNNING
    schema_version: int = SCHEMA_VERSION
    stallbench_version: str = ""
    iteration: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    end_utc: str | None = None
    host: str | None = None
    kernel: dict[str, str] = field(default_factory=dict)      # release, version, machine, cmdline
    pid: int | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    rusage: dict[str, Any] | None = None                      # user_s, system_s, elapsed_s, ...
    machine_load: dict[str, Any] | None = None                # machineload.between()
    samples: dict[str, int] = field(default_factory=dict)     # rows in ops.parquet per op
    monitors: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    ops_declared: list[str] = field(default_factory=list)
    warmup_s: float | None = None
    # true: no warm-up was stated; warmup_s is the least left out, the start-up transient
    # beyond it is found from the run's blocks (analysis/transient.py)
    warmup_found: bool | None = None
    duration_planned_s: float | None = None
    duration_s: float | None = None
    counted: dict[str, int] = field(default_factory=dict)     # the workers' own counters
    workload_summary: dict[str, Any] = field(default_factory=dict)
    interval_sampled: bool | None = None                      # imports of interval samples
    imported: bool | None = None
    histogram_derived: dict[str, Any] | None = None           # fio json+/histogram-log imports
    boot_id: str | None = None                                # runs pulled by a fleet run
    fleet: dict[str, Any] | None = None
    duet: dict[str, Any] | None = None                        # runner.py duet rounds: pairing
    plan: dict[str, Any] | None = None        # plan/record.py: hash, file, settings, commit
    round_order: dict[str, Any] | None = None  # runner.py: seed, round, position, of
    extra: dict[str, Any] = field(default_factory=dict)       # keys this version does not know

    def __post_init__(self) -> None:
        # not a field: the run.json keys in their order (as read, then as first set)
        object.__setattr__(self, "_keys", [])

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "status":
            value = Status(value)
        object.__setattr__(self, name, value)
        keys = self.__dict__.get("_keys")
        if keys is not None and name in _FIELDS and name not in keys:
            keys.append(name)

    @classmethod
    def started(cls, **values: Any) -> RunMeta:
        """The record a run writes as it starts: every key of _START_KEYS, null where unknown."""
        meta = cls(**values)
        meta._keys[:] = _START_KEYS
        return meta

    @classmethod
    def from_json(cls, data: Any, where: str = RUN_FILE) -> RunMeta:
        """A parsed run.json -> RunMeta; RunDataError (naming `where`) when it is malformed or
        from a newer schema."""
        if not isinstance(data, dict):
            raise RunDataError(f"{where}: malformed (not a JSON object)")
        version = data.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise RunDataError(f"{where}: malformed (no schema_version)")
        if version > SCHEMA_VERSION:
            raise RunDataError(
                f"{where}: written by a newer stallbench (schema {version}, this one reads "
                f"{SCHEMA_VERSION}); upgrade stallbench")
        for key in _REQUIRED:
            if key not in data:
                raise RunDataError(f"{where}: malformed (no {key})")
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if key not in _FIELDS:
                extra[key] = value
                continue
            types = _TYPES[key]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise RunDataError(f"{where}: malformed ({key} is {_json_type(value)}, "
                                   f"expected {' or '.join(_json_type(t) for t in types)})")
            known[key] = value
        try:
            known["status"] = Status(known["status"])
        except ValueError:
            raise RunDataError(f"{where}: malformed (status {known['status']!r} is none of "
                               f"{', '.join(s.value for s in Status)})") from None
        meta = cls(**known, extra=extra)
        meta._keys[:] = data
        return meta

    def to_json(self) -> dict[str, Any]:
        """The run.json object: keys in the order read or set, then keys given values since."""
        out: dict[str, Any] = {}
        for key in self._keys:
            if key in _FIELDS:
                out[key] = getattr(self, key)
            elif key in self.extra:
                out[key] = self.extra[key]
        for name in _FIELDS:
            if name not in out and not _absent(getattr(self, name)):
                out[name] = getattr(self, name)
        for key, value in self.extra.items():
            out.setdefault(key, value)
        out["status"] = self.status.value
        return out

    def update(self, values: Mapping[str, Any]) -> None:
        """Set keys by their run.json names; names this version does not know go to extra."""
        for key, value in values.items():
            if key in _FIELDS:
                setattr(self, key, value)
            else:
                self.extra[key] = value
                if key not in self._keys:
                    self._keys.append(key)


_FIELDS = tuple(f.name for f in dataclasses.fields(RunMeta) if f.name != "extra")
_REQUIRED = ("schema_version", "stallbench_version", "variant", "workload", "status",
             "start_utc")
# what RunWriter writes when a run starts, in this order (the order of every run.json so far)
_START_KEYS = ("schema_version", "stallbench_version", "variant", "workload", "iteration",
               "params", "status", "reason", "start_utc", "end_utc", "host", "kernel", "pid",
               "environment", "rusage", "samples", "monitors", "notes")
_NUMBER = (int, float)
_NONE = type(None)
_TYPES: dict[str, tuple[type, ...]] = {
    "schema_version": (int,), "stallbench_version": (str,), "variant": (str,),
    "workload": (str,), "iteration": (int,), "params": (dict,), "status": (str,),
    "reason": (str, _NONE), "start_utc": (str,), "end_utc": (str, _NONE), "host": (str, _NONE),
    "kernel": (dict,), "pid": (int, _NONE), "environment": (dict,), "rusage": (dict, _NONE),
    "machine_load": (dict, _NONE), "samples": (dict,), "monitors": (dict,), "notes": (list,),
    "ops_declared": (list,),
    "warmup_s": (*_NUMBER, _NONE), "warmup_found": (bool, _NONE),
    "duration_planned_s": (*_NUMBER, _NONE),
    "duration_s": (*_NUMBER, _NONE), "counted": (dict,), "workload_summary": (dict,),
    "interval_sampled": (bool,), "imported": (bool,), "histogram_derived": (dict, _NONE),
    "boot_id": (str, _NONE), "fleet": (dict, _NONE), "duet": (dict, _NONE),
    "plan": (dict, _NONE), "round_order": (dict, _NONE),
}
assert set(_TYPES) == set(_FIELDS), "every RunMeta field needs its JSON types"


def run_end_s(workload_summary: dict[str, Any] | None, duration_s: float | None) -> float:
    """Where a run ended on its own clock (the clock starts before the monitors; the
    workers, and duration_s with them, a little later): 0 when no length is recorded."""
    if not duration_s:
        return 0.0
    return ((workload_summary or {}).get("workers_started_ns") or 0) / 1e9 + float(duration_s)


def _absent(value: Any) -> bool:
    return value is None or (isinstance(value, (dict, list)) and not value)


def _json_type(value: Any) -> str:
    kind = value if isinstance(value, type) else type(value)
    names = {dict: "an object", list: "an array", str: "a string", int: "an integer",
             float: "a number", bool: "a boolean", _NONE: "null"}
    return names.get(kind, kind.__name__)

def read_meta(path: Path) -> RunMeta:
    """A run.json file -> RunMeta; RunDataError (one line naming the file) when it is missing,
    unreadable, malformed or from a newer schema."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise RunDataError(f"{path.parent}: not a run directory (no {RUN_FILE})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunDataError(f"{path}: malformed JSON ({exc})") from exc
    return RunMeta.from_json(data, str(path))


def write_meta(path: Path, meta: RunMeta) -> None:
    """Write a run.json atomically."""
    write_json_atomic(path, meta.to_json())
