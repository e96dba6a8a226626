"""Scenario 6: hostile input. Always one line on stderr, exit 2, and nothing written outside the
results and work directories.

Plan files are read through the real command line entry point (`stallbench.cli.main`, what
`python -m stallbench` calls) in this process, so that the two dozen bad plans stay cheap; the
symlink, name and importer cases run `python -m stallbench` in subprocesses. The property tests
(hypothesis) cover every importer and variant names; plan, size and duration parsing have theirs
in test_plan_load.py.
"""

from __future__ import annotations

import os
import string
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_support import assert_one_line_exit_2, sb, tree_listing

from stallbench.cli import main
from stallbench.core.errors import UsageError
from stallbench.core.names import check_name
from stallbench.importers import IMPORTERS, parse_log
from stallbench.importers.imported import write_run

pytestmark = pytest.mark.oracle

V = '[[variants]]\nname = "a"\n'
BAD_PLANS = [
    ('workload = "randread"\niterations = "three"\n' + V, "plan.toml:2: iterations"),
    ('workload = "randread"\nbogus = 1\n' + V, "plan.toml:2: bogus: unknown key"),
    ('workload = "randread"\n' + V + "bogus = 1\n", "plan.toml:4: variants[0].bogus"),
    ('workload = "randread"\nduration = -3\n' + V, "plan.toml:2: duration"),
    ('workload = "randread"\nduration = 1e300\n' + V, "plan.toml:2: duration"),
    ('workload = "randread"\nduration = "nan"\n' + V, "plan.toml:2: duration"),
    ('workload = "randread"\niterations = 100000000000\n' + V, "plan.toml:2: iterations"),
    ('workload = "randread"\n[options]\nfile-size = "99999999T"\n' + V, "too large"),
    ('workload = "randread"\n[options]\nfile-size = "-5M"\n' + V, "not a size"),
    ('workload = "randread"\n[options]\nthreads = -1\n' + V, "--threads"),
    ('workload = "randread"\n[options]\nthreads = 100000\n' + V, "--threads"),
    ('workload = "randread"\n' + V + 'memory = "-5M"\n', "variants[0].memory"),
    ('workload = "randread"\n' + V + 'fs = "ext4"\nfs_size = "1E"\n', "variants[0].fs_size"),
    ('workload = "randread"\n' + V + "mkfs_opts = 5\n", "variants[0].mkfs_opts"),
    ('workload = "randread"\n' + V + 'dir = "../outside"\n', "contains '..'"),
    ('workload = "randread"\n' + V + 'dir = "/proc"\n', "/proc"),
    ('workload = "randread"\n[[variants]]\nname = "../outside/x"\n', "not allowed"),
    ('workload = "randread"\n[[variants]]\nname = "a/b"\n', "not allowed"),
    ('workload = "randread"\n[[variants]]\nname = "a\\u0001b"\n', "not allowed"),
    ('workload = "randread"\n[[variants]]\nname = "a\\nb"\n', "not allowed"),
    ('workload = "randread"\n[[variants]]\nname = ".."\n', "not allowed"),
    ('workload = "randread"\n[[variants]]\nname = "x\\n"\n', "not allowed"),
    ('workload = "randread"\n' + V + '[variants.sysctls]\n"../../etc/passwd" = 1\n',
     "not a sysctl name"),
    ('workload = "randread"\n' + V + '[variants.sysctls]\n"kernel.hostname" = "x\\ny"\n',
     "not a usable value"),
    ('workload = "../../bin/sh"\n' + V, "plan.toml"),
    ("\x00\xff", "not UTF-8"),
]


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, Path]:
    """cwd (must stay empty), results and work (allowed), outside (must stay untouched)."""
    paths = {name: tmp_path / name for name in ("cwd", "results", "work", "outside", "plans")}
    for path in paths.values():
        path.mkdir()
    (paths["outside"] / "keep.txt").write_text("untouched")
    return paths


def _assert_nothing_outside(sandbox: dict[str, Path]) -> None:
    assert tree_listing(sandbox["cwd"]) == []
    assert tree_listing(sandbox["outside"]) == ["keep.txt"]
    assert not list(sandbox["results"].rglob("run.json"))
    assert not list(sandbox["results"].rglob("*.parquet"))


