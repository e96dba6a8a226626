"""The where section's split of an op's time (issue 37), on hand-made numbers: traced stalls
intersected with the ops, block I/O split by the device's side, causes ranked by what grew,
and the stack the candidate's sleep moved to. Every expected value is computed by hand here."""

from __future__ import annotations

import numpy as np
import pytest

from stallbench.analysis.where import causes
from stallbench.analysis.where.device import not_served, tightness, verdict_words
from stallbench.analysis.where.section import DeviceVerdict
from stallbench.analysis.where.stacks import change_line, grown_sleep, sleeping_frame
from stallbench.analysis.where.tracedstalls import StallOverlap, merge

pytestmark = pytest.mark.pure

MS = 1_000_000


def test_stalls_count_only_the_part_inside_each_op_name():
    # worker 0: read ops [0,10) [20,30) ms, a write op [40,50) ms; stalls [5,25) and [45,60) ms
    stalls = {0: (np.array([5, 45]) * MS, np.array([20, 15]) * MS,
                  np.array(["memcg reclaim", "balance_dirty_pages"]))}
    overlap = StallOverlap(stalls)
    # ops in two batches: additive, in any order
    overlap.add_ops(np.array(["read"]), np.array([0]), np.array([20 * MS]), np.array([10 * MS]))
    overlap.add_ops(np.array(["write", "read"]), np.array([0, 0]), np.array([40, 0]) * MS,
                    np.array([10, 10]) * MS)
    got = overlap.by_op()
    # the reclaim [5,25): 5 ms of the first read, 5 ms of the second
    assert got["read"]["memcg reclaim"].in_ops_ns == 10 * MS
    assert got["read"]["memcg reclaim"].stalls == 1 and got["read"]["memcg reclaim"].stall_ns \
        == 20 * MS
    # the pause [45,60): 5 ms of the write; nothing of the reads
    assert got["write"]["balance_dirty_pages"].in_ops_ns == 5 * MS
    assert "balance_dirty_pages" not in got["read"]
    # runs add up
    twice = merge([got, got])
    assert twice["read"]["memcg reclaim"].in_ops_ns == 20 * MS


def test_block_io_beyond_the_device_and_in_pauses_is_not_the_device():
    # 61% in block I/O waits, the device can have served at most 44%: 17% is not the device
    beyond = not_served(0.61, 0.44, {"memcg reclaim": 0.26})
    assert abs(beyond.share - 0.17) < 1e-9 and beyond.where == ["memcg reclaim"]
    # a buffered writer: its bytes bound nothing, but 40% of its time was in traced pauses,
    # which the kernel counts as block I/O
    beyond = not_served(0.85, 1.0, {"balance_dirty_pages": 0.40})
    assert abs(beyond.share - 0.40) < 1e-9 and beyond.where == ["balance_dirty_pages"]
    # no bound and no pauses: nothing can be said
    assert not_served(0.5, None, {}).share is None
    # the kernel accounted the block I/O waits impossibly (None): the traced pauses timed
    # inside the op still say where the time went, and the verdict names them
    beyond = not_served(None, 0.3, {"balance_dirty_pages": 0.40, "memcg reclaim": 0.05})
    assert abs(beyond.share - 0.40) < 1e-9 and beyond.where == ["balance_dirty_pages"]
    assert verdict_words("write", None, None, None, beyond) == \
        "above the device: at least 40% in dirty throttling (balance_dirty_pages)"
    assert not_served(None, 0.3, {"memcg reclaim": 0.40}).share is None     # not block I/O


def test_the_bound_is_calibrated_by_the_baseline_only_where_it_waited_for_the_device():
    base = DeviceVerdict(286e3, None, None, None, from_device=0.96, blkio_share=0.55,
                         device_share=0.78, not_device=0.0)
    assert abs(tightness(base) - 0.55 / 0.78) < 1e-9
    # a page-cached baseline tells nothing about the device
    cached = DeviceVerdict(1e3, None, None, None, from_device=0.0, blkio_share=0.0,
                           device_share=0.0)
    assert tightness(cached) == 1.0 and tightness(None) == 1.0


