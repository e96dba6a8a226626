"""`stallbench cleanup` beside runs that end while it looks: a journal its run removes between
cleanup's listing and its reading is a run that ended, not an untrusted file (the CI of stop 48:
"journal-16549-….json: No such file or directory: not trusted, left alone", exit 1, while
another test's run finished). A journal that is there and not a regular file is still named.

The oracle: the files left in the state folder and cleanup's count of what it could not undo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stallbench.core import journal

pytestmark = pytest.mark.pure


def _journal(folder: Path) -> Path:
    path = folder / "journal-4242-1.json"
    path.write_text(json.dumps({"pid": 4242, "entries": []}))
    path.chmod(0o600)
    return path


def test_a_journal_removed_after_the_listing_is_passed_over(tmp_path, monkeypatch):
    path = _journal(tmp_path)
    real = journal.file_problem

    def its_run_ends_first(checked: Path) -> str | None:
        if checked == path:
            path.unlink()                 # the run closes its journal now
        return real(checked)

    monkeypatch.setattr(journal, "file_problem", its_run_ends_first)
    said: list[str] = []
    assert journal.cleanup_stale(tmp_path, log=said.append) == 0, said
    assert said == [] and list(tmp_path.iterdir()) == []


def test_a_journal_removed_after_the_lock_leaves_no_lock_behind(tmp_path, monkeypatch):
    path = _journal(tmp_path)
    real = journal.fcntl.flock

    def its_run_ends_first(fd: int, operation: int) -> None:
        real(fd, operation)
        path.unlink(missing_ok=True)      # it ended just before cleanup took the lock

    monkeypatch.setattr(journal.fcntl, "flock", its_run_ends_first)
    said: list[str] = []
    assert journal.cleanup_stale(tmp_path, log=said.append) == 0, said
    assert list(tmp_path.iterdir()) == []


def test_a_journal_that_is_a_dangling_link_is_still_named(tmp_path):
    path = tmp_path / "journal-4242-1.json"
    path.symlink_to(tmp_path / "nowhere.json")
    said: list[str] = []
    assert journal.cleanup_stale(tmp_path, log=said.append) == 1
    assert len(said) == 1 and "not a regular file" in said[0] and "not trusted" in said[0]
    assert path.is_symlink()
