"""A report to mail to a list or paste into a bug tracker (`compare --format email`, `series
--format email`, `bisect --format email`): plain ASCII text, no line longer than 72 columns, no
colour and no box characters, the subject line first. After 0-day/LKP's regression mails: the
headline and its why lines, the op tables that decided (MMTests-style: baseline, candidate,
change, interval), the environment differences, the kernels, and `To reproduce:` with the
exact commands, to be pasted as they are into a shell in an empty directory.

As the other formats, it lays out what is already built: the headline's and the op tables'
Sections (headline.py, tables.py), the environment lines (environment.py), the series'
sections (series.py) and what each variant's runs recorded (compare/provenance.py). It chooses
which of them a short mail holds and computes no number.
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..analysis.intervals import DIRECTED, Change, Verdict
from ..compare.provenance import KernelIdentity, Provenance, RecordedPlan, provenance_of
from ..core import tomlwrite
from ..core.version import __version__
from .environment import render_lines as environment_lines
from .headline import Call, calls, headline_sections
from .tables import RIGHT, Cell, Column, Section, Table, op_sections, variants_section
from .wording import format_interval, format_percent, stat_cell

if TYPE_CHECKING:
    from ..compare.model import Comparison
    from ..compare.seriesmodel import Series, SeriesChange

WIDTH = 72
HASH_SHOWN = 16             # hex digits of a sha256 shown (the bundle's run.json have them all)
_DECIDING = (*DIRECTED, Verdict.SAME, Verdict.UNCLEAR, Verdict.PACED)
# what plain ASCII says for the typography of the other reports
_ASCII = {"µ": "u", "−": "-", "–": "-", "—": "-", "…": "...", "≥": ">=", "≤": "<=",
          "×": "x", "±": "+/-", "→": "->", "√": "sqrt ", "»": ">>", "≈": "~", "·": "*",
          "‰": "o/oo", "²": "^2", "χ": "chi", "’": "'", "“": '"', "”": '"', " ": " "}
RESULTS_DIR = "results"     # where the printed commands put the runs


def ascii_text(text: str) -> str:
    out = "".join(_ASCII.get(ch, ch) for ch in text)
    return out.encode("ascii", "replace").decode("ascii")


def wrap(text: str, indent: str = "", more: str = "  ", width: int = WIDTH) -> list[str]:
    """Lines of at most `width`, later ones indented `more` further; never broken at a hyphen."""
    return textwrap.wrap(ascii_text(text), width, initial_indent=indent,
                         subsequent_indent=indent + more, break_on_hyphens=False,
                         break_long_words=True) or [""]


def command_lines(argv: list[str], width: int = WIDTH) -> list[str]:
    """A shell command as lines a shell reads as one: broken between words with a trailing
    backslash, each line within `width` (a single word longer than that stays whole)."""
    words = [shlex.quote(ascii_text(str(a))) for a in argv]
    lines, line = [], ""
    for word in words:
        if line and len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = "  " + word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line]


# -- the table model as 72-column lines ---------------------------------------------------------

def table_lines(table: Table, width: int = WIDTH) -> list[str]:
    """Columns as wide as their widest cell (titles whole), two spaces apart, one where two do
    not fit. Where the rows are still wider than the page, the widest column leaves the row
    and goes under it, four spaces in (its title left out); where even that does not fit,
    each row is one wrapped line of its cells."""
    texts = [[ascii_text(c.text + (f"  {c.flag}" if c.flag else "")) for c in row]
             for row in table.rows]
    header = [ascii_text(c.title) for c in table.columns]
    columns = list(range(len(table.columns)))
    widths = [max([len(header[i]), *(len(r[i]) for r in texts)]) for i in columns]

    def fits(shown: list[int], gap: int) -> bool:
        return 2 + sum(widths[i] for i in shown) + gap * (len(shown) - 1) <= width

    under = None
    gap = next((g for g in (2, 1) if fits(columns, g)), None)
    if gap is None:
        under = max(columns, key=lambda i: max((len(r[i]) for r in texts), default=0))
        columns = [i for i in columns if i != under]
        gap = next((g for g in (2, 1) if fits(columns, g)), None)
    if gap is None:
        return [line for r in texts
                for line in wrap("  ".join(cell for cell in r if cell), "  ", "    ")]

    def line(cells_: list[str]) -> str:
        parts = [cells_[i].rjust(widths[i]) if table.columns[i].align == RIGHT
                 else cells_[i].ljust(widths[i]) for i in columns]
        return ("  " + (" " * gap).join(parts)).rstrip()

    lines = [line(header)] if any(header[i] for i in columns) else []
    for r in texts:
        lines.append(line(r))
        if under is not None and r[under]:
            lines += wrap(r[under], " " * 4)
    return lines


def section_lines(section: Section, width: int = WIDTH) -> list[str]:
    """A section: its title, tables, preformatted lines (a command each, split to fit), the
    list and the notes wrapped under it; a blank line after."""
    title = section.title + (f" ({section.context})" if section.context else "")
    lines = wrap(title + (":" if section.items and not section.tables else ""))
    for table in section.tables:
        lines += sentence_lines(table) if table.sentences else table_lines(table, width)
    for text in section.preformatted:
        lines += command_lines(shlex.split(text)) if not text.startswith("#") else wrap(text)
    for text in (*section.items, *section.notes):
        lines += wrap(text, "  ")
    return [*lines, ""]


def sentence_lines(table: Table) -> list[str]:
    """A table of sentences: each row one wrapped line, each cell between its column's lead
    and tail (tables.py variants_section)."""
    indent = " " * table.columns[0].gap if table.columns else ""
    out = []
    for row in table.rows:
        text = "".join(column.lead + cell.text.ljust(column.width) + column.tail
                       for column, cell in zip(table.columns, row, strict=True) if cell.text)
        out += wrap(text, indent)
    return out


# -- the subject ---------------------------------------------------------------------------------

def subject_line(text: str, width: int = WIDTH) -> list[str]:
    """'Subject: ...' folded as mail headers fold (RFC 5322: a continuation line starts with
    a space), each line within `width`."""
    return textwrap.wrap("Subject: " + ascii_text(text), width, subsequent_indent=" ",
                         break_on_hyphens=False)


def tag(verdict: str, flag: str = "") -> str:
    """The subject's first word: a regression (worse, or an op that starved), an improvement,
    fewer ops that no interval decided, or nothing called."""
    if verdict == Verdict.WORSE or flag == "STARVED":
        return "[REGRESSION]"
    if verdict == Verdict.BETTER:
        return "[IMPROVEMENT]"
    if flag:
        return "[UNDECIDED]"
    return "[NO CHANGE CALLED]"


def change_words(change: Change, stat_label: str, op: str) -> str:
    """'read p50 +69.4% [+66.4%, +72.5%]' (the interval where one is shown)."""
    interval = format_interval(change)
    return f"{op} {stat_label} {format_percent(change.change)}" + \
        (f" {interval}" if interval else "")


def _kernel_name(kernel: KernelIdentity) -> str | None:
    if not kernel.release:
        return None
    return kernel.release + (f"+{kernel.commit[:7]}" if kernel.commit else "")


def side_names(baseline: Provenance | None, candidate: Provenance | None, base_label: str,
               cand_label: str) -> str:
    """'6.1.192 -> 6.1.192+abc1234' where the kernels differ, else the variants' labels."""
    names = [_kernel_name(p.kernel) if p else None for p in (baseline, candidate)]
    if all(names) and names[0] != names[1]:
        return f"{names[0]} -> {names[1]}"
    return f"{base_label} -> {cand_label}"


