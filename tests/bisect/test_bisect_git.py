"""stallbench bisect --git: real git repositories made here, a real build command (a script that
"builds" the checked-out commit by installing the Debian test kernel, or fails where the commit
says so) and a real step booted under QEMU. The oracles: git's own rev-list, the files the build
script wrote, the Debian package's own kernel image, the user's repository as git reports it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from vm_support import guest_kernels, qemu_pids, requires_vm

from conftest import alive, run_stallbench, stallbench_cmd
from stallbench.bisect.gitcommits import first_parent_line
from stallbench.bisect.gitkernels import KernelBuilder
from stallbench.cli import main
from stallbench.vm.kernel import resolve_kernel

pytestmark = pytest.mark.guest

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True, env={**os.environ, **GIT_ENV}).stdout.strip()


def _commit(repo: Path, message: str, files: dict[str, str | None]) -> str:
    for name, text in files.items():
        if text is None:
            (repo / name).unlink()
        else:
            (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


Commits = list[tuple[str, dict[str, str | None]]]


def _repo(tmp_path: Path, commits: Commits) -> tuple[Path, list[str]]:
    repo = tmp_path / "linux"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    return repo, [_commit(repo, message, files) for message, files in commits]


def _snapshot(repo: Path) -> dict[str, str]:
    """What the user sees of their repository: status (ignored files too), HEAD, refs,
    worktrees, and the .git directory's own entries."""
    return {"status": _git(repo, "status", "--porcelain", "--ignored"),
            "head": _git(repo, "rev-parse", "HEAD"), "refs": _git(repo, "for-each-ref"),
            "worktrees": _git(repo, "worktree", "list", "--porcelain"),
            "git_dir": " ".join(sorted(p.name for p in (repo / ".git").iterdir())),
            "alternates": str((repo / ".git/objects/info/alternates").exists())}


@pytest.fixture(scope="module")
def test_kernel(tmp_path_factory) -> tuple[Path, str]:
    """The newer Debian test kernel: its image and config straight from the package (tar stops
    once it has them: they come first), its modules from stallbench's unpacked copy (made once
    for every kernel test)."""
    deb, release = guest_kernels()[-1]
    root = tmp_path_factory.mktemp("kernel")
    tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
    assert tar.stdout is not None
    with tar.stdout:                  # closed here too: dpkg-deb stops once tar has its files
        subprocess.run(["tar", "-x", "-C", str(root), "--occurrence",
                        f"./boot/vmlinuz-{release}", f"./boot/config-{release}"],
                       stdin=tar.stdout, check=True)
    tar.wait()
    modules = resolve_kernel(str(deb)).modules
    assert modules is not None and modules.name == release
    (root / "lib/modules").mkdir(parents=True)
    (root / "lib/modules" / release).symlink_to(modules)
    return root, release


BUILD = """#!/bin/sh
# "builds" the checked-out commit (the cwd): fails where the commit has a file BROKEN, else
# installs the Debian test kernel as the build's image. Each build appends its commit to BUILDS.
echo "checkout at $(git rev-parse HEAD)"
echo "$STALLBENCH_COMMIT" >> {builds}
if [ -e BROKEN ]; then echo "mm/filemap.c:12:1: error: $(cat BROKEN)"; exit 2; fi
if [ -e SLOW ]; then echo $$ > {builds}.pid; exec sleep 120; fi
mkdir -p "$KBUILD_OUTPUT/arch/x86/boot" "$STALLBENCH_KERNEL_DIR/lib/modules"
cp {kernel}/boot/vmlinuz-{release} "$KBUILD_OUTPUT/arch/x86/boot/bzImage"
grep -v "$(cat NO_CONFIG 2>/dev/null || echo none)" {kernel}/boot/config-{release} \
  > "$KBUILD_OUTPUT/.config"
ln -sfn {kernel}/lib/modules/{release} "$STALLBENCH_KERNEL_DIR/lib/modules/{release}"
echo "built"
"""
PLAN = """workload = "randread"
duration = "1s"
monitors = "none"
[workload_options]
file_size = "16M"
[[variants]]
name = "guest"
vm_cpus = 1
vm_memory = "384M"
drop_caches = false
"""


def _setup(tmp_path: Path, test_kernel, plan: str = PLAN) -> tuple[Path, Path, Path]:
    kernel, release = test_kernel
    script = tmp_path / "build.sh"
    script.write_text(BUILD.format(builds=tmp_path / "BUILDS", kernel=kernel, release=release))
    script.chmod(0o755)
    (tmp_path / "plan.toml").write_text(plan)
    return script, tmp_path / "plan.toml", tmp_path / "results"


def _builds(tmp_path: Path) -> list[str]:
    path = tmp_path / "BUILDS"
    return path.read_text().split() if path.exists() else []


def _bisect(plan: Path, results: Path, repo: Path, good: str, bad: str, *extra: str,
            timeout: float = 120) -> subprocess.CompletedProcess:
    return run_stallbench("bisect", "--plan", str(plan), "--results", str(results), "--git",
                          str(repo), "--good", good, "--bad", bad, "--metric", "read:p50",
                          "--no-progress", *extra, timeout=timeout)


