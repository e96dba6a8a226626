"""`bisect --git`'s kernel tree, read and built with its owner's rights (issue 34 item 13).

stallbench runs as root, and a tree another user owns is theirs to write: its Makefiles and
scripts run in the build, and its git config runs programs in plain read commands (`git log`
runs `gpg.program` on a signed commit when `log.showSignature` is set: seen here as uid 0). So
every git command on the tree, the clone, the checkout and the build run as the tree's owner
(the owner of the folder given and of its git folder, who must be the same), with that user's
groups and home; the checkout and the build folder are that user's. Root reads back only the
image and .config, regular files of that user's reached without a symlink, and takes over the
modules the build installed (folders and regular files of that user's only) before anything
reads them. A tree root owns that others may write (its git folder, config, objects or refs) is
refused. A stallbench that is not root runs everything as itself, as before.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import UsageError


@dataclass(frozen=True)
class TreeOwner:
    uid: int
    gid: int
    groups: tuple[int, ...]
    name: str
    home: str

    @classmethod
    def of(cls, uid: int, gid: int) -> TreeOwner:
        """The user `uid` as a login would make it (`gid`: the group of one not in passwd)."""
        try:
            entry = pwd.getpwuid(uid)
        except KeyError:
            return cls(uid, gid, (), str(uid), "/")
        return cls(uid, entry.pw_gid, tuple(os.getgrouplist(entry.pw_name, entry.pw_gid)),
                   entry.pw_name, entry.pw_dir)

    @classmethod
    def current(cls) -> TreeOwner:
        return cls.of(os.geteuid(), os.getegid())

    @property
    def is_current(self) -> bool:
        return self.uid == os.geteuid()

    def __str__(self) -> str:
        return f"{self.name} (uid {self.uid})"

    def popen(self) -> dict[str, Any]:
        """subprocess's arguments that run a program as this user."""
        if self.is_current:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}

    def environ(self, env: dict[str, str]) -> dict[str, str]:
        """`env` for this user's programs: their home and name, not root's ccache folder."""
        if self.is_current:
            return env
        return {**{k: v for k, v in env.items() if not k.startswith("CCACHE_")},
                "HOME": self.home, "USER": self.name, "LOGNAME": self.name}


def git_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


@dataclass(frozen=True)
class Tree:
    """A git repository and the user its commands run as."""

    path: Path
    owner: TreeOwner

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """git in the tree as its owner: no fsmonitor or pager; safe.directory=* because the
        command runs with the owner's rights (a subfolder of another user's is no more)."""
        argv = ["git", "-c", "safe.directory=*", "-c", "core.fsmonitor=false", "--no-pager",
                "-C", str(self.path), *args]
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.owner.environ(
            git_env()), stdin=subprocess.DEVNULL, **self.owner.popen())
        if check and proc.returncode != 0:
            raise UsageError(f"git {' '.join(args[:2])} in {self.path}: "
                             + (proc.stderr.strip().splitlines() or ["failed"])[-1])
        return proc


def open_tree(path: Path) -> Tree:
    """The tree at `path` and who its commands run as; UsageError (one line) when it is no git
    repository, has two owners, or is root's and others may write it."""
    if os.geteuid() != 0:
        return Tree(path, TreeOwner.current())
    info = path.stat()
    tree = Tree(path, TreeOwner.of(info.st_uid, info.st_gid))
    proc = tree.git("rev-parse", "--git-common-dir", check=False)
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise UsageError(f"--git {path}: not a git repository (git as {tree.owner}: {why})")
    common = path / proc.stdout.strip()          # relative to the tree, or absolute
    if common.stat().st_uid != info.st_uid:
        raise UsageError(f"--git {path} is {tree.owner}'s but its git folder {common} is uid "
                         f"{common.stat().st_uid}'s: a tree is built as its one owner; give "
                         "a tree whose folder and git folder have the same owner")
    if info.st_uid == 0:
        for part in (common, common / "config", common / "objects", common / "refs"):
            with contextlib.suppress(FileNotFoundError):
                if part.stat().st_mode & 0o022:
                    raise UsageError(
                        f"--git {path}: {part} is root's but others may write it (mode "
                        f"{stat.S_IMODE(part.stat().st_mode):o}): what root would build is "
                        "theirs; make it writable by root alone (chmod go-w) or use a copy")
    return tree


def check_can_enter(owner: TreeOwner, folder: Path) -> None:
    """UsageError when the owner's build could not reach `folder` (a folder above it that only
    root may search, e.g. --results under /root)."""
    if owner.is_current:
        return
    proc = subprocess.run(["test", "-x", str(folder)], env=owner.environ(git_env()),
                          stdin=subprocess.DEVNULL, **owner.popen())
    if proc.returncode != 0:
        raise UsageError(f"--git: the tree is {owner}'s, so its kernels are built as "
                         f"{owner.name}, who cannot enter {folder}; give --results a folder "
                         f"{owner.name} can reach")


def owned_folder(path: Path, owner: TreeOwner) -> None:
    """`path` a folder of the owner's: kept when it is one, else (someone else's, a file, a
    link) removed and made again."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        info = None
    if info is not None and (not stat.S_ISDIR(info.st_mode) or info.st_uid != owner.uid):
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(path)
        else:
            path.unlink()
        info = None
    if info is None:
        path.mkdir(mode=0o755)
        os.chown(path, owner.uid, owner.gid)


def open_built(folder: Path, relative: str, owner: TreeOwner) -> int:
    """A file descriptor of `folder/relative`, opened by root only when it is a regular file of
    the owner's reached without a symlink (a build cannot have root copy /etc/shadow into the
    results); OSError saying why not otherwise."""
    *folders, name = relative.split("/")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = file_fd = -1
    try:
        fd = os.open(folder, flags | os.O_DIRECTORY)
        for part in folders:
            inner = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        file_fd = os.open(name, flags | os.O_NONBLOCK, dir_fd=fd)
        info = os.fstat(file_fd)
    except OSError as exc:
        if file_fd >= 0:
            os.close(file_fd)
        raise OSError(f"{folder / relative}: {exc.strerror}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != owner.uid:
        os.close(file_fd)
        raise OSError(f"{folder / relative} is not a regular file of {owner}'s")
    return file_fd


def take_over(folder: Path, owner: TreeOwner) -> None:
    """What the owner's build left under `folder` becomes this process's, so that its owner can
    change nothing of it later (the guest's initramfs is made from it, as root): each folder
    first (nothing in it can then be renamed or replaced), then each file in it. Only folders
    and regular files of the owner's: OSError naming the first other (a symlink, a hard link
    to someone else's file)."""
    if owner.is_current or not os.path.lexists(folder):
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        _take_folder(fd, folder, owner)
    finally:
        os.close(fd)


def _take_folder(fd: int, path: Path, owner: TreeOwner) -> None:
    if os.fstat(fd).st_uid != owner.uid:
        raise OSError(f"{path} is not a folder of {owner}'s")
    os.fchown(fd, os.geteuid(), os.getegid())
    for name in os.listdir(fd):
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                            dir_fd=fd)
            try:
                _take_folder(inner, path / name, owner)
            finally:
                os.close(inner)
        elif stat.S_ISREG(info.st_mode) and info.st_uid == owner.uid:
            os.chown(name, os.geteuid(), os.getegid(), dir_fd=fd, follow_symlinks=False)
        else:
            raise OSError(f"{path / name} is not a folder or regular file of {owner}'s "
                          "(a symlink?): root does not read it")