def _subject(comparison: Comparison, lead: str | None) -> str:
    """From the first candidate with a regression (else an improvement, else the first): its
    strongest call, the two sides, the workload and the runs."""
    runs = {v.label: len(v.runs) for v in comparison.variants}
    prov = {v.label: v.provenance for v in comparison.variants}
    found: list[tuple[str, Call]] = [(cand, c) for cand in comparison.candidates
                                     for c in calls(comparison, cand)[:1]]
    order = {Verdict.WORSE: 0, Verdict.BETTER: 1}
    found.sort(key=lambda item: (0 if item[1].flag == "STARVED" else
                                 order.get(item[1].change.verdict, 2)))
    cand = found[0][0] if found else comparison.candidates[0]
    sides = side_names(prov.get(comparison.baseline), prov.get(cand), comparison.baseline, cand)
    more = len(comparison.candidates) - 1
    tail = (f" ({comparison.workload}, {runs[comparison.baseline]}+{runs[cand]} runs"
            + (f"; {more} more candidate(s)" if more else "") + ")")
    if found:
        call = found[0][1]
        what = change_words(call.change, call.stat.label, call.op.op) + \
            (f" {call.flag}" if call.flag else "")
        first = tag(call.change.verdict, call.flag)
    else:
        first, what = tag(""), ""
    words = [w for w in (lead, what) if w]
    return f"{first} " + "".join(f"{w}: " for w in words) + f"{sides}{tail}"


# -- the parts of a comparison's mail ------------------------------------------------------------

