"""One declaration per setting, read by every surface that takes it.

A `Field` names a setting once: its plan-file key (also the argparse dest), its flag, the
parser that checks a value from either surface, its default, help and why it needs root;
`Requires`/`Excludes` say what goes with what. From a table of fields come the argparse
arguments (`add_arguments`), the values read from a parsed command line or a plan table
(`values_from_args`, `parse_values`), the relation and root checks (`check_relations`,
`root_reasons`) and the JSON Schema of the plan keys (`json_schema`).
Variant settings are declared in variant.py, run settings in plan.py and each workload's
options at the top of its module in workloads/.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .errors import UsageError

Parser = Callable[[Any, str], Any]      # (value as written, what to call it) -> checked value

VALUE, SWITCH, OFF_SWITCH, APPEND, REMAINDER = "value", "switch", "off-switch", "append", \
    "remainder"


class NestedUsageError(UsageError):
    """A parser's complaint about one entry of a table value (`sysctls`): `key` names it, so
    that the plan reader can point at the line of the entry instead of the table's."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Field:
    name: str                    # plan key and argparse dest
    parse: Parser | None = None  # None: taken as given
    default: Any = None          # the dataclass's default (already in parsed form)
    help: str = ""
    flag: str | None = ""        # "" -> --name-with-dashes; None -> a plan key only
    kind: str = VALUE            # VALUE, SWITCH (store_true), OFF_SWITCH, APPEND, REMAINDER
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    root: str | None = None      # what it needs root for, when it is set
    attr: str | None = None      # the attribute it fills, when not `name`
    cli_type: Callable[[str], Any] | None = None   # argparse type=, where argparse checks
    schema: Mapping[str, Any] = field(default_factory=dict)   # JSON Schema of the plan value
    show: Callable[[Any], str] | None = None    # the default as help shows it: "help (default)"

    @property
    def option(self) -> str | None:
        """The command-line flag, or None for a plan-only key."""
        if self.flag is None:
            return None
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def help_text(self) -> str:
        """The help, with the default in parentheses where `show` says how to write it."""
        if self.show is None:
            return self.help
        return f"{self.help} ({self.show(self.default)})"

    @property
    def target(self) -> str:
        return self.attr or self.name

    def is_set(self, value: Any) -> bool:
        """Whether a value of this setting was given (is neither None nor the default)."""
        return value is not None and value != self.default


def add_arguments(group: Any, fields: Iterable[Field]) -> None:
    """argparse arguments for the fields that have a flag. Values stay as written (strings),
    and defaults stay None, so that `values_from_args` parses them as a plan value would be."""
    for f in fields:
        if f.option is None:
            continue
        extra: dict[str, Any] = {"help": f.help_text}
        if f.metavar:
            extra["metavar"] = f.metavar
        if f.kind == SWITCH:
            group.add_argument(f.option, dest=f.name, action="store_true", default=None, **extra)
        elif f.kind == OFF_SWITCH:
            group.add_argument(f.option, dest=f.name, action="store_false", default=None,
                               **extra)
        elif f.kind == APPEND:
            group.add_argument(f.option, dest=f.name, action="append", default=None, **extra)
        elif f.kind == REMAINDER:
            group.add_argument(f.name, nargs=argparse.REMAINDER, **extra)
        else:
            group.add_argument(f.option, dest=f.name, choices=f.choices, type=f.cli_type,
                               default=None, **extra)


def values_from_args(args: argparse.Namespace, fields: Iterable[Field]) -> dict[str, Any]:
    """The fields given on the command line, as written: {name: value}."""
    given = {}
    for f in fields:
        value = getattr(args, f.name, None)
        if f.option is not None and value is not None and value != []:
            given[f.name] = value
    return given


def parse_values(fields: Iterable[Field], given: Mapping[str, Any],
                 what: Callable[[Field], str]) -> dict[str, Any]:
    """{target: checked value} for the given fields; UsageError naming `what` of the field."""
    by_name = {f.name: f for f in fields}
    result: dict[str, Any] = {}
    for key, value in given.items():
        f = by_name[key]
        result[f.target] = f.parse(value, what(f)) if f.parse is not None else value
    return result


T = TypeVar("T")


def option(default: Any = None, *, factory: Callable[[], Any] | None = None,
           **declaration: Any) -> Any:
    """A dataclass field that is also a setting: `declaration` holds the Field's attributes;
    `default` dataclasses.MISSING makes it a required field."""
    meta = {"option": declaration}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def fields_of(cls: type) -> tuple[Field, ...]:
    """The settings a dataclass declares with `option(...)`, defaults from the dataclass."""
    result = []
    for f in dataclasses.fields(cls):
        declaration = dict(f.metadata.get("option", {}))
        if "option" not in f.metadata:
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING \
            else None if f.default is dataclasses.MISSING else f.default
        name = declaration.pop("name", f.name)
        result.append(Field(name=name, default=default,
                            attr=None if name == f.name else f.name, **declaration))
    return tuple(result)


def build(cls: type[T], given: Mapping[str, Any], what: Callable[[Field], str],
          **fixed: Any) -> T:
    """An instance of the dataclass from the given settings, checked; the rest default."""
    return cls(**fixed, **parse_values(fields_of(cls), given, what))


def unknown_key(key: str, known: Iterable[str], table: str) -> str:
    """The message for a key no field declares, with the closest known key ('-' read as '_')."""
    known = sorted(known)
    close = difflib.get_close_matches(str(key).replace("-", "_"), known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f"; known keys: {', '.join(known)}"
    return f"unknown key {key!r} in {table}{hint}"


@dataclass(frozen=True)
class Requires:
    """`fields` only make sense when `needs` is set (cli: the message on the command line)."""
    fields: tuple[str, ...]
    needs: str
    cli: str | None = None


@dataclass(frozen=True)
class Excludes:
    """`first` and `second` cannot both be set; the message may name any field in braces."""
    first: str
    second: str
    message: str = "give either {first} or {second}, not both"


class _Names(dict):
    def __init__(self, name: Callable[[str], str], **known: str):
        super().__init__(known)
        self.name = name

    def __missing__(self, key: str) -> str:
        return self.name(key)


Fail = Callable[[str, str, bool], Exception]


def check_relations(values: Mapping[str, Any], fields: Iterable[Field],
                    relations: Iterable[Requires | Excludes], fail: Fail,
                    name: Callable[[str], str], cli: bool = False) -> None:
    """Raise fail(field, message, message_is_about_field) for the first relation the set
    values break; `name` turns a field name into what this surface calls it."""
    by_name = {f.name: f for f in fields}

    def is_set(key: str) -> bool:
        f = by_name[key]
        return f.is_set(values.get(f.target))

    for rule in relations:
        if isinstance(rule, Requires):
            if is_set(rule.needs):
                continue
            for key in rule.fields:
                if is_set(key):
                    if cli and rule.cli:
                        raise fail(key, rule.cli, False)
                    raise fail(key, f"only makes sense with {name(rule.needs)}", True)
        elif is_set(rule.first) and is_set(rule.second):
            names = _Names(name, first=name(rule.first), second=name(rule.second))
            raise fail(rule.second, rule.message.format_map(names), False)


def root_reasons(values: Mapping[str, Any], fields: Iterable[Field]) -> list[tuple[str, str]]:
    """(flag, why) for each set field that needs root."""
    return [(f.option or f.name, f.root) for f in fields
            if f.root and f.is_set(values.get(f.target))]


def json_schema(fields: Iterable[Field]) -> dict[str, Any]:
    """{key: JSON Schema} of the plan keys of these fields."""
    return {f.name: dict(f.schema) for f in fields}
