"""The flags several commands share, declared once (--results, --workload, --metric, compare's
and check's sources, --sections/--brief, --percentiles), and what they name read back: the
results tree, a bundle opened, BASELINE and the CANDIDATEs resolved. What several commands print
the same way is printing.py's."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from ..compare.metrics import parse_metric
from ..core.errors import UsageError
from ..results.rundirs import RESULTS_HELP, default_results_dir

BASELINE_HELP = ("the variant the others are compared with: a name under RESULTS, or a path to "
                 "a variant or run directory (VARIANT@HOST: its runs on one host)")


class ExamplesFormatter(argparse.HelpFormatter):
    """argparse's help, wrapped as usual, with an epilog of examples kept line by line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


def parse_sections(text: str | None, brief: bool, fmt: str) -> tuple[str, ...]:
    """--sections LIST / --brief: the report's parts to show (report.SECTIONS)."""
    from ..report import BRIEF, SECTIONS

    if text is None and not brief:
        return SECTIONS
    if fmt == "json":
        raise UsageError("--brief and --sections shape the text, markdown and html reports; "
                         "the JSON holds every part (its `headline` is the headline)")
    if fmt == "email":
        raise UsageError("--brief and --sections shape the text, markdown and html reports; "
                         "the email has its own short parts (leave them out)")
    if brief:
        if text is not None:
            raise UsageError("give --brief or --sections, not both")
        return BRIEF
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in SECTIONS]
    if unknown or not names:
        raise UsageError(f"--sections {text!r}: name parts of the report, separated by commas, "
                         f"from {','.join(SECTIONS)}")
    return names


BUNDLE_HELP = "; or a bundle FILE.tar.gz (stallbench export RESULTS --format bundle)"


def add_results_argument(parser: argparse.ArgumentParser, bundles: bool = False) -> None:
    parser.add_argument("--results", type=Path, default=None,
                        help=RESULTS_HELP + (BUNDLE_HELP if bundles else ""))


def add_workload_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workload", help="pick one workload when a variant holds several")


def add_source_arguments(parser: argparse.ArgumentParser, bundles: bool = False) -> None:
    """--results and --workload: where the runs a command reads are (`bundles`: the command
    opens a bundle given as --results, bundle_opened)."""
    add_results_argument(parser, bundles)
    add_workload_argument(parser)


def add_metric_argument(parser: argparse.ArgumentParser, help_text: str,
                        required: bool = False) -> None:
    """--metric OP:STAT (repeatable), declared once for every command that takes it: each text
    is parsed as the command line is read (compare/metrics.py parse_metric), so the command
    gets Metric objects, and bad input is one line and exit 2 before anything else is done."""
    parser.add_argument("--metric", action="append", type=parse_metric, required=required,
                        metavar="OP:STAT", help=help_text)


@contextlib.contextmanager
def bundle_opened(args: argparse.Namespace) -> Iterator[None]:
    """--results naming a bundle (a .tar.gz from `export --format bundle`): opened in a
    temporary folder of its own for the command (results/bundle.py), removed after it."""
    from ..results.bundle import results_tree

    with results_tree(args.results) as tree:
        args.results = tree
        yield


def results_dir(args: argparse.Namespace) -> Path:
    return args.results if getattr(args, "results", None) else default_results_dir()


def parse_percentiles(text: str) -> tuple[float, ...]:
    """--percentiles '50,99,99.99' -> (50.0, 99.0, 99.99)."""
    from ..analysis.quantiles import parse_percents

    try:
        return parse_percents(text)
    except ValueError as exc:
        raise UsageError(f"--percentiles {text}: {exc}; give percentiles between 0 and 100 "
                         "separated by commas, e.g. 50,99,99.99") from None


def add_common(parser: argparse.ArgumentParser) -> None:
    """What compare and check share: the runs' sources, --noise, --pool-hosts."""
    from ..compare import DEFAULT_NOISE

    add_source_arguments(parser, bundles=True)
    parser.add_argument("--noise", default=f"{DEFAULT_NOISE:.0%}",
                        help="smallest change called better/worse (default %(default)s)")
    parser.add_argument("--pool-hosts", action="store_true",
                        help="pool a variant's runs from several hosts (default: per host, "
                             "as VARIANT@HOST)")


def resolve_all(args: argparse.Namespace, allow_incomplete: bool, split: bool = True):
    """BASELINE and the CANDIDATEs resolved (the problems said on stderr): (baseline,
    candidates)."""
    from ..fleet.labels import resolve_spec, split_hosts, variant_specs
    from ..results.runselect import prepare_summaries

    specs = [args.baseline, *args.candidates]
    prepare_summaries(variant_specs(specs, args.results), args.results)
    resolved = [resolve_spec(spec, args.results, args.workload, allow_incomplete)
                for spec in specs]
    resolved, notes = split_hosts(resolved, pool=args.pool_hosts, split=split)
    for item in resolved:
        for problem in item.problems:
            print(f"stallbench: {problem}", file=sys.stderr)
    for note in notes:
        print(f"stallbench: {note}", file=sys.stderr)
    return resolved[0], resolved[1:]