def test_the_commits_are_gits_first_parent_line_from_good_to_bad(tmp_path):
    repo, (a, b) = _repo(tmp_path, [("a", {"f": "1"}), ("b", {"f": "2"})])
    _git(repo, "checkout", "-q", "-b", "topic", a)
    _commit(repo, "t1", {"t": "1"})
    _commit(repo, "t2", {"t": "2"})
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    c = _commit(repo, "c", {"f": "3"})
    commits = first_parent_line(repo, a, c)
    oracle = _git(repo, "rev-list", "--first-parent", "--reverse", f"{a}..{c}").split()
    assert [x.sha for x in commits] == [a, *oracle]
    assert len(commits) == 4 and commits[1].sha == b          # the topic's commits: not steps
    assert [x.subject for x in commits] == ["a", "b", "merge topic", "c"]
    assert all(x.name == x.sha[:12] for x in commits)
    assert first_parent_line(repo, "main~3", "main") == commits   # any rev git knows


@pytest.mark.parametrize("case", ["not a repo", "unknown rev", "good after bad", "same commit",
                                  "kernels per variant", "variant kernel", "no --git",
                                  "no --bad", "knee"])
def test_bad_input_is_one_line_and_exit_2_before_anything_is_built(tmp_path, case, capsys):
    repo, (a, b) = _repo(tmp_path, [("a", {"f": "1"}), ("b", {"f": "2"})])
    before = _snapshot(repo)
    plan, results = tmp_path / "plan.toml", tmp_path / "results"
    plan.write_text(PLAN)
    kernel = tmp_path / "bzImage"
    kernel.write_bytes(b"\0" * 4096)
    args = ["bisect", "--plan", str(plan), "--results", str(results), "--metric", "read:p50",
            "--git", str(repo), "--good", a, "--bad", b]
    if case == "not a repo":
        args[args.index(str(repo))] = str(tmp_path)
    elif case == "unknown rev":
        args[args.index(b)] = "no-such-branch"
    elif case == "good after bad":
        i, j = args.index(a), args.index(b)
        args[i], args[j] = b, a
    elif case == "same commit":
        args[args.index(a)] = "main"
    elif case == "kernels per variant":
        plan.write_text(PLAN.replace('name = "guest"', f'name = "one"\nkernel = "{kernel}"')
                        + f'[[variants]]\nname = "two"\nkernel = "{tmp_path}"\n')
    elif case == "variant kernel":
        plan.write_text(PLAN.replace('name = "guest"', f'name = "guest"\nkernel = "{kernel}"'))
    elif case == "no --git":
        args = args[:args.index("--git")] + ["--good", a]
    elif case == "no --bad":
        args = args[:args.index("--bad")]
    elif case == "knee":
        args.append("--knee")
    code = main(args)                  # in this process: an unexpected error would raise
    out, err = capsys.readouterr()
    assert code == 2, (case, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stallbench: "), (case, err)
    assert not (results / "kernels").exists() and not (results / "bisect.json").exists()
    assert _snapshot(repo) == before


@requires_vm
def test_a_failed_build_is_a_skip_never_bad_and_the_users_tree_is_untouched(tmp_path,
                                                                            test_kernel):
    repo, shas = _repo(tmp_path, [("good", {"f": "1"}), ("harmless", {"f": "2"}),
                                  ("breaks the build", {"BROKEN": "it does not compile"})])
    (repo / "untracked.txt").write_text("the user's own work\n")
    before = _snapshot(repo)
    script, plan, results = _setup(tmp_path, test_kernel)
    pids = qemu_pids()
    proc = _bisect(plan, results, repo, shas[0], "main", "--build", str(script))
    # the bad end could not be built: a skip (check's 125), so no first bad commit is named
    assert proc.returncode == 125, (proc.stdout, proc.stderr)
    step = [line for line in proc.stdout.splitlines() if line.startswith("step 1:")]
    assert step and "skip, not measured" in step[0]
    assert "error: it does not compile" in step[0]            # the build log's own line
    assert "first bad:" not in proc.stdout
    # the candidate is built first: the good end never needed building
    assert _builds(tmp_path) == [shas[2]]
    out = results / "kernels" / shas[2]
    record = json.loads((out / "build.json").read_text())
    assert record["status"] == "failed" and record["commit"] == shas[2]
    log = (out / "build.log").read_text()
    assert f"checkout at {shas[2]}" in log and not (out / "bzImage").exists()
    state = json.loads((results / "bisect.json").read_text())
    assert [s["outcome"] for s in state["steps"]] == ["skip"] and state["runs"] == {}
    assert not qemu_pids() - pids
    # the checkout and build directory went with the answer; the user's tree is as it was
    assert not (results / "kernels/.src").exists() and not (results / "kernels/.build").exists()
    assert _snapshot(repo) == before
    assert (repo / "untracked.txt").read_text() == "the user's own work\n"


@requires_vm
@pytest.mark.slow
def test_a_real_step_under_qemu_a_kernel_that_cannot_run_is_a_skip_and_images_are_cached(
        tmp_path, test_kernel):
    # the bad end's kernel builds but lacks virtio-9p: its run fails before it boots, so the
    # step cannot decide (a skip, never "bad"); the good end's kernel boots under QEMU for real
    repo, shas = _repo(tmp_path, [("good", {"f": "1"}),
                                  ("drop 9p", {"NO_CONFIG": "CONFIG_NET_9P_VIRTIO="})])
    before = _snapshot(repo)
    script, plan, results = _setup(tmp_path, test_kernel)
    pids = qemu_pids()
    proc = _bisect(plan, results, repo, shas[0], shas[1], "--build", str(script),
                   "--max-rounds", "1", timeout=240)
    assert proc.returncode == 125, (proc.stdout, proc.stderr)
    assert "first bad:" not in proc.stdout
    step = next(line for line in proc.stdout.splitlines() if line.startswith("step 1:"))
    assert "skip (check exit 125) after 1 round(s), 1+0 runs" in step
    assert f"no complete run of {shas[1][:12]}" in step
    assert _builds(tmp_path) == [shas[1], shas[0]]             # candidate first, each once
    kernel, release = test_kernel
    image = (kernel / f"boot/vmlinuz-{release}").read_bytes()
    state = json.loads((results / "bisect.json").read_text())
    assert state["source"]["good"] == shas[0] and state["source"]["bad"] == shas[1]
    assert {name: len(runs) for name, runs in state["runs"].items()} == {shas[0][:12]: 1,
                                                                          shas[1][:12]: 0}
    for sha in shas:
        out = results / "kernels" / sha
        assert (out / "bzImage").read_bytes() == image
        assert json.loads((out / "build.json").read_text())["status"] == "ok"
        assert f"checkout at {sha}" in (out / "build.log").read_text()
    [run] = [Path(p) for p in state["runs"][shas[0][:12]]]
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "complete" and meta["variant"] == shas[0][:12]
    assert meta["kernel"]["release"] == release != os.uname().release
    vm = meta["environment"]["vm"]
    assert vm["kernel_spec"] == str((results / "kernels" / shas[0]).resolve())
    assert vm["image_sha256"] == hashlib.sha256(image).hexdigest()
    # what a series needs to print the bisect between two such runs (compare/series.py)
    assert (meta["plan"]["commit"], meta["plan"]["git"]) == (shas[0], str(repo.resolve()))
    assert meta["plan"]["file"] == str(plan.resolve())
    [failed] = (results / shas[1][:12]).glob("*/*/run.json")
    meta = json.loads(failed.read_text())
    assert meta["status"] == "failed" and "CONFIG_NET_9P_VIRTIO is not set" in meta["reason"]
    assert not qemu_pids() - pids
    assert _snapshot(repo) == before
    # a rerun builds nothing it built the same way; another build command builds again
    builder = KernelBuilder(repo, results, first_parent_line(repo, shas[0], shas[1]),
                            str(script), log=lambda text: None)
    assert [builder.prepare(sha[:12]) for sha in shas] == [None, None]
    assert _builds(tmp_path) == [shas[1], shas[0]]
    other = KernelBuilder(repo, results, builder.commits, f"{script} --again", lambda t: None)
    assert other.prepare(shas[1][:12]) is None and _builds(tmp_path)[-1] == shas[1]
    other.finish()
    assert _snapshot(repo) == before
    shutil.rmtree(results)


def _wait_for(path: Path, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"no {path} within {timeout} s")


@requires_vm
def test_sigterm_and_kill_9_during_a_build_leave_no_build_running(tmp_path, test_kernel):
    repo, shas = _repo(tmp_path, [("good", {"f": "1"}), ("slow to build", {"SLOW": "x"})])
    script, plan, results = _setup(tmp_path, test_kernel)
    env = {**os.environ, "STALLBENCH_STATE_DIR": str(tmp_path / "state")}
    argv = stallbench_cmd("bisect", "--plan", str(plan), "--results", str(results), "--git",
                          str(repo), "--good", shas[0], "--bad", shas[1], "--metric",
                          "read:p50", "--build", str(script))
    pid_file = tmp_path / "BUILDS.pid"
    # SIGTERM: the build's process group is stopped, the journal emptied, a line says how to
    # go on
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    build = _wait_for(pid_file)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert "--resume" in err.splitlines()[-1]
    assert not alive(build)
    assert all(not json.loads(p.read_text())["entries"]
               for p in (tmp_path / "state").glob("journal-*.json"))
    # kill -9: the build goes on in its own session until `stallbench cleanup` stops it
    pid_file.unlink()
    proc = subprocess.Popen([*argv, "--resume"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    build = _wait_for(pid_file)
    proc.kill()
    proc.wait()
    assert alive(build)
    cleanup = subprocess.run(stallbench_cmd("cleanup"), env=env, capture_output=True,
                             text=True, timeout=60)
    assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr
    assert "kernel build" in cleanup.stdout + cleanup.stderr
    deadline = time.monotonic() + 10
    while alive(build) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(build)
