"""`stallbench bisect --git DIR --good REV --bad REV [--build CMD]`: each commit's kernel built
when a bisect first needs it. The commits of the first-parent line from GOOD to BAD are the
ordered variants of the plan's one variant (gitcommits.py), and steps.py's search and journal
run over them unchanged; a commit's kernel is built only when the search first asks for it.

The user's repository is only read (rev-parse, rev-list, log, diff): commits are checked out in
a `git clone --shared` of it under RESULTS/kernels/.src (its objects are the user's, through
git's alternates; nothing is written to the user's repository, not even a worktree entry) and
built out of tree in ONE directory, RESULTS/kernels/.build (KBUILD_OUTPUT), kept across commits
and resumes so that each step is an incremental build. Each commit's result is kept in
RESULTS/kernels/<commit>/: build.log, build.json (status, seconds, how it was built) and, when it
built, bzImage and .config (the directory is the variant's `kernel`); an image built the same
way is reused by a rerun or --resume. A failed build is a skip, never "bad". A tree of another
user's is read and built as that user (gittree.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..core.errors import UsageError
from ..core.journal import Journal, process_start_time
from ..core.jsonfile import write_json_atomic
from ..core.signals import held_while_starting
from ..core.startgate import StartGate
from ..plan.plan import Plan
from ..run.undo import undo_kinds
from .buildtools import build_error, default_steps, missing_options
from .gitcommits import Commit, kernels_dir
from .gittree import Tree, check_can_enter, git_env, open_built, open_tree, owned_folder, take_over

FRAGMENT = Path(__file__).parents[1] / "share/kernel/guest.config"
SOURCE_DIR = ".src"             # RESULTS/kernels/.src: the checkout
BUILD_DIR = ".build"            # RESULTS/kernels/.build: the out-of-tree build directory
CCACHE_DIR = ".ccache"          # RESULTS/kernels/.ccache: ccache's of another user's builds
IMAGE = "arch/x86/boot/bzImage"
HEARTBEAT_S = 60.0
BUILD_NICE = 19                 # builds yield to everything else; no run overlaps a build


@contextlib.contextmanager
def _terminate_unwinds() -> Iterator[None]:
    """SIGTERM during a build unwinds like Ctrl-C (the build's group is killed, the journal
    emptied), instead of leaving make running."""
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _preexec() -> None:
    os.nice(BUILD_NICE)


def _tail_line(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 2048))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


class KernelBuilder:
    """Builds each commit's kernel when bisect.py first needs it (`prepare`)."""

    def __init__(self, repo: Path, results: Path, commits: list[Commit], build: str | None,
                 log: Callable[[str], None], jobs: int | None = None):
        self.repo = repo.resolve()
        self.tree = open_tree(self.repo)
        self.owner = self.tree.owner             # whose rights the clone and builds run with
        self.kernels = kernels_dir(results)
        self.commits = commits
        self.by_name = {c.name: c for c in commits}
        self.build = build
        self.log = log
        self.jobs = jobs or len(os.sched_getaffinity(0))
        self.built: dict[str, float] = {}        # this invocation's builds: name -> seconds
        if not self.owner.is_current:
            self.kernels.mkdir(parents=True, exist_ok=True)
            self.kernels.chmod(0o755)
            check_can_enter(self.owner, self.kernels)
        if build is None:
            text = FRAGMENT.read_bytes()
            self.how = {"build": "default", "fragment_sha256": hashlib.sha256(text).hexdigest()}
        else:
            self.how = {"build": build}

    def identity(self) -> dict[str, Any]:
        """What the bisect's kernels depend on: a resume with other values is refused."""
        return {"git": str(self.repo), "good": self.commits[0].sha,
                "bad": self.commits[-1].sha, **self.how}

    def cached(self, commit: Commit) -> bool:
        out = self.kernels / commit.sha
        try:
            record = json.loads((out / "build.json").read_text())
        except (OSError, ValueError):
            return False
        return (record.get("status") == "ok" and record.get("how") == self.how
                and (out / "bzImage").is_file())

    def prepare(self, name: str) -> str | None:
        """None when the commit's kernel is ready (cached or built now), else why not."""
        commit = self.by_name[name]
        if self.cached(commit):
            return None
        return self._build(commit)

    def finish(self) -> None:
        """The bisect has its answer: the checkout and the build directory go (the images stay,
        so a rerun builds nothing it built before)."""
        for name in (SOURCE_DIR, BUILD_DIR):
            shutil.rmtree(self.kernels / name, ignore_errors=True)

    def _build(self, commit: Commit) -> str | None:
        out = self.kernels / commit.sha
        out.mkdir(parents=True, exist_ok=True)
        if not self.owner.is_current:        # the build may install modules there
            out.chmod(0o755)
            owned_folder(out / "lib", self.owner)
        for stale in ("bzImage", ".config", "build.json"):
            (out / stale).unlink(missing_ok=True)
        log_path = out / "build.log"
        number = len(self.built) + 1
        how = "the default build" if self.build is None else f"`{self.build}`"
        self.log(f"building {commit.name} ({commit.subject}), build {number} of this "
                 f"invocation: {how} in {self.kernels / BUILD_DIR}")
        started = time.monotonic()
        with Journal(kinds=undo_kinds()) as journal, _terminate_unwinds(), \
                open(log_path, "wb") as log_file:
            source = self._checkout(commit, journal, log_file)
            build_dir = self.kernels / BUILD_DIR
            owned_folder(build_dir, self.owner)
            env = self.owner.environ({
                **git_env(), "KBUILD_OUTPUT": str(build_dir), "STALLBENCH_KERNEL_DIR": str(out),
                "STALLBENCH_COMMIT": commit.sha, "STALLBENCH_GUEST_CONFIG": str(FRAGMENT)})
            if not self.owner.is_current:     # a home it can write is not certain (nobody's)
                owned_folder(self.kernels / CCACHE_DIR, self.owner)
                env["CCACHE_DIR"] = str(self.kernels / CCACHE_DIR)
            reason = None
            commands = default_steps(FRAGMENT, self.jobs) if self.build is None \
                else [["sh", "-c", self.build]]
            for argv in commands:
                code = self._run(argv, source, env, log_file, log_path, journal, commit, started)
                reason = f"exit {code}" if code != 0 else None
                if reason is None and argv[-1] == "olddefconfig":
                    reason = self._check_config(build_dir, log_file)
                if reason is not None:
                    break
            if reason is None:
                reason = self._keep_image(build_dir, out, journal)
            if reason is None:
                try:
                    take_over(out / "lib", self.owner)
                except OSError as exc:
                    reason = str(exc)
        seconds = time.monotonic() - started
        self.built[commit.name] = seconds
        if reason is not None:
            why = f"build failed ({reason}): {build_error(_read(log_path))}; log {log_path}"
            write_json_atomic(out / "build.json", {"commit": commit.sha, "git": str(self.repo),
                                                   "status": "failed",
                                                   "reason": why, "seconds": round(seconds, 1),
                                                   "how": self.how})
            self.log(f"build of {commit.name} failed after {minutes(seconds)}: {why}")
            return why
        write_json_atomic(out / "build.json", {"commit": commit.sha, "git": str(self.repo),
                                               "status": "ok",
                                               "seconds": round(seconds, 1), "how": self.how})
        self.log(f"built {commit.name} in {minutes(seconds)} ({out / 'bzImage'})")
        return None

    def _checkout(self, commit: Commit, journal: Journal, log_file: Any) -> Path:
        """The commit in RESULTS/kernels/.src, a clone --shared made on first use (the tree's
        owner's: made again when it is someone else's)."""
        source = self.kernels / SOURCE_DIR
        if not (source / ".git").is_dir() or source.lstat().st_uid != self.owner.uid:
            partial = self.kernels / f".src.partial-{os.getpid()}"
            entry = journal.push("rmtree", path=str(partial))
            shutil.rmtree(partial, ignore_errors=True)
            owned_folder(partial, self.owner)
            self.log(f"cloning {self.repo} (--shared: its objects are read, not copied) into "
                     f"{source}")
            self.tree.git("clone", "--shared", "--no-checkout", "--quiet", str(self.repo),
                          str(partial))
            shutil.rmtree(source, ignore_errors=True)
            os.rename(partial, source)
            journal.forget(entry)
        proc = Tree(source, self.owner).git("checkout", "--quiet", "--force", "--detach",
                                            commit.sha, check=False)
        log_file.write(f"stallbench: checked out {commit.sha} in {source}\n".encode())
        log_file.write((proc.stdout + proc.stderr).encode())
        log_file.flush()
        if proc.returncode != 0:
            raise UsageError(f"git checkout {commit.sha} in {source}: "
                             + (proc.stderr.strip().splitlines() or ["failed"])[-1])
        return source

    def _run(self, argv: list[str], cwd: Path, env: dict[str, str], log_file: Any,
             log_path: Path, journal: Journal, commit: Commit, started: float) -> int:
        """One build command in its own process group (journaled: `stallbench cleanup` stops a
        build a kill -9 left behind), at nice 19, a progress line every minute."""
        log_file.write(f"stallbench: {' '.join(argv)}\n".encode())
        log_file.flush()
        entry = proc = None
        gate = StartGate()                   # the build runs once journaled (a kill -9 between)
        try:
            with held_while_starting():      # journaled once it exists, before a Ctrl-C acts
                try:
                    proc = subprocess.Popen(gate.command(argv), cwd=cwd, env=env,
                                            stdin=gate.stdin, stdout=log_file,
                                            stderr=subprocess.STDOUT, start_new_session=True,
                                            preexec_fn=_preexec, **self.owner.popen())
                except OSError as exc:       # (a program not found: the shell's exit 127)
                    log_file.write(f"stallbench: cannot run {argv[0]}: {exc}\n".encode())
                    return 127
                gate.started()
                entry = journal.push("kill", pid=proc.pid, group=True, what="kernel build",
                                     start_time=process_start_time(proc.pid))
                gate.open()
            next_line = time.monotonic() + HEARTBEAT_S
            while True:
                try:
                    return proc.wait(timeout=max(0.1, next_line - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.log(f"  building {commit.name}: {minutes(time.monotonic() - started)}"
                             f", {_tail_line(log_path)[:100]}")
                    next_line += HEARTBEAT_S
        finally:
            gate.close()
            if entry is not None:           # the group's stragglers (or all of it, unwinding)
                journal.undo(entry)
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)

    def _keep_image(self, build_dir: Path, out: Path, journal: Journal) -> str | None:
        """Copy the image (and its .config) into the commit's directory, atomically; the
        reason when the build left none (or left it where root does not read it)."""
        if not (out / "bzImage").is_file():
            if not os.path.lexists(build_dir / IMAGE):
                return f"no {IMAGE} in {build_dir}"
            try:
                _copy_atomic(open_built(build_dir, IMAGE, self.owner), out / "bzImage", journal)
            except OSError as exc:
                return str(exc)
        if os.path.lexists(build_dir / ".config") and not (out / ".config").is_file():
            with contextlib.suppress(OSError):
                _copy_atomic(open_built(build_dir, ".config", self.owner), out / ".config",
                             journal)
        return None

    def _check_config(self, build_dir: Path, log_file: Any) -> str | None:
        try:
            with open(open_built(build_dir, ".config", self.owner), errors="replace") as f:
                config = f.read()
        except OSError:
            config = ""
        missing = missing_options(FRAGMENT.read_text(), config)
        if not missing:
            return None
        log_file.write(f"stallbench: not in .config: {' '.join(missing)}\n".encode())
        return "the guest's settings not in .config: " + ", ".join(missing[:5])


def _copy_atomic(source_fd: int, target: Path, journal: Journal) -> None:
    """Copy what `source_fd` reads (it is closed) to `target`, renamed into place."""
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    entry = journal.push("unlink", path=str(partial))
    with open(source_fd, "rb") as source, open(partial, "wb") as copy:
        shutil.copyfileobj(source, copy, 1 << 20)
    os.replace(partial, target)
    journal.forget(entry)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def check_before_build(plan: Plan) -> None:
    """What can be wrong with the plan's variant before the first build (minutes), not after
    it: its settings and what this machine needs to boot a kernel."""
    from ..env.checks import check_settings
    from ..vm.checks import DEFAULT_MEMORY, check_vm_host, check_vm_memory_fits

    variant = plan.variants[0]
    check_settings(variant)
    check_vm_memory_fits(variant.vm_memory or DEFAULT_MEMORY)
    check_vm_host()