@pytest.mark.parametrize("text,message", BAD_PLANS, ids=[m for _, m in BAD_PLANS])
def test_bad_plan_is_one_line_exit_2(sandbox, capsys, monkeypatch, text, message):
    plan = sandbox["plans"] / "plan.toml"
    plan.write_bytes(text.encode("latin-1") if text.startswith("\x00") else text.encode())
    monkeypatch.chdir(sandbox["cwd"])
    code = main(["run", "--plan", str(plan), "--results", str(sandbox["results"])])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], err
    _assert_nothing_outside(sandbox)


BAD_FLAGS = [
    (["--variant", "a\x01b"], "not allowed"),
    (["--variant", "../outside"], "not allowed"),
    (["--variant", "x\n"], "not allowed"),               # $ matched before a final newline
    (["--fs-size", "-5M", "--fs", "ext4"], "--fs-size"),
    (["--memory", "99999999T"], "--memory"),
    (["--duration", "-1"], "--duration"),
    (["--file-size", "1E"], "--file-size"),
    (["--dir", "/proc"], "/proc"),
    (["--iterations", "0"], "--iterations"),
]


@pytest.mark.parametrize("flags,message", BAD_FLAGS, ids=[m for _, m in BAD_FLAGS])
def test_bad_flag_is_one_line_exit_2(sandbox, capsys, monkeypatch, flags, message):
    monkeypatch.chdir(sandbox["cwd"])
    code = main(["run", "randread", "--results", str(sandbox["results"]), "--file-size", "1M",
                 "--duration", "1", "--monitors", "none", "--no-progress", *flags])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], err
    _assert_nothing_outside(sandbox)


def test_symlinks_in_results_pointing_outside_are_refused(sandbox):
    results, outside = sandbox["results"], sandbox["outside"]
    (results / "escape").symlink_to(outside)                    # variant level
    (results / "deeper").mkdir()
    (results / "deeper" / "randread").symlink_to(outside)       # workload level
    common = ["--results", str(results), "--dir", str(sandbox["work"]), "--file-size", "1M",
              "--duration", "0.5", "--monitors", "none", "--no-progress"]
    state = sandbox["work"].parent / "state"
    for variant in ("escape", "deeper"):
        out = sb("run", "randread", "--variant", variant, *common, state=state,
                 cwd=sandbox["cwd"])
        assert_one_line_exit_2(out, "leads outside the results directory")
    log = sandbox["work"] / "trace.txt"
    log.write_text('read(3, "x", 1) = 1 <0.000010>\n')
    out = sb("import", "strace", str(log), "--variant", "escape", "--results", str(results),
             state=state, cwd=sandbox["cwd"])
    assert_one_line_exit_2(out, "leads outside the results directory")
    # a symlinked iteration directory is skipped: the next number is claimed beside it
    (results / "fine" / "randread").mkdir(parents=True)
    (results / "fine" / "randread" / "1").symlink_to(outside)
    out = sb("run", "randread", "--variant", "fine", *common, state=state, cwd=sandbox["cwd"])
    assert out.returncode == 0, out.stderr
    assert (results / "fine" / "randread" / "2" / "ops.parquet").is_file()
    assert tree_listing(outside) == ["keep.txt"]
    assert tree_listing(sandbox["cwd"]) == []


@pytest.mark.parametrize("kind", list(IMPORTERS))
def test_import_of_garbage_is_one_line_exit_2(sandbox, kind):
    log = sandbox["work"] / ("garbage_lat.1.log" if kind == "fio" else "garbage.log")
    log.write_bytes(b"\x00\x01garbage\xff\n" + os.urandom(64) + b"\n msec 1,2\n")
    out = sb("import", kind, str(log), "--variant", "g", "--results", str(sandbox["results"]),
             state=sandbox["work"].parent / "state", cwd=sandbox["cwd"])
    assert_one_line_exit_2(out, str(log))
    _assert_nothing_outside(sandbox)


# ---------------------------------------------------------------------------------------------
# property tests

PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@given(st.text(max_size=120))
def test_check_name_accepts_only_plain_path_components(name):
    try:
        accepted = check_name(name)
    except UsageError as exc:
        assert "\n" not in str(exc)
        return
    assert accepted == name
    assert "/" not in name and "\x00" not in name and name not in (".", "..")
    assert all(c in string.ascii_letters + string.digits + "._+@=,:-" for c in name)
    assert Path(name).name == name and len(name) <= 100


