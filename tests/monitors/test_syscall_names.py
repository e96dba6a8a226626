"""trace-full names syscalls for the running architecture from the kernel's own table
(issue 15 item 6); the oracle is the kernel: /proc/PID/syscall of a task blocked in a known
call, and a live trace of known calls."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from stallbench.core.context import EnvState, RunContext
from stallbench.core.journal import Journal
from stallbench.core.syscalls import header_for, parse_table, syscall_names
from stallbench.logformats.ftrace import parse_trace
from stallbench.monitors import monitor_class

pytestmark = pytest.mark.pure

needs_table = pytest.mark.skipif(header_for() is None,
                                 reason="no kernel headers (linux-libc-dev) for this machine")


def _blocked_syscall(argv: list[str], **kwargs) -> tuple[subprocess.Popen, int]:
    """Start argv and return the number of the system call it is blocked in, as the kernel
    reports it in /proc/PID/syscall."""
    proc = subprocess.Popen(argv, **kwargs)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        fields = Path(f"/proc/{proc.pid}/syscall").read_text().split()
        state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if fields and fields[0].isdigit() and state == "S" and int(fields[0]) >= 0:
            time.sleep(0.05)     # still there a moment later: it is blocked in it
            again = Path(f"/proc/{proc.pid}/syscall").read_text().split()
            if again and again[0] == fields[0]:
                return proc, int(fields[0])
        time.sleep(0.02)
    proc.kill()
    raise AssertionError(f"{argv} never blocked")


@needs_table
def test_names_match_what_the_kernel_reports_for_blocked_tasks():
    names = syscall_names()
    sleeper, nr = _blocked_syscall(["sleep", "30"])
    sleeper.kill()
    sleeper.wait()
    assert names[nr] in ("clock_nanosleep", "nanosleep")
    reader, nr = _blocked_syscall([sys.executable, "-c", "import os; os.read(0, 1)"],
                                  stdin=subprocess.PIPE)
    reader.kill()
    reader.wait()
    assert names[nr] == "read"


def test_the_generic_table_resolves_its_indirections():
    text = ("#define __NR3264_fcntl 25\n#define __NR_io_setup 0\n"
            "#if __BITS_PER_LONG == 64\n#define __NR_fcntl __NR3264_fcntl\n#else\n"
            "#define __NR_fcntl64 __NR3264_fcntl\n#endif\n#define __NR_base 300\n"
            "#define __NR_later (__NR_base + 2)\n#define __NR_syscalls 451\n")
    assert parse_table(text) == {0: "io_setup", 25: "fcntl", 300: "base", 302: "later"}


def test_parsed_rows_carry_the_name():
    line = ("          python-101    (    100) [000] .....   10.005000: sys_enter: NR 17 "
            "(3, 0, 0, 0, 0, 0)\n          python-101    (    100) [000] .....   10.005900: "
            "sys_exit: NR 17 = 0\n")
    rows = parse_trace(line, 10_000_000_000, None, {17: "pread64"})
    assert [(r["kind"], r["detail"], r["duration_ns"]) for r in rows] == [
        ("syscall pread64", "17", 900_000)]
    assert parse_trace(line, 10_000_000_000)[0]["kind"] == "syscall 17"


PREADER = textwrap.dedent("""
    import os, sys, time
    fd = os.open(sys.argv[1], os.O_RDONLY)
    time.sleep(0.3)                  # the monitor adds this process to its pid filter
    for _ in range(2000):
        os.pread(fd, 4096, 0)
        os.getppid()
""")


@needs_table
@pytest.mark.root
def test_a_live_trace_full_names_the_workloads_syscalls(tmp_path):
    data = tmp_path / "data"
    data.write_bytes(os.urandom(8192))
    (tmp_path / "state").mkdir()
    with Journal(tmp_path / "state") as journal:
        ctx = RunContext(run_dir=tmp_path, env=EnvState(workdir=tmp_path), duration_s=1,
                         journal=journal)
        cls = monitor_class("trace-full")
        if cls.unavailable(ctx):
            pytest.skip(cls.unavailable(ctx))
        ctx.start_clock()
        monitor = cls()
        monitor.start(ctx)
        child = subprocess.Popen([sys.executable, "-c", PREADER, str(data)])
        ctx.processes.add(child.pid)
        assert child.wait(timeout=30) == 0
        result = monitor.stop()
    kinds = {r["kind"] for r in result.tables["trace_full"].to_pylist()
             if r["category"] == "syscall"}
    assert {"syscall pread64", "syscall getppid"} <= kinds, sorted(kinds)[:20]
    assert not [k for k in kinds if k.split()[-1].isdigit()], kinds
    assert "from" in result.summary["syscall_names"]
