"""A bundle that is damaged or made to harm (results/bundle.py): `../` names, absolute paths,
symbolic and hard links, device nodes and FIFOs, an oversized member, a name given twice, a
file where a folder goes, a truncated or corrupt archive, a foreign one. Each is refused by
`stallbench compare --results FILE` with one line and exit 2, nothing is written outside the
temporary folder (the folder the test watches, standing for the places those names point to,
is as it was; no stallbench-bundle-* folder is left in TMPDIR), and a good bundle still opens.
The archives are made here with tarfile, member by member, as an attacker would."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from conftest import run_stallbench
from stallbench.core.errors import UsageError
from stallbench.results import bundle

pytestmark = pytest.mark.pure

MANIFEST = json.dumps({"format": bundle.FORMAT_VERSION, "results": "results"}).encode()


def _member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, link: str = "",
            size: int | None = None) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.size = len(data) if size is None else size
    if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = 1, 3
    return info, data


def _archive(path: Path, members: list[tuple[tarfile.TarInfo, bytes]],
             manifest: bool = True) -> Path:
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        if manifest:
            info, data = _member(bundle.MANIFEST_FILE, MANIFEST)
            tar.addfile(info, io.BytesIO(data))
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


@pytest.fixture
def watched(tmp_path) -> Path:
    """The folder the hostile names aim at (the test's own, so nothing real is at risk)."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    return folder


def _state(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(folder.rglob("*"))}


def _tmp_bundles(tmpdir: Path) -> list[Path]:
    return sorted(tmpdir.glob("stallbench-bundle-*"))


def _hostile(watched: Path) -> dict[str, list[tuple[tarfile.TarInfo, bytes]]]:
    aim = os.path.relpath(watched, "/")
    return {
        "dot-dot name": [_member("results/" + "../" * 40 + aim + "/evil.txt", b"x")],
        "absolute name": [_member(str(watched / "evil.txt"), b"x")],
        "symlink": [_member("results/link", kind=tarfile.SYMTYPE, link=str(watched)),
                    _member("results/link/evil.txt", b"x")],
        "hardlink": [_member("results/hard", kind=tarfile.LNKTYPE,
                             link=str(watched / "keep.txt"))],
        "char device": [_member("results/null", kind=tarfile.CHRTYPE)],
        "block device": [_member("results/disk", kind=tarfile.BLKTYPE)],
        "fifo": [_member("results/pipe", kind=tarfile.FIFOTYPE)],
        "a name twice": [_member("results/a/run.json", b"{}"),
                         _member("results/a/run.json", b"{}")],
        "a file where a folder goes": [_member("results/a", b"x"),
                                       _member("results/a/run.json", b"{}")],
        "a control character": [_member("results/a\nb", b"x")],
        "a backslash": [_member("results\\..\\evil", b"x")],
    }


@pytest.mark.parametrize("case", sorted(_hostile(Path("/x"))))
def test_a_hostile_archive_is_refused_and_writes_nothing_outside(case, tmp_path, watched):
    archive = _archive(tmp_path / "evil.tar.gz", _hostile(watched)[case])
    before = _state(watched)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = run_stallbench("compare", "a", "b", "--results", str(archive),
                          env={"TMPDIR": str(tmpdir)})
    assert proc.returncode == 2, (case, proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("stallbench: "), proc.stderr
    assert "Traceback" not in proc.stderr and "not opened" in proc.stderr, proc.stderr
    assert _state(watched) == before
    assert not (tmp_path / "evil.txt").exists()
    assert _tmp_bundles(tmpdir) == []


def test_an_oversized_member_is_refused_before_its_data_is_written(tmp_path, watched):
    """The member's header says 64 MiB (data that compresses to nothing): over a 1 MiB bound,
    refused before a byte of it lands; over the free space likewise."""
    archive = _archive(tmp_path / "big.tar.gz",
                       [_member("results/a/ops.parquet", b"\0" * (64 << 20))])
    with pytest.raises(UsageError, match="more than a member may be"), \
            bundle.opened(archive, bundle.Limits(member_bytes=1 << 20)):
        pass
    with pytest.raises(UsageError, match="hold more than"), \
            bundle.opened(archive, bundle.Limits(member_bytes=1 << 30, total_bytes=1 << 20)):
        pass
    assert _state(watched) == {"keep.txt": b"mine"}


def test_damaged_and_foreign_archives_are_refused_in_one_line(tmp_path):
    good = _archive(tmp_path / "good.tar.gz", [_member("results/a/run.json", b"{}")])
    data = good.read_bytes()
    cases = {
        "truncated": data[: len(data) // 2],
        "corrupt": data[:20] + bytes(b ^ 0xFF for b in data[20:60]) + data[60:],
        "not an archive": b"PAR1 this is not a tarball at all\n" * 10,
        "empty": b"",
    }
    for name, content in cases.items():
        path = tmp_path / f"{name.replace(' ', '-')}.tar.gz"
        path.write_bytes(content)
        proc = run_stallbench("compare", "a", "b", "--results", str(path))
        assert proc.returncode == 2, name
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    foreign = _archive(tmp_path / "foreign.tar.gz", [_member("etc/passwd", b"x")],
                       manifest=False)
    proc = run_stallbench("series", "a", "b", "c", "--results", str(foreign))
    assert proc.returncode == 2 and "not a stallbench bundle" in proc.stderr


def test_a_good_bundle_opens_and_its_folder_goes_away(tmp_path):
    archive = _archive(tmp_path / "good.tar.gz", [_member("results/a/x/1/note.txt", b"hi")])
    with bundle.opened(archive) as tree:
        assert (tree / "a/x/1/note.txt").read_bytes() == b"hi"
        folder = tree.parent
        assert folder.name.startswith("stallbench-bundle-")
        assert oct(folder.stat().st_mode & 0o777) == oct(0o700)
    assert not folder.exists()
    with pytest.raises(RuntimeError), bundle.opened(archive) as tree:   # an error inside
        folder = tree.parent
        raise RuntimeError("the command failed")
    assert not folder.exists()


def test_sigterm_while_open_removes_the_folder(tmp_path):
    """A process that holds a bundle open and gets SIGTERM unwinds and removes its folder."""
    import signal
    import subprocess
    import sys
    import time

    archive = _archive(tmp_path / "good.tar.gz", [_member("results/a/x/1/note.txt", b"hi")])
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    # SIGTERM as a shell leaves it (a test before may have left it ignored, and children
    # inherit an ignored signal)
    code = ("import signal, time\nfrom pathlib import Path\nfrom stallbench.results import bundle\n"
            "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
            f"with bundle.opened(Path({str(archive)!r})) as tree:\n"
            "    print(tree, flush=True)\n    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmpdir)})
    tree = Path(proc.stdout.readline().strip())
    assert tree.is_dir()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    deadline = time.monotonic() + 5
    while tree.parent.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not tree.parent.exists()
    assert _tmp_bundles(tmpdir) == []
