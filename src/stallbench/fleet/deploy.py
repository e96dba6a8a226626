"""`stallbench deploy --hosts INVENTORY`: this controller's stallbench, exactly, on every host of
an inventory, in a virtual environment of its own, with nothing downloaded on the hosts.

The controller makes the wheels. stallbench's own: from its source tree with the build backend
already installed here (the code this controller runs, uncommitted edits included), or, when it
was installed from a wheel, repacked from its installed files; every dependency, and pip, is
repacked from its installed files (the very versions and builds the controller runs; repacking
is deterministic and cached here (wheel_cache()), so an unchanged wheel is neither made nor
sent again). They are copied to the host with
rsync (synchronize, as runs are pulled), where the host's Python (`stallbench_python`, default
python3: the controller's major.minor on the same machine type, which the probe checks first)
makes the venv (`-m venv --without-pip`: no python3-venv package needed) and the shipped pip
installs them with --no-index. Only shell runs on the host (`raw`), so Ansible's own Python
there does not matter. A fleet run's default command is that venv's stallbench
(fleet/inventory.py).

A venv is replaced only when it is one that deploy made (its marker file); one already holding
these very wheels is left as it is. pip installs with --no-compile: compiling every module of
numpy, scipy, pyarrow and matplotlib (their tests included) took most of an install's time here
(28 s of 38); Python compiles what stallbench imports on its first start instead (as root, the
runs' user), before any measurement.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..core.errors import UsageError
from ..core.version import __version__
from .ansible import Runner, check_ansible
from .inventory import HostConfig, host_config, load_inventory

WHEEL_BACKEND = "setuptools>=77"   # bdist_wheel built in, PEP 639 license: no `wheel` package
MARKER = ".stallbench-deployed"     # in the venv: the wheelhouse digest, "partial" while made
# dist-info files the installer writes itself
_INSTALLER_FILES = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


@dataclass
class Wheelhouse:
    directory: Path
    wheels: list[Path]
    digest: str                       # of every wheel's name and content

    @property
    def size(self) -> int:
        return sum(p.stat().st_size for p in self.wheels)


@dataclass
class DeployReport:
    host: str
    ok: bool = False
    message: str = ""


def python_tag() -> str:
    """What the hosts' Python must be for these wheels: major.minor and machine."""
    return f"{sys.version_info[0]}.{sys.version_info[1]}-{platform.machine()}"


# -- the wheels ---------------------------------------------------------------------------------

def _requirement_names(dist: metadata.Distribution) -> list[str]:
    from packaging.requirements import Requirement
    names = []
    for text in dist.requires or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.append(requirement.name)
    return names


def dependencies(name: str = "stallbench") -> list[metadata.Distribution]:
    """The installed distributions `name` needs to run (its Requires-Dist, without extras,
    and theirs), in a stable order."""
    seen: dict[str, metadata.Distribution] = {}
    todo = _requirement_names(metadata.distribution(name))
    while todo:
        wanted = todo.pop()
        key = re.sub(r"[-_.]+", "-", wanted).lower()
        if key in seen:
            continue
        try:
            dist = metadata.distribution(wanted)
        except metadata.PackageNotFoundError:
            raise UsageError(f"deploy: {wanted}, which stallbench needs, is not installed on "
                             "this controller") from None
        seen[key] = dist
        todo.extend(_requirement_names(dist))
    return [seen[key] for key in sorted(seen)]


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=") \
        .decode()


def _wheel_name(dist: metadata.Distribution) -> str:
    wheel = dist.read_text("WHEEL")
    if wheel is None:
        raise UsageError(f"deploy: {dist.metadata['Name']} was not installed from a wheel "
                         "(no WHEEL file), so it cannot be repacked: reinstall it with pip")
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines()
            if line.startswith("Tag:")]
    parts = [list(dict.fromkeys(tag.split("-")[i] for tag in tags)) for i in range(3)]
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    return f"{name}-{dist.version}-{'-'.join('.'.join(p) for p in parts)}.whl"