def _deciding_sections(comparison: Comparison) -> tuple[list[Section], list[str]]:
    """Per candidate, the table of each op with a call, its rows those that decide (and the
    samples); the ops no candidate has a call of, named."""
    out = []
    labels = {stat.label: stat.key for stat in comparison.stats}
    called = {cand: {c.op.op for c in calls(comparison, cand)} for cand in comparison.candidates}
    quiet = [op.op for op in comparison.ops if not any(op.op in ops for ops in called.values())]
    for cand in comparison.candidates:
        for op in comparison.ops:
            if op.op not in called[cand]:
                continue
            section = next(s for s in op_sections(op, comparison) if s.context.startswith(
                f"{cand} vs "))
            changes = op.changes[cand]
            for table in section.tables:
                table.rows = [row for i, row in enumerate(table.rows) if i == 0 or (
                    (change := changes.get(labels.get(row[0].text, ""))) is not None
                    and change.verdict in _DECIDING)]
            out.append(Section(section.title, section.tables, [], context=section.context))
    return out, quiet


def caveat_words(comparison: Comparison) -> list[str]:
    """The loud words of the comparison's notes ('MACHINE BUSIER', 'NOT STATIONARY'): a mail
    names them, the full report says them whole."""
    words = [note.split(":", 1)[0] for note in comparison.notes
             if ":" in note and note.split(":", 1)[0].isupper()]
    if comparison.level_shifts:
        words.append(f"NOT STATIONARY ({len(comparison.level_shifts)} run(s) mix two regimes)")
    return list(dict.fromkeys(words))


def _headline_lines(comparison: Comparison) -> list[str]:
    lines = []
    for section in headline_sections(comparison):
        lines += section_lines(section)
    return lines


def kernel_lines(provenances: Iterable[tuple[str, Provenance | None]]) -> list[str]:
    """One entry per variant: release, the kernel file given with its sha256, a build's
    commit, the config's hash."""
    provenances = list(provenances)
    versions = sorted({v for _, p in provenances if p for v in p.versions})
    lines = ["Kernels" + (f" (runs recorded by stallbench {', '.join(versions)})"
                          if versions else "") + ":"]
    for label, prov in provenances:
        if prov is None or not prov.kernel.release:
            lines += wrap(f"{label}: not recorded", "  ")
            continue
        k = prov.kernel
        facts = [k.release + (" (under QEMU)" if k.guest else "")]
        if k.file:
            facts.append(f"{k.file} sha256 {k.sha256[:HASH_SHOWN] if k.sha256 else '?'}")
        if k.commit:
            facts.append(f"commit {k.commit[:12]}")
        if k.config_sha256:
            facts.append(f"config sha256 {k.config_sha256[:HASH_SHOWN]}")
        if prov.kernels_differ:
            facts.append("its runs ran other kernels too")
        lines += wrap(f"{label}: " + ", ".join(facts), "  ", "    ")
    return [*lines, ""]


def reproduce_lines(provenances: list[Provenance], command: list[str]) -> list[str]:
    """`To reproduce:` the recorded plans, each written out with a here-document, each run
    into ./results, then `command`; or why it cannot be given (runs recorded without their
    plan's text)."""
    lines = ["To reproduce:", ""]
    missing = [p for p in provenances if p.plan_texts_missing]
    if missing:
        versions = ", ".join(sorted({v for p in missing for v in p.versions})) or "?"
        lines += wrap(f"(the runs of {', '.join(p.variant for p in missing)} were recorded "
                      f"by stallbench {versions} without the text of their plan, so the "
                      "commands cannot be given: record them again with stallbench 0.6.0 or "
                      "later)")
        return [*lines, ""]
    plans: list[RecordedPlan] = list(dict.fromkeys(plan for p in provenances for plan in p.plans))
    # the same plan as written may have run as several (bisect's steps): printed once
    texts = list(dict.fromkeys(tomlwrite.dumps(table, WIDTH) if (table := plan.table())
                               is not None else None for plan in plans))
    for n, text in enumerate(texts, 1):
        name = "plan.toml" if len(texts) == 1 else f"plan-{n}.toml"
        if text is None:
            lines += wrap("(a plan as recorded is not TOML: see the runs' run.json)")
            continue
        lines += [f"cat > {name} <<'EOF'", *text.splitlines(), "EOF",
                  *command_lines(["stallbench", "run", "--plan", name, "--results",
                                  RESULTS_DIR])]
    lines += command_lines(command)
    return [*lines, ""]


def _lines(lines: list[str]) -> str:
    """The mail's text: each line without trailing spaces, then the signature ('-- ', its
    space kept as mail readers expect)."""
    return "\n".join([*(line.rstrip() for line in lines), "-- ",
                      f"stallbench {__version__}"]) + "\n"


