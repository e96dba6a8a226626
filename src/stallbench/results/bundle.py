"""A bundle: one archive of a results tree that another engineer can open (issue 46). `stallbench
export RESULTS --format bundle` writes one (exporters/bundle.py); `compare`, `check`, `series`
and `reproduce` open one wherever they take a results tree (`--results b.tar.gz`).

The layout: MANIFEST_FILE at the top (what the bundle holds, the stallbench that made it, the
sizes), RESULTS_DIR with the run folders (run.json, summary.parquet, monitor tables, stacks;
ops.parquet only where asked for), PLANS_DIR (each plan as it ran), KERNELS_DIR (each kernel
config by its hash) and REPORTS_DIR (the comparison as text, email and HTML).

Opening one writes nothing outside a temporary folder of its own (stallbench-bundle-*, mode
0700), which is removed when the command ends, on an error, on Ctrl-C, SIGTERM or SIGHUP, and
by `stallbench cleanup` after a kill -9 (it is journaled, core/journal.py `rmtree`). Each
member is checked before anything of it is written: a regular file or a folder (no link, hard
link, device, FIFO or sparse file), a relative name of plain parts (no `..`, no absolute path,
no control character, not too long or deep), never twice, each and all of them within size
bounds (and the free space); only then is its data copied, into a file created anew
(O_EXCL|O_NOFOLLOW). A damaged or hostile archive is refused with one line (UsageError, exit 2)
and its folder removed.
"""

from __future__ import annotations

import contextlib
import json
import lzma
import os
import secrets
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..core.errors import UsageError
from ..core.signals import terminate_unwinds

FORMAT_VERSION = 1
MANIFEST_FILE = "stallbench-bundle.json"
RESULTS_DIR = "results"
PLANS_DIR = "plans"
KERNELS_DIR = "kernels"
REPORTS_DIR = "reports"
SUFFIXES = (".tar.gz", ".tgz", ".tar")

MAX_MEMBERS = 200_000
MAX_NAME_BYTES = 1024
MAX_PART_BYTES = 255
MAX_DEPTH = 12
MAX_MANIFEST_BYTES = 1 << 20


@dataclass(frozen=True)
class Limits:
    """How much an archive may unpack to: one member, all of them."""
    member_bytes: int = 16 << 30
    total_bytes: int = 64 << 30


def is_archive(path: Path) -> bool:
    """A --results that names a file (a folder is a results tree)."""
    return path.is_file() or (not path.exists() and path.name.endswith(SUFFIXES))


MAX_REASON = 240     # characters of an archive library's own words kept in the one line


def _refuse(archive: Path, why: str) -> UsageError:
    """One line: the library's words (gzip's, tarfile's) may span several."""
    why = " ".join(why.split())
    why = why if len(why) <= MAX_REASON else why[:MAX_REASON - 3] + "..."
    return UsageError(f"{archive}: {why}; not opened (a bundle is made by `stallbench export "
                      "RESULTS --format bundle`)")


def member_problem(member: tarfile.TarInfo, limits: Limits) -> str | None:
    """Why this member may not be unpacked (None: it may)."""
    name = member.name
    if member.issym() or member.islnk():
        return f"member {name!r} is a link (to {member.linkname!r})"
    if member.isdev() or member.isfifo():
        return f"member {name!r} is a device or FIFO"
    if member.issparse():
        return f"member {name!r} is a sparse file"
    if not (member.isreg() or member.isdir()):
        return f"member {name!r} is not a regular file or folder"
    problem = name_problem(name)
    if problem:
        return f"member {name!r}: {problem}"
    if member.isreg() and member.size > limits.member_bytes:
        return (f"member {name!r} is {member.size:,} bytes, more than a member may be "
                f"({limits.member_bytes:,})")
    return None


def name_problem(name: str) -> str | None:
    """Why a member's name is not a plain relative path inside the bundle."""
    if not name or "\0" in name or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return "an empty name or a control character in it"
    if name.startswith("/") or "\\" in name:
        return "an absolute name (or a backslash)"
    if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        return "a name too long"
    parts = PurePosixPath(name).parts
    if any(part in ("..", ".") for part in name.rstrip("/").split("/")) or not parts:
        return "a name with '..' or '.' in it"
    if len(parts) > MAX_DEPTH:
        return "a name nested too deeply"
    if any(len(part.encode("utf-8", "surrogateescape")) > MAX_PART_BYTES for part in parts):
        return "a name with a part too long"
    return None


