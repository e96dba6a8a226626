"""Shell completion (bash, zsh, fish) and the man page, generated from the argparse parser, so
that they cannot drift from the command line: `scripts/gen-cli-docs.py` (or `make cli-docs`)
writes them into the package (src/stallbench/share/, package data: `stallbench completion
bash|zsh|fish` prints them; pyproject.toml's data-files also installs them under the prefix's
share/, where man and the shells look; `make demo`'s editable install gets them from
scripts/install-share.py), and tests/cli/test_cli_conventions.py checks that the files match the
parser."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..core.envvars import READ as ENVIRONMENT
from ..core.envvars import SET_FOR_BUILD
from ..core.errors import ExitCode
from ..core.version import __version__
from ..results.rundirs import RESULTS_DEFAULT, RESULTS_ENV

# the man page's EXIT STATUS: what each of core/errors.py's ExitCode means to a user
EXIT_STATUS = {
    ExitCode.OK: "success",
    ExitCode.FAILURE: "check found a regression (or a run failed)",
    ExitCode.USAGE: "bad input: usage, configuration, missing privilege or tool; one line on "
                    "stderr says what and how to fix it",
    ExitCode.UNDECIDED: "check cannot decide (git bisect run: skip)",
    ExitCode.INTERRUPTED: "interrupted",
}

# inside the package (importlib.resources.files("stallbench") / ...), and in the source tree
PACKAGE_FILES = {"bash": "share/bash-completion/completions/stallbench",
                 "zsh": "share/zsh/site-functions/_stallbench",
                 "fish": "share/fish/vendor_completions.d/stallbench.fish",
                 "man": "share/man/man1/stallbench.1"}
SHELLS = ("bash", "zsh", "fish")
FILES = {kind: f"src/stallbench/{path}" for kind, path in PACKAGE_FILES.items()}
VALUE_ACTIONS = (argparse._StoreAction, argparse._AppendAction)


@dataclass
class Option:
    flags: list[str]
    help: str
    takes_value: bool
    choices: list[str] | None
    path: bool
    metavar: str


@dataclass
class Command:
    words: list[str]            # [] for the top level, ["run", "randread"] for a workload
    help: str
    usage: str
    options: list[Option]
    positionals: list[tuple[str, str]]   # (metavar, help)
    subcommands: list[Command] = field(default_factory=list)

    @property
    def key(self) -> str:
        return " ".join(self.words) or "."


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if text == argparse.SUPPRESS:
        return ""
    try:
        text = text % {"default": action.default, "prog": "stallbench"}
    except (KeyError, TypeError, ValueError):
        pass
    return " ".join(text.split())


def describe(parser: argparse.ArgumentParser, words: list[str] | None = None,
             help_text: str = "") -> Command:
    words = words or []
    options, positionals, subs = [], [], []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: _help(a) for a in action._choices_actions}
            for name, sub in action.choices.items():
                subs.append(describe(sub, [*words, name], helps.get(name, "")))
            continue
        if action.option_strings:
            if isinstance(action, argparse._HelpAction):
                continue
            choices = [str(c) for c in action.choices] if action.choices else None
            metavar = action.metavar or (action.dest.upper() if action.dest else "VALUE")
            options.append(Option(list(action.option_strings), _help(action),
                                  isinstance(action, VALUE_ACTIONS), choices,
                                  action.type is Path, str(metavar)))
        else:
            positionals.append((str(action.metavar or action.dest), _help(action)))
    usage = " ".join(parser.format_usage().split()).removeprefix("usage: ")
    return Command(words, help_text or (parser.description or ""), usage, options, positionals,
                   subs)


def _walk(command: Command):
    yield command
    for sub in command.subcommands:
        yield from _walk(sub)


# -- bash ---------------------------------------------------------------------------------------

def bash(parser: argparse.ArgumentParser) -> str:
    root = describe(parser)
    subs, opts, cases_words, cases_files, cases_free = [], [], [], [], []
    for cmd in _walk(root):
        if cmd.subcommands:
            subs.append(f'        ["{cmd.key}"]="{" ".join(s.words[-1] for s in cmd.subcommands)}"')
        flags = " ".join(f for o in cmd.options for f in o.flags)
        opts.append(f'        ["{cmd.key}"]="{flags}"')
        for o in cmd.options:
            if not o.takes_value:
                continue
            pattern = "|".join(f'"{cmd.key}|{f}"' for f in o.flags)
            if o.choices:
                cases_words.append(f'        {pattern}) words="{" ".join(o.choices)}" ;;')
            elif o.path:
                cases_files.append(f'        {pattern}) COMPREPLY=($(compgen -f -- "$cur")); '
                                   'return ;;')
            else:
                cases_free.append(f"        {pattern}) COMPREPLY=(); return ;;")
    lines = [
        "# bash completion for stallbench (generated from its parser by scripts/gen-cli-docs.py;",
        "# do not edit). Install: copy to /usr/share/bash-completion/completions/stallbench",
        "# or put `source <(stallbench completion bash)` in ~/.bashrc.",
        "_stallbench_variants() {",
        f'    local results=${{{RESULTS_ENV}:-{RESULTS_DEFAULT}}} i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        [[ ${COMP_WORDS[i]} == --results ]] && results=${COMP_WORDS[i + 1]}',
        "    done",
        '    [[ -d $results ]] && (cd "$results" && compgen -d -- "$1")',
        "}",
        "",
        "_stallbench() {",
        "    local -A subs=(",
        *subs,
        "    )",
        "    local -A opts=(",
        *opts,
        "    )",
        '    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}',
        "    local path=. word words i",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        "        word=${COMP_WORDS[i]}",
        '        if [[ $word == -- ]]; then COMPREPLY=($(compgen -f -- "$cur")); return; fi',
        '        [[ $word == -* ]] && continue',
        '        if [[ " ${subs[$path]} " == *" $word "* ]]; then',
        '            if [[ $path == . ]]; then path=$word; else path="$path $word"; fi',
        "        fi",
        "    done",
        '    case "$path|$prev" in',
        *cases_words,
        *cases_files,
        *cases_free,

        "    esac",
        '    if [[ -n $words ]]; then COMPREPLY=($(compgen -W "$words" -- "$cur")); return; fi',
        "    if [[ $cur == -* ]]; then",
        '        COMPREPLY=($(compgen -W "${opts[$path]}" -- "$cur")); return',
        "    fi",
        '    if [[ -n ${subs[$path]} ]]; then',
        '        COMPREPLY=($(compgen -W "${subs[$path]}" -- "$cur")); return',
        "    fi",
        '    COMPREPLY=($(_stallbench_variants "$cur") $(compgen -f -- "$cur"))',
        "}",
        "complete -o filenames -F _stallbench stallbench",
        "",
    ]
    return "\n".join(lines)


# -- zsh ----------------------------------------------------------------------------------------

def _zq(text: str) -> str:
    """Text safe inside a single-quoted _arguments spec's [description]."""
    return re.sub(r"[\[\]:'\\`$]", lambda m: {"[": "(", "]": ")"}.get(m[0], " "), text)


