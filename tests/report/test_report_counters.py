"""The kernel counters table: units, 'new' and 'from ~0' instead of absurd ratios, hierarchical
duplicates dropped, inside 100 columns (hand-built rows as the where section holds them)."""

from __future__ import annotations

import pytest

from stallbench.analysis.where.counters import counters_comparison
from stallbench.analysis.where.section import WhereSection
from stallbench.monitors.counters import COUNTERS
from stallbench.report.text import chapter_lines
from stallbench.report.where import where_chapter

pytestmark = pytest.mark.pure


def _section() -> WhereSection:
    base = [{"vmstat.pgpgin": 185852, "vmstat.pgscan_file": 0, "vmstat.pgdeactivate": 2,
             "memcg.failcnt": 0, "memcg.pgpgout": 2543, "memcg.total_pgpgout": 2543,
             "vmstat.workingset_refault_file_with_a_long_name": 5}]
    cand = [{"vmstat.pgpgin": 454020, "vmstat.pgscan_file": 21059, "vmstat.pgdeactivate": 7805,
             "memcg.failcnt": 23167, "memcg.pgpgout": 24816, "memcg.total_pgpgout": 24816,
             "vmstat.workingset_refault_file_with_a_long_name": 500}]
    rows = counters_comparison(base, cand, 2.0, 2.0, 330_000, 28_000)
    rows = [{**r, "unit": COUNTERS.unit(r["counter"])} for r in rows]
    return WhereSection.from_json({"baseline": "unlimited",
                                   "variants": ["unlimited", "memcg-96M-long-name"],
                                   "counters": {"memcg-96M-long-name": rows}})


def test_counters_table_has_units_new_and_fits_100_columns():
    lines = chapter_lines(where_chapter(_section()))
    text = "\n".join(lines)
    assert max(len(line) for line in lines) <= 100
    row = {line.split()[0]: line.split() for line in lines if line.strip()}
    assert row["pgpgin"][1] == "KiB" and row["pgscan_file"][1] == "pages"
    assert row["memcg.failcnt"][1] == "events"
    assert row["pgscan_file"][-1] == "new" and row["memcg.failcnt"][-1] == "new"
    assert " ".join(row["pgdeactivate"][-2:]) == "from ~0"
    # per op: 454020 / 28000 against 185852 / 330000 is 28.8x
    assert row["pgpgin"][-1] == "29x"
    assert "memcg.total_pgpgout" not in text and "memcg.pgpgout" in text
