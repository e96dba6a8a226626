"""`bisect --git` on another user's tree (issue 34 item 13): its git commands, clone, checkout and
build run as the tree's owner, never as root, and root takes back only regular files of theirs.
A throwaway user made here owns a tiny tree whose Makefile records `id -u`, and whose git config
runs a program from `git log` (log.showSignature with gpg.program, on a commit that carries a
signature). The oracles: the uids those programs wrote, the files in the results."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from stallbench.bisect.gitcommits import first_parent_line
from stallbench.bisect.gitkernels import KernelBuilder
from stallbench.core.errors import UsageError

pytestmark = [pytest.mark.machine, pytest.mark.root,
              pytest.mark.skipif(shutil.which("useradd") is None, reason="needs useradd")]
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1",
           "HOME": "/nonexistent"}
MAKEFILE = """all:
\tid -u > $(KBUILD_OUTPUT)/built-by
\tmkdir -p $(KBUILD_OUTPUT)/arch/x86/boot $(STALLBENCH_KERNEL_DIR)/lib/modules/t
\techo image > $(KBUILD_OUTPUT)/arch/x86/boot/bzImage
\techo module > $(STALLBENCH_KERNEL_DIR)/lib/modules/t/a.ko
\ttouch $(CCACHE_DIR)/cache
"""
# a later commit's build that tries to have root read a file only root may read
HOSTILE = """all:
\tmkdir -p $(KBUILD_OUTPUT)/arch/x86/boot $(STALLBENCH_KERNEL_DIR)/lib/modules/t
\tln -sf {secret} $(KBUILD_OUTPUT)/arch/x86/boot/bzImage
\tln -sf {secret} $(STALLBENCH_KERNEL_DIR)/lib/modules/t/a.ko
"""
GPG = "#!/bin/sh\nid -u >> {record}\nexit 1\n"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True, env=GIT_ENV).stdout.strip()


def _commit(repo: Path, message: str, makefile: str) -> str:
    (repo / "Makefile").write_text(makefile)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def _signed_commit(repo: Path, message: str) -> str:
    """A commit object with a (meaningless) signature header: `git log` with showSignature
    hands it to gpg.program."""
    text = (f"tree {_git(repo, 'write-tree')}\nparent {_git(repo, 'rev-parse', 'HEAD')}\n"
            "author t <t@t> 1700000000 +0000\ncommitter t <t@t> 1700000000 +0000\n"
            "gpgsig -----BEGIN PGP SIGNATURE-----\n \n -----END PGP SIGNATURE-----\n\n"
            f"{message}\n")
    sha = subprocess.run(["git", "-C", str(repo), "hash-object", "-t", "commit", "-w",
                          "--stdin"], input=text, capture_output=True, text=True, check=True,
                         env=GIT_ENV).stdout.strip()
    _git(repo, "update-ref", "HEAD", sha)
    return sha


@pytest.fixture
def other_user():
    name = f"sbtree{os.getpid() % 100000}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True)
    base = Path(tempfile.mkdtemp(prefix="stallbench-gitowner-", dir="/tmp"))
    base.chmod(0o755)                      # the user's build reaches the results below it
    try:
        yield pwd.getpwnam(name), base
    finally:
        shutil.rmtree(base, ignore_errors=True)
        subprocess.run(["userdel", name], capture_output=True)


def test_another_users_tree_is_read_and_built_as_that_user(other_user):
    user, base = other_user
    secret = base / "secret"
    secret.write_text("root's alone\n")
    secret.chmod(0o600)
    records, repo = base / "records", base / "linux"
    records.mkdir()
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    good = _commit(repo, "good", MAKEFILE)
    built = _signed_commit(repo, "signed")
    hostile = _commit(repo, "hostile", HOSTILE.format(secret=secret))
    gpg = records / "gpg"
    gpg.write_text(GPG.format(record=records / "git-ran-as"))
    gpg.chmod(0o755)
    _git(repo, "config", "log.showSignature", "true")
    _git(repo, "config", "gpg.program", str(gpg))
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(repo), str(records)],
                   check=True)

    commits = first_parent_line(repo, good, hostile)
    assert [c.sha for c in commits] == [good, built, hostile]
    # git log ran the tree's gpg.program: as its owner
    assert set((records / "git-ran-as").read_text().split()) == {str(user.pw_uid)}

    lines: list[str] = []
    results = base / "results"
    builder = KernelBuilder(repo, results, commits, "make", lines.append)
    assert builder.prepare(commits[1].name) is None, lines
    kernels = results / "kernels"
    assert (kernels / ".build/built-by").read_text().split() == [str(user.pw_uid)]
    assert (kernels / ".build").stat().st_uid == user.pw_uid
    assert (kernels / ".ccache/cache").stat().st_uid == user.pw_uid   # its home: none
    out = kernels / built
    assert (out / "bzImage").read_text() == "image\n" and (out / "bzImage").stat().st_uid == 0
    module = out / "lib/modules/t/a.ko"        # taken over: its owner can change it no more
    assert module.read_text() == "module\n"
    assert {p.stat().st_uid for p in (out / "lib", out / "lib/modules/t", module)} == {0}

    # the hostile commit links root's secret as its image and a module: neither is read
    why = builder.prepare(commits[2].name)
    assert why is not None and "symbolic links" in why, (why, lines)
    assert not (kernels / hostile / "bzImage").exists()
    assert "root's alone" not in "".join(p.read_text(errors="replace")
                                          for p in (kernels / hostile).rglob("*")
                                          if p.is_file() and not p.is_symlink())


def test_the_owners_build_must_reach_the_results(other_user, tmp_path):
    user, base = other_user
    repo = base / "linux"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = [_commit(repo, name, MAKEFILE + f"# {name}\n") for name in ("a", "b")]
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(repo)], check=True)
    commits = first_parent_line(repo, *shas)
    # pytest's tmp_path lies under /tmp/pytest-of-root, which only root may enter
    with pytest.raises(UsageError, match=f"built as {user.pw_name}, who cannot enter"):
        KernelBuilder(repo, tmp_path / "results", commits, "make", print)


def test_a_root_tree_that_others_may_write_is_refused(tmp_path):
    repo = tmp_path / "linux"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = [_commit(repo, name, MAKEFILE + f"# {name}\n") for name in ("a", "b")]
    (repo / ".git/config").chmod(0o666)
    with pytest.raises(UsageError, match=r"config is root's but others may write it"):
        first_parent_line(repo, *shas)
