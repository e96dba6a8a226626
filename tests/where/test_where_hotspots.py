"""The on-CPU side of the where section, pure: the function whose share of a role's samples grew
most, its caller, the line and where it goes, and perf stat's counts per op of a role, against
values computed by hand."""

from __future__ import annotations

import pytest

from stallbench.analysis.where.growth import TailChange
from stallbench.analysis.where.hotspots import (
    after_their_ops,
    hotspot,
    leaf_counts,
    naming_hint,
    profile_lines,
    role_profile,
)
from stallbench.analysis.where.perfstat import role_counters, role_counts
from stallbench.analysis.where.section import Explanation

pytestmark = pytest.mark.pure

BASE = {"read;vfs_read;filemap_read;copy": 30, "read;vfs_read;filemap_read;xas_load": 50,
        "main;loop": 20}
# 100 samples: copy 60 (45 from filemap_read, 15 from splice), xas_load 20, loop 20
HERE = {"read;vfs_read;filemap_read;copy": 45, "splice;copy": 15,
        "read;vfs_read;filemap_read;xas_load": 20, "main;loop": 20}


def test_the_function_whose_share_grew_most_with_its_most_frequent_caller() -> None:
    spot = hotspot(BASE, HERE)
    assert spot is not None
    # copy: 60 of 100 here, 30 of 100 in the baseline; called from filemap_read 45 times,
    # from splice 15 times
    assert (spot.function, spot.share, spot.base_share, spot.caller) == (
        "copy", 0.60, 0.30, "filemap_read")
    assert (spot.samples, spot.base_samples, spot.role_samples, spot.base_role_samples) == (
        60, 30, 100, 100)
    assert leaf_counts(HERE) == {"copy": 60, "xas_load": 20, "loop": 20}


def test_a_small_or_unresolved_growth_is_not_named() -> None:
    # 3 points more: below MIN_SHARE_GROWTH
    assert hotspot({"a;x": 50, "a;y": 50}, {"a;x": 53, "a;y": 47}) is None
    # 30 points more, but from 10 samples a side: not MIN_Z standard errors (nor MIN_SAMPLES)
    assert hotspot({"a;x": 3, "a;y": 7}, {"a;x": 6, "a;y": 4}) is None
    # nothing to compare with
    assert hotspot({}, HERE) is None


def test_the_line_follows_the_ops_lines_and_says_if_real_where_undecided() -> None:
    profiles = {"reader": role_profile("reader", HERE, "cpu-clock")}
    profiles["reader"].hotspot = hotspot(BASE, HERE)
    roles = {"read": ["reader"], "wal": ["wal"], "scan": ["reader"]}
    changes = {"read": TailChange("p50", 0.69, True), "scan": TailChange("p99", 0.5, False),
               "wal": TailChange("p99", 2.0, True), "shrunk": TailChange("p99", 0.05, True)}
    lines = profile_lines("cand", changes, roles, profiles)
    assert [line.text for line in lines] == [
        "read: 60% of the reader workers' CPU samples in copy (30% in the baseline), from "
        "filemap_read",
        "scan (not decided): if real, 60% of the reader workers' CPU samples in copy (30% in "
        "the baseline), from filemap_read"]
    existing = [Explanation("cand", "read", "read p50 +69%: first"),
                Explanation("cand", "read", "read p50 +69%: second"),
                Explanation("cand", "wal", "wal p99 +200%: ..."),
                Explanation("cand", None, "cand: the longest ...")]
    merged = after_their_ops(existing, lines)
    assert [(e.op, e.text.split(":")[0]) for e in merged] == [
        ("read", "read p50 +69%"), ("read", "read p50 +69%"), ("read", "read"),
        ("wal", "wal p99 +200%"), ("scan", "scan (not decided)"), (None, "cand")]


def test_the_role_profile_lists_the_top_functions_with_their_callers() -> None:
    profile = role_profile("reader", HERE, "cycles")
    assert profile.samples == 100 and profile.event == "cycles"
    assert [(f.function, f.samples, f.share, f.caller) for f in profile.top] == [
        ("copy", 60, 0.6, "filemap_read"), ("loop", 20, 0.2, "main"),
        ("xas_load", 20, 0.2, "filemap_read")]


def test_naming_hint_only_where_a_side_ran_no_profile() -> None:
    assert naming_hint(["delay", "profile"], ["profile"]) is None
    assert naming_hint(["delay"], ["profile"]) == \
        "--monitors default,profile would name the function"


def test_perf_counts_per_op_of_each_role() -> None:
    run1 = role_counts(["task-clock", "cycles", "instructions", "cycles"],
                       [1000.0, 400.0, float("nan"), 100.0], ["reader", "reader", "reader", "wal"])
    run2 = role_counts(["task-clock", "cycles", "instructions"], [3000.0, 600.0, 1500.0],
                       ["reader", "reader", "other"])
    rows = {r.role: r for r in role_counters([run1, run2], {"reader": 10, "wal": 4})}
    # reader: task-clock 4000 ns over 10 ops, cycles 1000; instructions uncounted in run 1
    assert rows["reader"].counts == {"task-clock": 4000, "cycles": 1000}
    assert rows["reader"].per_op == {"task-clock": 400.0, "cycles": 100.0}
    assert rows["reader"].ipc is None
    assert rows["wal"].per_op == {"cycles": 25.0}
    assert rows["other"].ops == 0 and rows["other"].per_op == {}
    both = role_counters([{"r": {"cycles": 200, "instructions": 300}}], {"r": 2})[0]
    assert both.ipc == 1.5