def repack(dist: metadata.Distribution, out: Path) -> Path:
    """A wheel of an installed distribution, from the files its RECORD lists: the package files
    as installed, its dist-info (without what the installer adds), data files under the prefix
    as .data/data/; console scripts are made again by pip from entry_points.txt. Entries are
    in a fixed order with the files' own times, so the same installation repacks the same."""
    site = Path(dist.locate_file("")).resolve()
    prefix = Path(sys.prefix).resolve()
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    data_dir = f"{name}-{dist.version}.data/data/"
    entries: list[tuple[str, Path]] = []
    info_dir = None
    for relative in dist.files or []:
        path = (site / relative).resolve()
        parts = Path(relative).parts
        if "__pycache__" in parts or path.suffix == ".pyc" or not path.is_file():
            continue
        if parts[0] != "..":
            if parts[0].endswith(".dist-info"):
                info_dir = parts[0]
                if len(parts) == 2 and parts[1] in _INSTALLER_FILES:
                    continue
            entries.append((Path(relative).as_posix(), path))
        elif path.is_relative_to(prefix) and not path.is_relative_to(prefix / "bin"):
            entries.append((data_dir + path.relative_to(prefix).as_posix(), path))
    if info_dir is None:
        raise UsageError(f"deploy: {dist.metadata['Name']}: no .dist-info in its RECORD")
    target = out / _wheel_name(dist)
    record = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=1,
                         strict_timestamps=False) as wheel:
        for arcname, path in sorted(entries):
            data = path.read_bytes()
            record.append(f"{arcname},{_record_hash(data)},{len(data)}")
            wheel.write(path, arcname)
        record.append(f"{info_dir}/RECORD,,")
        info = zipfile.ZipInfo(f"{info_dir}/RECORD", date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        wheel.writestr(info, "\n".join(record) + "\n")
    return target


def _source_tree() -> Path | None:
    """The source tree this stallbench runs from (an editable install or a checkout)."""
    package = Path(__file__).resolve().parents[1]   # src/stallbench, fleet/'s parent
    root = package.parent.parent
    if package.parent.name == "src" and (root / "pyproject.toml").is_file():
        return root
    return None


def own_wheel(out: Path, scratch: Path) -> Path:
    """stallbench's wheel: built from the source tree it runs from, else repacked."""
    root = _source_tree()
    if root is None:
        return repack(metadata.distribution("stallbench"), out)
    if importlib.util.find_spec("setuptools") is None:
        raise UsageError("deploy builds stallbench's wheel from its source tree "
                         f"({root}) with setuptools, which is not installed here: "
                         f"pip install '{WHEEL_BACKEND}'")
    tree = scratch / "source"        # a copy: the build writes build/ and *.egg-info
    shutil.copytree(root / "src", tree / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (root / name).exists():
            shutil.copy2(root / name, tree / name)
    built = scratch / "built"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", "--no-index", "-w", str(built), str(tree)],
                          capture_output=True, text=True,
                          env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                               "SOURCE_DATE_EPOCH": "315532800"})   # the same code, same wheel
    wheels = sorted(built.glob(f"stallbench-{__version__}-*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        tail = (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise UsageError(f"deploy: building stallbench's wheel from {root} failed: {tail} "
                         f"(the build backend here must make wheels itself: pip install "
                         f"'{WHEEL_BACKEND}')")
    return Path(shutil.move(wheels[0], out / wheels[0].name))


def wheel_cache() -> Path:
    """Where repacked dependency wheels are kept between deploys."""
    if os.environ.get("STALLBENCH_WHEEL_CACHE"):
        return Path(os.environ["STALLBENCH_WHEEL_CACHE"])
    if os.geteuid() == 0:
        return Path("/var/cache/stallbench/wheels")
    return Path.home() / ".cache/stallbench/wheels"


def cached_repack(dist: metadata.Distribution, cache: Path) -> Path:
    """repack(), once per installed state of a distribution (its RECORD names every file
    with its hash)."""
    key = hashlib.sha256((dist.read_text("RECORD") or "").encode()).hexdigest()[:16]
    target = cache / key / _wheel_name(dist)
    if target.is_file():
        return target
    partial = cache / f".partial-{key}-{os.getpid()}-{threading.get_ident()}"
    partial.mkdir(parents=True, exist_ok=True)
    try:
        made = repack(dist, partial)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(made, target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def build_wheelhouse(directory: Path, log: Callable[[str], None]) -> Wheelhouse:
    """Every wheel a host needs, in `directory` (the dependencies as links into the cache)."""
    directory.mkdir(parents=True, exist_ok=True)
    dists = [*dependencies(), metadata.distribution("pip")]
    cache = wheel_cache()
    log(f"deploy: the wheels of stallbench {__version__} and {len(dists) - 1} dependencies "
        f"(and pip) from this controller's installation (cache: {cache})")
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        repacked = pool.map(lambda d: cached_repack(d, cache), dists)
        own = own_wheel(directory, directory.parent)
        wheels = [own]
        for path in repacked:
            (directory / path.name).symlink_to(path)
            wheels.append(directory / path.name)
    wheels.sort()
    digest = hashlib.sha256()
    for wheel in wheels:
        digest.update(wheel.name.encode() + b"\0")
        with open(wheel, "rb") as f:
            digest.update(hashlib.file_digest(f, "sha256").digest())
    return Wheelhouse(directory, wheels, digest.hexdigest())


# -- the hosts ----------------------------------------------------------------------------------

_CHECK = r"""py="$1"; want="$2"; v="$3"; w="$4"
tag='import platform, sys; print("%d.%d-%s" % (*sys.version_info[:2], platform.machine()))'
got=$("$py" -c "$tag" 2>&1 </dev/null) || {
    echo "deploy: $py does not run ($(printf '%s\n' "$got" | sed -n '/./{p;q;}'))" >&2; exit 4; }
[ "$got" = "$want" ] || {
    echo "deploy: $py is Python $got, the controller's wheels are for $want:" \
         "set stallbench_python to a Python ${want%-*} there" >&2; exit 4; }
command -v rsync >/dev/null || { echo "deploy: rsync is not installed" >&2; exit 3; }
mkdir -p -- "$w" || exit 5
if "$v/bin/stallbench" --version >/dev/null 2>&1; then
    echo "deployed $(cat "$v/@MARKER@" 2>/dev/null)"
else
    echo "deployed none"
fi""".replace("@MARKER@", MARKER)

_INSTALL = r"""py="$1"; v="$2"; w="$3"; version="$4"; digest="$5"
if [ -e "$v" ] || [ -L "$v" ]; then
    if [ -f "$v/@MARKER@" ]; then rm -rf -- "$v"
    elif [ -d "$v" ] && [ -z "$(ls -A -- "$v")" ]; then rmdir -- "$v"
    else
        echo "deploy: $v exists and is not a venv that stallbench deploy made;" \
             "remove it or set stallbench_venv" >&2
        exit 5
    fi
fi
mkdir -p -- "$(dirname -- "$v")" && "$py" -m venv --without-pip "$v" || exit 6
echo partial > "$v/@MARKER@"
set -- "$w"/pip-*.whl
env -u PYTHONPATH PIP_CONFIG_FILE=/dev/null "$v/bin/python" "$1/pip" install -q --no-index \
    --find-links "$w" --no-cache-dir --disable-pip-version-check --no-warn-script-location \
    --no-compile "stallbench==$version" pip 2>&1 || exit 7
"$v/bin/stallbench" --version || exit 8
echo "$digest" > "$v/@MARKER@"
""".replace("@MARKER@", MARKER)


class Deploy:
    def __init__(self, source: Path | list[str], directory: Path,
                 log: Callable[[str], None] = print):
        check_ansible()
        self.log = log
        self.directory = directory
        inventory = load_inventory(source, directory)
        self.hosts = [host_config(name, variables) for name, variables in inventory.hosts.items()]
        self.runner = Runner(inventory.path, directory / "ansible")

    def run(self) -> list[DeployReport]:
        """Check every host (its Python, rsync, what it has), make the wheels, install them
        where they are not already."""
        with ThreadPoolExecutor(max_workers=min(len(self.hosts), 16)) as pool:
            checked = list(pool.map(self._check, self.hosts))
        if not any(deployed is not None for _report, deployed in checked):
            return [report for report, _deployed in checked]
        house = build_wheelhouse(self.directory / "wheels", self.log)
        self.log(f"deploy: {len(house.wheels)} wheels, {house.size / 2**20:.0f} MiB")
        with ThreadPoolExecutor(max_workers=min(len(self.hosts), 16)) as pool:
            return list(pool.map(lambda item: self._install(*item, house),
                                 zip(self.hosts, checked, strict=True)))

    def _check(self, cfg: HostConfig) -> tuple[DeployReport, str | None]:
        """(report, the digest of what deploy last installed there, "" for none), or None
        for the digest when the host cannot take these wheels (the report says why)."""
        report = DeployReport(cfg.name)
        check = self.runner.run(cfg.name, "deploy-check", [{
            "name": "check", "raw": shlex.join(["sh", "-c", _CHECK, "check", cfg.python,
                                                python_tag(), cfg.venv, f"{cfg.venv}.wheels"])}])
        if not check.ok:
            report.message = _why(check, "check")
            return report, None
        last = (check.task("check").get("stdout_lines") or [""])[-1].strip()
        return report, last.removeprefix("deployed ").strip()

    def _install(self, cfg: HostConfig, checked: tuple[DeployReport, str | None],
                 house: Wheelhouse) -> DeployReport:
        report, deployed = checked
        if deployed is None:
            return report
        if deployed == house.digest:
            report.ok = True
            report.message = f"stallbench {__version__} in {cfg.venv}: up to date"
            return report
        wheels = f"{cfg.venv}.wheels"
        done = self.runner.run(cfg.name, "deploy", [
            {"name": "copy", "ansible.posix.synchronize": {
                "mode": "push", "src": f"{house.directory}/", "dest": f"{wheels}/",
                "delete": True, "checksum": True, "compress": False, "archive": True,
                "copy_links": True, "use_ssh_args": True, "verify_host": True}},
            {"name": "install", "raw": shlex.join(["sh", "-c", _INSTALL, "install", cfg.python,
                                                   cfg.venv, wheels, __version__,
                                                   house.digest])},
        ], timeout=3600)
        if not done.ok:
            report.message = _why(done, "copy", "install")
            return report
        lines = [line.strip() for line in done.task("install").get("stdout_lines") or []]
        if not lines or lines[-1] != f"stallbench {__version__}":
            report.message = f"the installed stallbench says {lines[-1] if lines else 'nothing'}"
            return report
        report.ok = True
        report.message = f"installed stallbench {__version__} in {cfg.venv} (with " \
                         f"{cfg.python}; wheels in {wheels})"
        return report


def _why(result, *tasks: str) -> str:
    """A failed playbook's message without the task name in front."""
    for task in tasks:
        if result.message.startswith(f"{task}: "):
            return result.message.removeprefix(f"{task}: ")
    return result.message


def deploy(source: Path | list[str], log: Callable[[str], None] = print) -> list[DeployReport]:
    """Install this controller's stallbench on every host of `source` (inventory or targets)."""
    with tempfile.TemporaryDirectory(prefix="stallbench-deploy-") as scratch:
        return Deploy(source, Path(scratch), log).run()