def _zsh_function(cmd: Command) -> list[str]:
    name = "_stallbench" + "".join("_" + re.sub(r"\W", "_", w) for w in cmd.words)
    specs = []
    for o in cmd.options:
        action = ""
        if o.takes_value:
            if o.choices:
                action = f":{_zq(o.metavar)}:({' '.join(o.choices)})"
            elif o.path:
                action = f":{_zq(o.metavar)}:_files"
            else:
                action = f":{_zq(o.metavar)}: "
        star = "*" if any(f == "--sysctl" for f in o.flags) else ""
        if len(o.flags) > 1:
            exclusive = " ".join(o.flags)
            flags = "{" + ",".join(o.flags) + "}"
            specs.append(f"'({exclusive})'{star}{flags}'[{_zq(o.help)}]{action}'")
        else:
            specs.append(f"'{star}{o.flags[0]}[{_zq(o.help)}]{action}'")
    out = [f"{name}() {{", "    local curcontext=$curcontext state line",
           "    _arguments -C -s : \\"]
    if cmd.subcommands:
        described = " ".join(f'{s.words[-1]}\\:"{_zq(s.help)}"' for s in cmd.subcommands)
        specs += [f"'1:command:(({described}))'", "'*::arg:->args'"]
    else:
        specs.append("'*:argument:_files'")
    out += [f"        {spec} \\" for spec in specs[:-1]] + [f"        {specs[-1]}"]
    if cmd.subcommands:
        out += ["    case $state in", "    args)", "        case $words[1] in"]
        for sub in cmd.subcommands:
            sub_name = "_stallbench" + "".join("_" + re.sub(r"\W", "_", w) for w in sub.words)
            out.append(f"        {sub.words[-1]}) {sub_name} ;;")
        out += ["        esac ;;", "    esac"]
    out += ["}", ""]
    return out


