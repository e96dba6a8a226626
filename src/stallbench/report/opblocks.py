"""Each op's distribution (log2 bands side by side, the shift between them) and its stalls over
time (the longest time without a completed op, the stall episodes) in the table model of
tables.py, built once for every format."""

from __future__ import annotations

from ..analysis.display import format_ns
from ..analysis.summary import RESPONSE_SUFFIX
from ..compare.model import Comparison, OpComparison
from ..compare.stalltimeline import StallSummary
from .tables import LEFT, Cell, Column, Section, Table, cells
from .wording import band_label, shift_sentence

MAX_EPISODES = 5
_BAND_NAME_WIDTH = 20   # "512 µs – 1 ms" and the like

# a variant's stalls: a sentence in text, a row in markup; columns without a cell are left out
_STALL_COLUMNS = (
    Column("variant", gap=2),
    Column("longest without a completed op", lead=": longest time without a completed op "),
    Column("at", lead=" at "),
    Column("iteration", lead=" (iteration ", tail=")"),
    Column("slow interval runs", lead="; "),
    Column("slow: max above", lead=" interval run(s) with max > "),
    Column("starved interval runs", lead="; ",
           tail=" run(s) of intervals with no op while others ran"),
    Column("starved workers", lead="; "),
)
# a variant's episodes, under its row in text; markup names the variant in the first title
_EPISODE_COLUMNS = [Column("iteration", lead=" iteration "), Column("at", lead=" at "),
                    Column("for", lead=" for "), Column("worst", lead=", worst ")]


def distribution_sections(comparison: Comparison, width: int = 100) -> list[Section]:
    """Each op's distribution, in the comparison's order of ops."""
    return [s for op in comparison.ops for s in _distribution(op, comparison, width)]


def stalls_sections(comparison: Comparison) -> list[Section]:
    """Each op's stalls over time, in the comparison's order of ops."""
    return [s for op in comparison.ops for s in _stalls(op, comparison)]


def _distribution(op: OpComparison, comparison: Comparison, width: int) -> list[Section]:
    """The op's share of ops per log2 band, a column per variant (a bar each on a page of
    `width`), after each candidate's shift between bands."""
    labels = comparison.labels
    shares = [op.band_shares[label] for label in labels]
    used = [band for band in range(len(shares[0])) if any(row[band] > 0 for row in shares)]
    if not used:
        return []
    shifts = []
    for cand_label in comparison.candidates:
        shift = op.shift[cand_label]
        sentence = shift_sentence(shift, op.op.removesuffix(RESPONSE_SUFFIX))
        if sentence:
            shifts.append(cells(cand_label, sentence))
        elif shift:
            shifts.append(cells(cand_label, f"{shift.moved:.1%} of ops changed band"))
    column = (width - _BAND_NAME_WIDTH - 2) // len(labels)
    bands = Table([Column("latency", LEFT, _BAND_NAME_WIDTH, 2),
                   *(Column(label, LEFT, column - 1, title_width=column - 2,
                            bar=max(column - 10, 4)) for label in labels)],
                  [[Cell(f"{band_label(band)} – {band_label(band + 1)}"),
                    *(Cell(f"{row[band]:.1%}", share=row[band]) for row in shares)]
                   for band in range(used[0], used[-1] + 1)])
    shift_table = Table([Column("variant", gap=2), Column("shift", lead=": ")], shifts,
                        sentences=True)
    return [Section(f"{op.op} — distribution (log2 bands, share of ops)",
                    [shift_table, bands] if shifts else [bands], level=3)]


def _stalls(op: OpComparison, comparison: Comparison) -> list[Section]:
    """The op's stalls over time: per variant its longest time without a completed op, its runs
    of slow and of starved intervals and starved workers, then its first episodes."""
    if not any(op.stats[label].samples for label in comparison.labels):
        return []
    tables: list[Table] = []
    waiting: list[list[Cell]] = []   # variants' rows not yet in a table
    for label in comparison.labels:
        summary = op.stalls[label]
        if op.stats[label].samples == 0 and not summary.episodes:
            continue
        waiting.append(_stall_row(label, summary))
        if summary.episodes:
            tables += [_stall_table(waiting), _episode_table(label, summary.episodes)]
            waiting = []
    if waiting:
        tables.append(_stall_table(waiting))
    if not tables:
        return []
    interval = format_ns(op.stalls[comparison.baseline].interval_ns)
    title = f"{op.op} — stalls over time ({interval} intervals)"
    if not any(op.stalls[label].episodes for label in comparison.labels):
        title += ": no stall episodes"
    return [Section(title, tables, level=3)]


def _stall_row(label: str, summary: StallSummary) -> list[Cell]:
    longest = summary.longest_stall
    slow = [e for e in summary.episodes if e["kind"] == "slow"]
    starved = [e for e in summary.episodes if e["kind"] == "starved"]
    starved_workers = "; ".join(
        f"iteration {w['iteration']}: starved worker(s) " + ", ".join(
            f"{name} ({w['counts'][name]} ops)" for name in w["starved"]) +
        f" vs median {w['median']}" for w in summary.workers if w["starved"])
    return cells(label, format_ns(longest["duration_ns"]), f"{longest['start_ns'] / 1e9:.1f} s",
                 str(longest["iteration"]), str(len(slow)) if slow else "",
                 format_ns(summary.threshold_ns) if slow else "",
                 str(len(starved)) if starved else "", starved_workers)


def _stall_table(rows: list[list[Cell]]) -> Table:
    shown = [i for i in range(len(_STALL_COLUMNS)) if any(row[i].text for row in rows)]
    return Table([_STALL_COLUMNS[i] for i in shown], [[row[i] for i in shown] for row in rows],
                 sentences=True)


def _episode_table(label: str, episodes: list[dict]) -> Table:
    rows = [cells(e["kind"], str(e["iteration"]), f"{e['start_ns'] / 1e9:.1f} s",
                  f"{e['duration_ns'] / 1e9:.1f} s",
                  format_ns(e["worst_ns"]) if e["worst_ns"] else "")
            for e in episodes[:MAX_EPISODES]]
    if len(episodes) > MAX_EPISODES:
        rows.append(cells(f"… and {len(episodes) - MAX_EPISODES} more episodes", "", "", "", ""))
    return Table([Column(f"{label}: episode", LEFT, 8, 4), *_EPISODE_COLUMNS], rows,
                 sentences=True)