def _unpack(archive: Path, into: Path, limits: Limits) -> dict[str, Any]:
    """Every member checked, then written under `into`; returns the manifest."""
    seen: dict[str, bool] = {}      # name -> is a folder
    total = 0
    free = shutil.disk_usage(into).free
    try:
        with tarfile.open(archive, "r:*") as tar:
            for count, member in enumerate(tar, 1):
                if count > MAX_MEMBERS:
                    raise _refuse(archive, f"more than {MAX_MEMBERS:,} members")
                problem = member_problem(member, limits)
                if problem:
                    raise _refuse(archive, problem)
                name = member.name.rstrip("/")
                if name in seen:
                    raise _refuse(archive, f"member {name!r} is there twice")
                parent = str(PurePosixPath(name).parent)
                for ancestor in [*PurePosixPath(name).parents][:-1]:
                    if seen.get(str(ancestor)) is False:
                        raise _refuse(archive, f"member {name!r} is inside a file")
                seen[name] = member.isdir()
                target = into / name
                if member.isdir():
                    target.mkdir(mode=0o700, parents=True, exist_ok=True)
                    continue
                total += member.size
                if total > limits.total_bytes:
                    raise _refuse(archive, f"its members hold more than "
                                           f"{limits.total_bytes:,} bytes")
                if total > free:
                    raise UsageError(f"{archive}: unpacked it needs {total:,} bytes, more than "
                                     f"the {free:,} free in {into.parent} (set TMPDIR to a "
                                     "folder with room)")
                (into / parent).mkdir(mode=0o700, parents=True, exist_ok=True)
                _copy_member(tar, member, target)
    except tarfile.TarError as exc:
        raise _refuse(archive, f"not a readable archive ({exc})") from None
    except (EOFError, zlib.error, lzma.LZMAError) as exc:
        raise _refuse(archive, f"damaged (it ends early or does not decompress: {exc})") \
            from None
    except OSError as exc:
        if isinstance(exc, (PermissionError, FileNotFoundError)) and exc.filename == \
                str(archive):
            raise UsageError(f"{archive}: cannot read ({exc.strerror})") from None
        raise _refuse(archive, f"damaged ({exc.strerror or exc})") from None
    return _manifest(archive, into)


def _copy_member(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    source = tar.extractfile(member)
    if source is None:
        raise tarfile.TarError(f"member {member.name!r} has no data")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with source, os.fdopen(fd, "wb") as out:
        left = member.size
        while left > 0:
            chunk = source.read(min(left, 1 << 20))
            if not chunk:
                raise EOFError(f"member {member.name!r} ends early")
            out.write(chunk)
            left -= len(chunk)


def _manifest(archive: Path, into: Path) -> dict[str, Any]:
    path = into / MANIFEST_FILE
    try:
        if not path.is_file() or path.stat().st_size > MAX_MANIFEST_BYTES:
            raise ValueError
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        raise _refuse(archive, f"no readable {MANIFEST_FILE} in it: not a stallbench "
                               "bundle") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
        raise _refuse(archive, f"a bundle of another format ({MANIFEST_FILE} format "
                               f"{manifest.get('format') if isinstance(manifest, dict) else '?'}"
                               f", this stallbench reads {FORMAT_VERSION})")
    if not (into / RESULTS_DIR).is_dir():
        raise _refuse(archive, f"no {RESULTS_DIR}/ folder in it")
    return manifest


def _journal() -> Any:
    """A cleanup journal for the temporary folder (so `stallbench cleanup` removes it after a
    kill -9), or None where this user has no state folder."""
    from ..core.journal import Journal

    try:
        return Journal()
    except (OSError, UsageError):
        return None


@contextlib.contextmanager
def opened(archive: Path, limits: Limits | None = None) -> Iterator[Path]:
    """The bundle unpacked in a temporary folder of its own; yields its results tree. The
    folder is journaled before it is made and removed when the block ends, however it ends."""
    archive = Path(archive)
    if not archive.is_file():
        raise UsageError(f"{archive}: no such bundle (a results directory or a .tar.gz made by "
                         "`stallbench export RESULTS --format bundle`)")
    with terminate_unwinds():
        folder = Path(tempfile.gettempdir()) / \
            f"stallbench-bundle-{os.getpid()}-{secrets.token_hex(6)}"
        journal = _journal()
        try:
            if journal is not None:
                journal.push("rmtree", path=str(folder))
            folder.mkdir(mode=0o700)
            _unpack(archive, folder, limits or Limits())
            yield folder / RESULTS_DIR
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            if journal is not None:
                journal.undo_all()
                journal.close()


@contextlib.contextmanager
def results_tree(path: Path | None) -> Iterator[Path | None]:
    """A command's --results: a bundle opened (opened()), a folder (or None) as it is."""
    if path is not None and is_archive(Path(path)):
        with opened(Path(path)) as tree:
            yield tree
    else:
        yield path
