"""The workload interface. One module per workload in this package; see workloads/__init__.py.

A workload knows nothing about monitors or environments: it is given a RunContext (directory,
duration, child_setup to run in each child process, a ProcessSet to register its pids in) and
returns the operations it recorded as Arrow record batches in opsfile.OPS_SCHEMA.
"""

from __future__ import annotations

import abc
import argparse
import dataclasses
import difflib
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..core.errors import UsageError
from ..core.options import Field, add_arguments, build, fields_of
from ..results.runmeta import Status

if TYPE_CHECKING:
    import pyarrow as pa

    from ..core.context import RunContext
    from ..logformats.samples import Samples

# Called by the workload with live per-op progress: {op: (count_total, max_latency_ns_recent)}
ProgressFn = Callable[[dict[str, tuple[int, int]]], None]


@dataclass
class WorkloadResult:
    batches: Iterable[pa.RecordBatch]          # every operation (opsfile.OPS_SCHEMA), streamed
    counted: dict[str, int] = field(default_factory=dict)  # the workers' own count per op
    rusage: dict[str, float] = field(default_factory=dict)  # user_s, system_s, elapsed_s
    extra: dict[str, Any] = field(default_factory=dict)    # -> run.json["workload_summary"]
    status: Status = Status.COMPLETE           # or FAILED / INTERRUPTED
    reason: str | None = None


def logged_ops(samples: Samples, shift_ns: int) -> Iterable[pa.RecordBatch]:
    """The ops an external program logged (fio, pgbench, a traced command), shifted onto the
    run's clock, as WorkloadResult.batches streams them."""
    from ..results.opsfile import ops_batches  # pyarrow: only when the ops are written

    return ops_batches(samples.op_names, samples.chunks(shift_ns))


@dataclass
class NoOptions:
    """The Options of a workload that takes none."""


class Workload(abc.ABC):
    """Options: the workload's options dataclass (options.option per field), declared once at
    the top of its module: its flags, plan keys, defaults and checks come from it."""

    Options: ClassVar[type] = NoOptions
    options: Any                     # an Options instance, where params() is made from it
    name: ClassVar[str]
    ops: ClassVar[tuple[str, ...]]   # ops it can record: an op with no samples still shows
    help: ClassVar[str] = ""
    # seconds run first and left out of the statistics when the plan gives no warm-up
    default_warmup_s: ClassVar[float] = 0.0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("from_options")
        if isinstance(own, classmethod):
            build = own.__func__

            @functools.wraps(build)
            def checked(klass: type[Workload], options: dict[str, Any]) -> Workload:
                klass.check_option_names(options)
                return build(klass, options)

            cls.from_options = classmethod(checked)  # type: ignore[method-assign]

    @classmethod
    def option_fields(cls) -> tuple[Field, ...]:
        return fields_of(cls.Options)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Workload options for `stallbench run NAME`; dest names are the plan-file keys."""
        add_arguments(parser, cls.option_fields())

    @classmethod
    def option_names(cls) -> list[str]:
        """The option keys this workload takes."""
        return [f.name for f in cls.option_fields()]

    @classmethod
    def parse_options(cls, options: dict[str, Any]) -> Any:
        """The Options dataclass from {key: value} (None: the default); errors name the flag."""
        given = {k: v for k, v in options.items() if v is not None}
        return build(cls.Options, given, lambda f: f.option or f.name)

    @classmethod
    def check_option_names(cls, options: dict[str, Any]) -> None:
        """UsageError naming the first key that is not one of this workload's options (a
        misspelt option would otherwise run silently with its default)."""
        known = cls.option_names()
        for key in options:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise UsageError(f"{key!r} is not a {cls.name} option{hint}; {cls.name} takes: "
                                 f"{', '.join(known) or 'no options'}")

    @classmethod
    @abc.abstractmethod
    def from_options(cls, options: dict[str, Any]) -> Workload:
        """Validate options (from the command line, a plan file or the API); UsageError when
        bad. Every subclass's from_options first refuses keys it does not know."""

    def params(self) -> dict[str, Any]:
        """Every parameter, resolved, for run.json: by default the workload's resolved Options
        (`self.options`); a workload whose run.json keys differ from its options says so."""
        return dataclasses.asdict(self.options)

    def space_needed(self, memory_available: int) -> int:
        """Bytes the workload's files need in its directory (to size filesystems, check space)."""
        return 0

    def resolve(self, memory_available: int) -> None:
        """Fill defaults that depend on the memory available to the workload (limit or system)."""

    def default_size_flag(self) -> str | None:
        """The flag of a file size the user did not give, so that the workload chose it (from
        the memory available): a default that big is checked against free space and time."""
        return None

    @abc.abstractmethod
    def prepare(self, ctx: RunContext) -> None:
        """Create or reuse the workload's files in ctx.workdir (not timed)."""

    @abc.abstractmethod
    def run(self, ctx: RunContext, progress: ProgressFn) -> WorkloadResult:
        """Run for ctx.duration_s (or until ctx.stop is set) and return what was recorded."""


def whole(low: int, high: int) -> Callable[[Any, str], int]:
    """A parser of a whole-number option from `low` to `high` (digit strings too)."""
    def parse(value: Any, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise UsageError(f"{what} must be a whole number, got {value!r}")
        try:
            number = int(value)
        except ValueError:
            raise UsageError(f"{what} must be a whole number, got {value!r}") from None
        if not low <= number <= high:
            raise UsageError(f"{what} must be between {low} and {high}, got {number}")
        return number
    return parse