def render(comparison: Comparison, answer: list[str] | None = None,
           subject_lead: str | None = None) -> str:
    """The comparison as a mail; `answer`: lines that come first (bisect's answer),
    `subject_lead`: words before the subject ('first bad: r3')."""
    prov = [(v.label, v.provenance) for v in comparison.variants]
    lines = [*subject_line(_subject(comparison, subject_lead)), ""]
    for text in answer or []:
        lines += wrap(text)
    if answer:
        lines.append("")
    lines += section_lines(variants_section(comparison))
    lines += _headline_lines(comparison)
    tables, quiet = _deciding_sections(comparison)
    for section in tables:
        lines += section_lines(section)
    caveats = caveat_words(comparison)
    if caveats:
        lines += wrap("What the verdicts rest on is qualified in the full report: "
                      + ", ".join(caveats) + ".")
        lines.append("")
    if quiet:
        lines += wrap("No change called for " + ", ".join(quiet) + "; every op's table, the "
                      "distributions and where the time went are in the full report "
                      "(stallbench compare, or the bundle: stallbench export RESULTS "
                      "--format bundle).")
        lines.append("")
    environment = [wrapped for line in environment_lines(comparison.environment, WIDTH)
                   for wrapped in wrap(line.strip(), " " * (len(line) - len(line.lstrip())))]
    if environment:
        lines += [*environment, ""]
    lines += kernel_lines(prov)
    names = [p.variant if p else label for label, p in prov]
    lines += reproduce_lines([p for _, p in prov if p is not None],
                             ["stallbench", "compare", *names, "--results", RESULTS_DIR])
    return _lines(lines)


# -- a series' mail ------------------------------------------------------------------------------

def _series_subject(series: Series) -> str:
    points = len(series.points)
    found = [c for c in series.change_points if c.new and c.verdict == Verdict.WORSE] or \
        [c for c in series.change_points if c.new and c.verdict == Verdict.BETTER]
    tail = f" ({series.workload} series, {points} points)"
    if not found:
        return f"[NO CHANGE POINT] {series.points[0].label} .. {series.points[-1].label}{tail}"
    c = found[0]
    prov = {p.label: provenance_of(p.runs) for p in series.points}
    sides = side_names(prov.get(c.before), prov.get(series.points[c.index].label), c.before,
                       series.points[c.index].label)
    return f"{tag(c.verdict)} {change_words(c.change, c.stat, c.op)}: {sides}{tail}"


def _metric_table(series: Series, change: SeriesChange) -> Section | None:
    """The statistic of a change point along the points: its value, its change against the
    baseline point with the interval ('*' where it excludes 0 is the series table's)."""
    op = next((o for o in series.ops if o.op == change.op), None)
    stat = next((s for s in series.stats if s.key == change.stat), None)
    if op is None or stat is None:
        return None
    from ..analysis.display import choose_time_unit

    unit = choose_time_unit([v for s in op.stats for v in s.values.values() if v])
    rows = []
    for i, point in enumerate(series.points):
        delta = (op.changes[i] or {}).get(stat.key)
        mark = ">>" if i == change.index else ""
        rows.append([Cell(point.label), Cell(stat_cell(op.stats[i], stat.key, unit)),
                     Cell(format_percent(delta.change) if delta else ""),
                     Cell(format_interval(delta) if delta else ""), Cell(mark)])
    unit_name = "ops/s" if stat.key == "rate" else unit.name
    columns = [Column("point"), Column(f"{stat.label} ({unit_name})", RIGHT),
               Column("change", RIGHT), Column("95% interval"), Column("")]
    base = series.points[series.baseline].label
    return Section(f"{change.op} {stat.label} along the points", [Table(columns, rows)],
                   [f"change against {base}; >> the change point"])


def render_series(series: Series) -> str:
    """A series as a mail: the subject from the first new regression (else improvement), the
    points, the change points, each changed statistic along the points, the kernels, and the
    commands that record the points again and print this."""
    from .series import change_point_section, header_lines

    lines = [*subject_line(_series_subject(series)), ""]
    for text in header_lines(series):
        lines += wrap(text, "", "    ")
    lines.append("")
    lines += section_lines(change_point_section(series))
    for change in series.change_points:
        section = _metric_table(series, change)
        if section is not None:
            lines += section_lines(section)
    provenances = [provenance_of(p.runs) for p in series.points]
    lines += kernel_lines([(p.label, prov) for p, prov in zip(series.points, provenances,
                                                               strict=True)])
    variants = list(dict.fromkeys(v for p in series.points for v in p.variants))
    lines += reproduce_lines(provenances, ["stallbench", "series", *variants, "--by", series.by,
                                           "--results", RESULTS_DIR])
    return _lines(lines)