def test_causes_lead_with_what_grew_and_name_the_rest_as_in_the_baseline():
    # the kernel regression's shape: reads slept in memcg reclaim (traced, 26% of the op time,
    # 6.5 ms per stall), the block I/O waits the device served stayed
    here = causes.OpSide(ops=1000, role_ops=1000, role_in_ops_ns={"blkio": 240_000 * 1000,
                                                                  "freepages": 70_000 * 1000},
                         role_shares={"blkio": 0.61, "freepages": 0.18},
                         stalls={"memcg reclaim": (0.26, 102_000.0)}, not_device=0.17,
                         held=("memcg reclaim",))
    base = causes.OpSide(ops=1000, role_ops=1000, role_in_ops_ns={"blkio": 157_000 * 1000},
                         role_shares={"blkio": 0.55}, stalls={"memcg reclaim": (0.02, 5_800.0)})
    grown, steady = causes.ranked(causes.op_causes(here, base), 0.10)
    assert [c.kind for c in grown] == ["memcg reclaim"]      # freepages is the traced reclaim
    assert grown[0].holds_io
    assert [c.kind for c in steady] == ["blkio"]
    # blkio less the 17% the device did not serve: 44%, and per op 240 * 44/61 = 173 us, not
    # 1.2 x the baseline's 157 us
    assert abs(steady[0].share - 0.44) < 1e-9
    assert abs(steady[0].ns_per_op - 240_000 * 0.44 / 0.61) < 1


def test_run_queue_waits_follow_a_blocking_cause():
    here = causes.OpSide(ops=10, role_ops=10, role_in_ops_ns={"cpu": 900, "blkio": 500},
                         role_shares={"cpu": 0.5, "blkio": 0.3})
    base = causes.OpSide(ops=10, role_ops=10, role_in_ops_ns={"cpu": 100, "blkio": 10},
                         role_shares={"cpu": 0.1, "blkio": 0.01})
    grown, _ = causes.ranked(causes.op_causes(here, base), 0.10)
    assert [c.kind for c in grown] == ["blkio", "cpu"]


def test_the_sleeping_frame_skips_the_schedulers_own():
    assert sleeping_frame("vfs_write;balance_dirty_pages;io_schedule_timeout;schedule") == \
        "balance_dirty_pages"
    assert sleeping_frame("filemap_read;folio_wait_bit_common") == "folio_wait_bit_common"


def test_the_stack_change_names_where_the_candidates_path_leaves_the_baselines():
    base = [("do_syscall_64;ksys_read;filemap_read;filemap_get_pages;folio_wait_bit_common", 0.9)]
    here = [("do_syscall_64;ksys_read;filemap_read;filemap_get_pages;filemap_alloc_folio;"
             "try_charge_memcg;try_to_free_mem_cgroup_pages;do_try_to_free_pages", 0.6),
            ("do_syscall_64;ksys_read;filemap_read;filemap_get_pages;folio_wait_bit_common", 0.4)]
    change = grown_sleep(here, base)
    assert change.sleeps_in == "do_try_to_free_pages"
    assert change.share == 0.6 and change.base_share == 0.0
    assert change.shared == "filemap_get_pages"
    assert change.path == ("filemap_alloc_folio", "try_charge_memcg",
                           "try_to_free_mem_cgroup_pages", "do_try_to_free_pages")
    line = change_line("bad", change)
    assert "sleep in do_try_to_free_pages" in line and "after filemap_get_pages" in line
    # a sleep in a frame the baseline passed through: where the baseline went on instead
    here = [("do_syscall_64;ksys_read;filemap_read;filemap_get_pages", 0.7)]
    change = grown_sleep(here, base)
    assert change.path == () and change.base_path == ("folio_wait_bit_common",)
    assert "sleeps in filemap_get_pages itself, where the baseline's stack went on into " \
        "folio_wait_bit_common" in change_line("bad", change)
    # the same stacks on both sides: no change to name
    assert grown_sleep(base, base) is None
