"""`stallbench bisect --git DIR --good REV --bad REV`: which commits a bisect steps over and how
they become the plan's variants. GOOD, then the first-parent line from GOOD to BAD (each merge
one step), each named by its shortest unique prefix; the plan's one variant once per commit,
its `kernel` the commit's directory RESULTS/kernels/<commit>/ (gitkernels.py builds it); and
what git says of the answer. The user's repository is only read, as its owner (gittree.py).
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UsageError
from ..plan.plan import Plan
from .gittree import Tree, open_tree

KERNELS_DIR = "kernels"         # RESULTS/kernels/<commit>/
NAME_LENGTH = 12


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    name: str                   # the variant's name: the shortest unique prefix, >= 12


def _resolve(tree: Tree, rev: str, flag: str) -> str:
    proc = tree.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}",
                    check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise UsageError(f"{flag} {rev}: no such commit in {tree.path}")
    return proc.stdout.strip()


def first_parent_line(repo: Path, good: str, bad: str) -> list[Commit]:
    """GOOD, then `git rev-list --first-parent --reverse GOOD..BAD`: the mainline from the good
    commit to the bad one, each merge one step. UsageError (one line) for bad input."""
    if shutil.which("git") is None:
        raise UsageError("git not found: --git reads the kernel tree with git; install git")
    if not repo.is_dir():
        raise UsageError(f"--git {repo}: no such directory")
    tree = open_tree(repo)
    if tree.git("rev-parse", "--git-dir", check=False).returncode != 0:
        raise UsageError(f"--git {repo}: not a git repository")
    good_sha, bad_sha = _resolve(tree, good, "--good"), _resolve(tree, bad, "--bad")
    if good_sha == bad_sha:
        raise UsageError(f"--good {good} and --bad {bad} are the same commit: nothing to bisect")
    if tree.git("merge-base", "--is-ancestor", good_sha, bad_sha,
                check=False).returncode != 0:
        raise UsageError(f"--good {good} is not an ancestor of --bad {bad}: the good commit "
                         "must come before the bad one (swapped?)")
    out = tree.git("log", "--first-parent", "--reverse", "--format=%H %s",
                   f"{good_sha}..{bad_sha}").stdout
    subject = tree.git("log", "-1", "--format=%s", good_sha).stdout.strip()
    lines = [(good_sha, subject)]
    for line in filter(None, out.splitlines()):
        sha, _, rest = line.partition(" ")
        lines.append((sha, rest))
    return named_commits(lines)


def named_commits(lines: list[tuple[str, str]]) -> list[Commit]:
    """Commits named by their shortest unique prefix of at least NAME_LENGTH characters."""
    length = NAME_LENGTH
    while len({sha[:length] for sha, _ in lines}) < len(lines):
        length += 4
    return [Commit(sha, subject, sha[:length]) for sha, subject in lines]


def git_plan(plan: Plan, commits: list[Commit], results: Path) -> Plan:
    """The plan's one variant once per commit, its `kernel` the commit's kernel directory."""
    if len(plan.variants) > 1:
        kernels = {v.kernel for v in plan.variants}
        why = ("sets different kernels per variant" if len(kernels) > 1
               else f"has {len(plan.variants)} variants")
        raise UsageError(f"--git: the plan {why}; with --git it gives one variant (the "
                         "settings every commit runs with) and each commit's kernel is built")
    base = plan.variants[0]
    if base.kernel is not None:
        raise UsageError(f"--git: the plan's variant sets kernel = {base.kernel!r}; with --git "
                         "each commit's kernel is built: remove the key")
    kernels = kernels_dir(results)
    return dataclasses.replace(plan, variants=[
        dataclasses.replace(base, name=c.name, kernel=str(kernels / c.sha)) for c in commits])


def kernels_dir(results: Path) -> Path:
    return Path(results).resolve() / KERNELS_DIR


def describe_answer(repo: Path, commits: list[Commit], last_good: int, first_bad: int
                    ) -> list[str]:
    """What git says of the answer: the first bad commit with its files changed, or each commit
    of a range."""
    if first_bad == last_good + 1:
        commit, before = commits[first_bad], commits[first_bad - 1]
        stat = open_tree(repo).git("diff", "--stat", before.sha, commit.sha, check=False).stdout
        return [f"{commit.sha} is the first bad commit", f"    {commit.subject}",
                *(f"   {line}" for line in stat.splitlines())]
    return ["the first bad commit is one of:",
            *(f"  {c.name} {c.subject}" for c in commits[last_good + 1:first_bad + 1])]
