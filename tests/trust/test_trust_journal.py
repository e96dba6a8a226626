"""The cleanup journal across trust boundaries (issue 34 items 7-10, issue 37 item 5): a
journal file written by hand, a state folder another user made, a kernel build whose start
fails, and a killed run's leftovers under a new run.

Signals to process group 0 and pid 1 are only ever tried inside a PID namespace with its own
/proc (`unshare --pid --fork --mount-proc`), never against the host's. Oracles: a sleeper's own
liveness (kill -0 by the shell), the files and sysctl values as the kernel shows them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import stallbench

pytestmark = pytest.mark.machine

SOURCE = str(Path(stallbench.__file__).resolve().parents[1])
needs_unshare = pytest.mark.skipif(shutil.which("unshare") is None,
                                   reason="needs unshare (util-linux)")


def sb(*args: str, state: Path, cwd: Path | None = None, path: str | None = None,
       timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "STALLBENCH_STATE_DIR": str(state), "PYTHONPATH": SOURCE}
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "stallbench", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=cwd)


def write_journal(state: Path, entries: list[dict], name: str = "journal-999999-1") -> Path:
    """A journal as a killed stallbench leaves it (its lock file free)."""
    state.mkdir(exist_ok=True)
    path = state / f"{name}.json"
    path.write_text(json.dumps({"pid": 999999, "entries": entries}))
    (state / f"{name}.lock").write_text("")
    return path


def in_pid_namespace(tmp_path: Path, command: str) -> str:
    """Run `command` (sh) as the child of a shell that is PID 1 of a new PID namespace with its
    own /proc, beside a sleeper in the namespace's process group 0; prints ALIVE when the
    sleeper outlived the command."""
    script = (f"sleep 60 & s=$!; {command}; "
              "if kill -0 $s 2>/dev/null; then echo ALIVE; kill $s; else echo GONE; fi")
    proc = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": SOURCE})
    return proc.stdout + proc.stderr


@pytest.mark.root
@needs_unshare
def test_a_kill_entry_without_a_process_is_refused_in_a_pid_namespace(tmp_path):
    state = tmp_path / "state"
    write_journal(state, [{"id": 1, "kind": "kill", "pid": 0, "start_time": None,
                           "group": True, "what": "kernel build"}])
    out = in_pid_namespace(tmp_path, f"STALLBENCH_STATE_DIR={state} {sys.executable} -m "
                                     "stallbench cleanup; echo rc=$?")
    assert "ALIVE" in out and "rc=1" in out, out
    assert "refused kill (pid=0" in out and "names no process of stallbench's" in out, out
    assert list(state.glob("journal-*")) == []          # dropped, never retried


@pytest.mark.root
@needs_unshare
def test_a_build_command_that_cannot_start_signals_nothing(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    code = ("import time, os; from pathlib import Path; "
            "from stallbench.core.journal import Journal; "
            "from stallbench.bisect.gitkernels import KernelBuilder; "
            "from stallbench.bisect.gittree import TreeOwner; "
            "b = object.__new__(KernelBuilder); b.log = print; b.owner = TreeOwner.current(); "
            f"j = Journal(Path({str(state)!r})); "
            "log = open('build.log', 'wb'); "
            "code = b._run(['/nonexistent/make'], Path('.'), dict(os.environ), log, "
            "Path('build.log'), j, None, time.monotonic()); "
            "print('code', code, 'entries', len(j.entries)); j.close()")
    out = in_pid_namespace(tmp_path, f"{sys.executable} -c \"{code}\"")
    assert "code 127 entries 0" in out and "ALIVE" in out, out
    # the shell that runs the build once journaled (core/startgate.py) says why, as a shell does
    said = (tmp_path / "build.log").read_text().splitlines()[1:]
    assert any("/nonexistent/make" in line and ("not found" in line or "No such file" in line)
               for line in said), said


def test_the_default_build_needs_its_tools_before_the_first_step(tmp_path):
    repo = tmp_path / "linux"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    for message in ("a", "b"):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", message], check=True)
    shas = subprocess.run([*git, "rev-list", "--reverse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.split()
    tools = tmp_path / "bin"                 # git, make and gcc; no flex, bison or bc
    tools.mkdir()
    for name in ("git", "make", "gcc"):
        if shutil.which(name):
            (tools / name).symlink_to(shutil.which(name))
    plan = tmp_path / "plan.toml"
    plan.write_text('workload = "randread"\nduration = "1s"\n[[variants]]\nname = "guest"\n')
    results = tmp_path / "results"
    run = sb("bisect", "--plan", str(plan), "--results", str(results), "--git", str(repo),
             "--good", shas[0], "--bad", shas[1], "--metric", "read:p50", state=tmp_path,
             path=str(tools))
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stdout + run.stderr
    assert run.stderr.startswith("stallbench: bisect --git: the default kernel build needs ")
    assert "flex, bison, bc" in run.stderr and "apt-get install flex bison bc" in run.stderr
    assert not (results / "kernels").exists()             # nothing cloned, nothing built


@pytest.mark.root
def test_journal_entries_and_files_that_stallbench_did_not_make_are_refused(tmp_path):
    # a user's file, in a folder whose name has `stallbench` in it (as the suite's basetemp
    # does): the name of the thing removed is what counts, not a folder above it
    home = tmp_path / "stallbench-user"
    home.mkdir()
    precious = home / "precious"
    precious.write_text("keep me")
    switch = tmp_path / "switch"
    switch.write_text("1")
    state = tmp_path / "state"
    write_journal(state, [{"id": 1, "kind": "unlink", "path": str(precious)},
                          {"id": 2, "kind": "rmtree", "path": str(tmp_path)},
                          {"id": 3, "kind": "write", "path": str(switch), "value": "0"},
                          {"id": 4, "kind": "unlink", "path": f"{tmp_path}/stallbench-x/../p"}])
    run = sb("cleanup", state=state)
    assert run.returncode == 1, run.stdout + run.stderr
    assert precious.read_text() == "keep me" and switch.read_text() == "1"
    assert run.stdout.count("refused ") == 4, run.stdout
    assert f"'{precious}' is not a path stallbench makes" in run.stdout
    assert "which is not a sysctl, I/O scheduler or tracing switch" in run.stdout
    # a journal someone else owns (or may write) is not read at all
    foreign = write_journal(state, [{"id": 1, "kind": "unlink", "path": str(precious)}])
    os.chown(foreign, 65534, 65534)
    run = sb("cleanup", state=state)
    assert run.returncode == 1 and "owned by uid 65534" in run.stdout, run.stdout
    assert precious.exists() and foreign.exists()
    foreign.unlink()
    # a state folder another user made, or anyone may write: one line, exit 2
    for mode, owner in ((0o700, 65534), (0o777, 0)):
        other = tmp_path / f"other-{mode:o}"
        other.mkdir()
        other.chmod(mode)
        os.chown(other, owner, owner)
        run = sb("cleanup", state=other)
        assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
        assert run.stderr.startswith("stallbench: STALLBENCH_STATE_DIR: "), run.stderr


def test_a_failed_undo_stays_for_the_next_cleanup_and_exits_1(tmp_path):
    made = tmp_path / "stallbench-scratch"
    made.mkdir()
    (made / "busy").write_text("")              # rmdir fails: the folder is not empty
    state = tmp_path / "state"
    journal = write_journal(state, [{"id": 1, "kind": "rmdir", "path": str(made)}])
    run = sb("cleanup", state=state)
    assert run.returncode == 1, run.stdout
    assert f"could not undo rmdir (path={made})" in run.stdout
    assert "kept for the next `stallbench cleanup`" in run.stdout
    assert json.loads(journal.read_text())["entries"][0]["path"] == str(made)
    (made / "busy").unlink()
    again = sb("cleanup", state=state)
    assert again.returncode == 0 and f"undone: rmdir (path={made})" in again.stdout
    assert not made.exists() and list(state.glob("journal-*")) == []


def test_a_new_run_refuses_while_a_killed_runs_changes_are_not_undone(tmp_path):
    ratio = Path("/proc/sys/vm/dirty_ratio").read_text().strip()
    state = tmp_path / "state"
    write_journal(state, [{"id": 1, "kind": "sysctl", "restore": [["vm.dirty_ratio", ratio]]}])
    results = tmp_path / "results"
    run = sb("run", "randread", "--duration", "1", "--file-size", "1M", "--monitors", "none",
             "--results", str(results), state=state)
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert "a stallbench run that was killed left changes not undone yet" in run.stderr
    assert "(journal-999999-1.json: sysctl); run `stallbench cleanup` first" in run.stderr
    assert not results.exists()


def _named_cgroup(owner: int) -> Path:
    """A memory cgroup named as a run of pid `owner` names its own (made by this test)."""
    from stallbench.env.memcg import cgroup_roots

    roots = [c.root for c in cgroup_roots()]
    if not roots:
        pytest.skip("no memory cgroup controller on this machine")
    path = roots[0] / f"stallbench-{owner}-{990000 + len(list(roots[0].iterdir()))}"
    path.mkdir()
    return path


@pytest.mark.root
@needs_unshare
def test_a_cleanup_in_a_pid_namespace_leaves_the_hosts_run_cgroups_alone(tmp_path):
    # A live run's cgroup on the host (this test's pid, alive). From inside a PID namespace
    # with its own /proc, that pid is not there: a cleanup that trusted /proc took the cgroup
    # from under the run (once in the suite: another lane's worker could not join it).
    path = _named_cgroup(os.getpid())
    try:
        out = in_pid_namespace(tmp_path, f"STALLBENCH_STATE_DIR={tmp_path / 'state'} "
                                         f"{sys.executable} -m stallbench cleanup; echo rc=$?")
        assert path.is_dir(), out
        assert "rc=0" in out and "PID namespace of its own" in out, out
        assert f"removed leftover cgroup {path}" not in out
    finally:
        if path.is_dir():
            path.rmdir()


@pytest.mark.root
def test_a_cleanup_on_the_host_removes_a_dead_runs_cgroup_and_leaves_a_live_ones(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()                         # (a pid reused since would be left alone: no harm)
    gone, kept = _named_cgroup(dead.pid), _named_cgroup(os.getpid())
    try:
        out = sb("cleanup", state=tmp_path / "state").stdout
        assert not gone.exists() and f"removed leftover cgroup {gone}" in out, out
        assert kept.is_dir() and f"{kept}: its stallbench run (pid {os.getpid()}) is still " \
            "running; left alone" in out, out
    finally:
        for path in (gone, kept):
            if path.is_dir():
                path.rmdir()