def zsh(parser: argparse.ArgumentParser) -> str:
    lines = ["#compdef stallbench",
             "# zsh completion for stallbench (generated from its parser by",
             "# scripts/gen-cli-docs.py; do not edit). Install: put it in a directory on $fpath",
             "# (`stallbench completion zsh > DIR/_stallbench`).",
             ""]
    for cmd in reversed(list(_walk(describe(parser)))):
        lines += _zsh_function(cmd)
    lines += ['_stallbench "$@"', ""]
    return "\n".join(lines)


# -- fish ---------------------------------------------------------------------------------------

def _fq(text: str) -> str:
    """Text safe inside single quotes in fish."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def fish(parser: argparse.ArgumentParser) -> str:
    """fish completion: `__stallbench_path` follows the command words typed so far (as bash's
    path does), and every completion is conditioned on that path."""
    commands = list(_walk(describe(parser)))
    lines = ["# fish completion for stallbench (generated from its parser by",
             "# scripts/gen-cli-docs.py; do not edit). Install: copy to",
             "# ~/.config/fish/completions/stallbench.fish, or `stallbench completion fish | "
             "source`.",
             "function __stallbench_subs", "    switch $argv[1]"]
    for cmd in commands:
        if cmd.subcommands:
            lines += [f"        case '{_fq(cmd.key)}'",
                      "            printf '%s\\n' " + " ".join(
                          f"'{_fq(s.words[-1])}'" for s in cmd.subcommands)]
    lines += ["    end", "end", "",
              "function __stallbench_path",
              "    set -l path .",
              "    for word in (commandline -opc)[2..-1]",
              "        string match -q -- '-*' $word; and continue",
              "        if contains -- $word (__stallbench_subs $path)",
              "            if test $path = .; set path $word; else; set path \"$path $word\"; end",
              "        end",
              "    end",
              "    echo $path",
              "end", "",
              "function __stallbench_variants",
              f"    set -l results ${RESULTS_ENV}",
              f"    test -n \"$results\"; or set results {RESULTS_DEFAULT}",
              "    set -l words (commandline -opc)",
              "    set -l at (contains -i -- --results $words)",
              "    test -n \"$at\"; and set results $words[(math $at + 1)]",
              "    test -d $results; and for d in $results/*/; basename $d; end",
              "end", ""]
    for cmd in commands:
        when = f"-n 'test (__stallbench_path) = \"{_fq(cmd.key)}\"'"
        for sub in cmd.subcommands:
            lines.append(f"complete -c stallbench {when} -f -a '{_fq(sub.words[-1])}' "
                         f"-d '{_fq(sub.help[:80])}'")
        if not cmd.subcommands and cmd.positionals:
            lines.append(f"complete -c stallbench {when} -a '(__stallbench_variants)'")
        for o in cmd.options:
            names = []
            for flag in o.flags:
                if flag.startswith("--"):
                    names.append(f"-l '{_fq(flag[2:])}'")
                elif len(flag) == 2:
                    names.append(f"-s '{_fq(flag[1:])}'")
                else:
                    names.append(f"-o '{_fq(flag[1:])}'")
            value = ""
            if o.takes_value:
                value = (f" -x -a '{_fq(' '.join(o.choices))}'" if o.choices
                         else " -r -F" if o.path else " -x")
            lines.append(f"complete -c stallbench {when} {' '.join(names)}{value} "
                         f"-d '{_fq(o.help[:80])}'")
    return "\n".join(lines) + "\n"


# -- man ----------------------------------------------------------------------------------------

def _roff(text: str) -> str:
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line[:1] in ".'" else line for line in text.split("\n"))


def man(parser: argparse.ArgumentParser) -> str:
    root = describe(parser)
    out = [f'.TH STALLBENCH 1 "" "stallbench {__version__}" "User Commands"',
           ".nh", ".ad l", ".SH NAME",
           "stallbench \\- find I/O latency regressions and explain them",
           ".SH SYNOPSIS"]
    for cmd in root.subcommands:
        out += [".PP", f".B stallbench {cmd.words[-1]}", _roff(cmd.usage.split(" ", 2)[-1]
                                                           if cmd.usage.count(" ") > 1 else "")]
    out += [".SH DESCRIPTION", _roff(
        "stallbench runs real I/O workloads under two or more system configurations "
        "(variants), records the latency of every operation, compares the variants with "
        "confidence intervals and explains where the time went (memory reclaim, throttling, "
        "writeback, the block device) from kernel counters, pressure stall information, "
        "delay accounting, blocked-task stacks and tracepoints."),
        ".SH GLOBAL OPTIONS"]
    out += _man_options(root.options)
    out.append(".SH COMMANDS")
    for cmd in _walk(root):
        if not cmd.words:
            continue
        out += [f".SS {_roff(' '.join(cmd.words))}", _roff(cmd.help), ".PP",
                "Usage: " + _roff(cmd.usage)]
        for metavar, text in cmd.positionals:
            if text:
                out += [".TP", f".I {_roff(metavar)}", _roff(text)]
        out += _man_options([o for o in cmd.options
                             if o.flags[0] not in ("-q", "--quiet", "-v", "--verbose")])
    out.append(".SH EXIT STATUS")
    for code, meaning in EXIT_STATUS.items():
        out += [".TP", str(int(code)), _roff(meaning)]
    out.append(".SH ENVIRONMENT")
    for name, meaning in ENVIRONMENT.items():
        out += [".TP", f".B {name}", _roff(meaning)]
    out += [".PP", _roff("Set by stallbench for the command of bisect --git --build:")]
    for name, meaning in SET_FOR_BUILD.items():
        out += [".TP", f".B {name}", _roff(meaning)]
    out += [".SH FILES", ".TP", _roff("RESULTS/<variant>/<workload>/<iteration>/"),
            _roff("run.json, ops.parquet, monitors/*.parquet, stacks.folded"), ".TP",
            _roff("/run/stallbench/"), _roff("cleanup journals of running stallbench processes"),
            ".SH SEE ALSO", _roff("README.md, docs/architecture.md and docs/reliability.md "
                                  "in the stallbench source"), ""]
    return "\n".join(out)


def _man_options(options: list[Option]) -> list[str]:
    out = []
    for o in options:
        flags = ", ".join(f"\\fB{_roff(f)}\\fR" for f in o.flags)
        if o.takes_value:
            value = "{" + ",".join(o.choices) + "}" if o.choices else o.metavar
            flags += f" \\fI{_roff(value)}\\fR"
        out += [".TP", flags, _roff(o.help or "")]
    return out


def generate(parser: argparse.ArgumentParser) -> dict[str, str]:
    """{relative path: content} of every generated file."""
    return {FILES["bash"]: bash(parser), FILES["zsh"]: zsh(parser),
            FILES["fish"]: fish(parser), FILES["man"]: man(parser)}