def _fio_line(t_ms: int, lat_ns: int, ddir: int, bs: int) -> tuple[str, str, int]:
    return f"{t_ms}, {lat_ns}, {ddir}, {bs}", ["read", "write", "trim"][ddir], lat_ns


def _pgbench_line(client: int, lat_us: int, epoch: int, us: int) -> tuple[str, str, int]:
    return f"{client} 1 {lat_us} 0 {epoch} {us}", "txn", lat_us * 1000


def _strace_line(pid: int, name: str, secs: int, micros: int) -> tuple[str, str, int]:
    line = f"{pid} {name}(3, \"ab\", 2) = 2 <{secs}.{micros:06d}>"
    return line, name, secs * 10**9 + micros * 1000


def _mmtests_line(op: str, pid: int, avg_ms: int, max_ms: int) -> tuple[str, str, int]:
    return f"{op}[{pid}]: avg: {avg_ms} msec; max: {max_ms} msec", op, max_ms * 1_000_000


VALID_LINES = {
    "fio": st.builds(_fio_line, st.integers(0, 10**9), st.integers(0, 10**12),
                     st.integers(0, 2), st.integers(1, 1 << 20)),
    "pgbench": st.builds(_pgbench_line, st.integers(0, 10**6), st.integers(0, 10**9),
                         st.integers(0, 2 * 10**9), st.integers(0, 999_999)),
    "strace": st.builds(_strace_line, st.integers(1, 10**6),
                        st.sampled_from(["read", "pwrite64", "fsync", "openat"]),
                        st.integers(0, 100), st.integers(0, 999_999)),
    "mmtests-pgioperf": st.builds(_mmtests_line, st.sampled_from(["read", "wal", "commit"]),
                                  st.integers(1, 10**6), st.integers(0, 10**5),
                                  st.integers(0, 10**6)),
}
LOG_NAMES = {"fio": "job_lat.1.log", "pgbench": "pgbench_log.1", "strace": "trace.txt",
             "mmtests-pgioperf": "pgioperf.log"}


def _mangle(line: str, data: st.DataObject) -> str:
    """A valid line with one character replaced, one field cut or junk appended."""
    how = data.draw(st.sampled_from(["replace", "cut", "append"]))
    if how == "cut" or not line:
        return line[:data.draw(st.integers(0, max(0, len(line) - 1)))]
    if how == "append":
        return line + data.draw(st.text(max_size=8))
    at = data.draw(st.integers(0, len(line) - 1))
    return line[:at] + data.draw(st.characters()) + line[at + 1:]


@pytest.mark.parametrize("kind", list(IMPORTERS))
@PROPERTY
@given(data=st.data())
def test_every_importer_reads_valid_lines_exactly_and_rejects_the_rest_in_one_line(
        tmp_path, kind, data):
    valid = data.draw(st.lists(VALID_LINES[kind], min_size=0, max_size=20))
    lines = [text for text, _, _ in valid]
    damaged = data.draw(st.booleans())
    if damaged and lines:
        index = data.draw(st.integers(0, len(lines) - 1))
        lines[index] = _mangle(lines[index], data)
    elif damaged:
        lines = [data.draw(st.text(max_size=40))]
    log = tmp_path / LOG_NAMES[kind]
    log.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass") + b"\n")
    try:
        imported = parse_log(kind, log)
    except UsageError as exc:
        message = str(exc)
        assert "\n" not in message and str(log) in message
        assert damaged or not valid        # every valid log is read
        return
    # what was read is exactly what the (possibly harmlessly mangled) lines say
    names = imported.samples.op_names
    codes, _, _, latency = imported.samples.arrays()
    got = sorted(zip([names[c] for c in codes], latency.tolist(), strict=True))
    if not damaged:
        assert got == sorted((op, lat) for _, op, lat in valid)
    results = tmp_path / "results"
    run = write_run(imported, results, "prop", None)
    table = pq.read_table(run / "ops.parquet")
    assert table.num_rows == len(got)
    assert sorted(np.asarray(table.column("latency_ns")).tolist()) == sorted(g[1] for g in got)
    assert run.resolve().is_relative_to(results.resolve())
