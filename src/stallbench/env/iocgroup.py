"""--io-max, --io-weight, --io-latency: the I/O controller for the workload's processes, on the
block device under its directory.

cgroup v2 (a cgroup2 mount whose root offers and enables `io` for children): io.max
("MAJ:MIN rbps=N wbps=N riops=N wiops=N"), io.weight ("default N") and io.latency
("MAJ:MIN target=USEC"), written into the workload's memory cgroup when that is v2 on the same
mount (a process is in one v2 cgroup only), else into a cgroup of its own. cgroup v1 (a `blkio`
mount): blkio.throttle.{read,write}_{bps,iops}_device ("MAJ:MIN N") and blkio.weight or
blkio.bfq.weight where the kernel has them; v1 has no latency target. The v1 throttle limits
direct and synchronous I/O: buffered writes are written back by kernel threads outside the
cgroup and are not throttled (cgroup v2 with its writeback support is needed for that).

The cgroup (`stallbench-<pid>-<n>`) is journaled (kind "cgroup", env/memcg.py) before it is made
and removed after the run; the settings are files inside it and go with it. A knob the machine
lacks is refused before anything changes, naming what exists.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..core.errors import UsageError
from ..core.journal import Journal
from ..settings.variant import VariantSettings
from .memcg import Controller, MemoryCgroup, cgroup_joiner, find_controller, make_cgroup

V1_THROTTLE = {"rbps": "blkio.throttle.read_bps_device", "wbps": "blkio.throttle.write_bps_device",
               "riops": "blkio.throttle.read_iops_device",
               "wiops": "blkio.throttle.write_iops_device"}
V1_WEIGHTS = ("blkio.weight", "blkio.bfq.weight")


def wanted(settings: VariantSettings) -> bool:
    return bool(settings.io_max) or settings.io_weight is not None \
        or settings.io_latency_us is not None


def find_io_controller() -> Controller | None:
    """v2 where the io controller is enabled for children, else v1 blkio, else None."""
    return find_controller("io", "blkio")


def _v1_weight_file(root: Path) -> str | None:
    return next((name for name in V1_WEIGHTS if (root / name).exists()), None)


def check(settings: VariantSettings, controller: Controller | None) -> None:
    """Refuse what this machine's I/O controller cannot do (before any change)."""
    if not wanted(settings):
        return
    flag = "--io-max" if settings.io_max else (
        "--io-weight" if settings.io_weight is not None else "--io-latency")
    if os.geteuid() != 0:
        raise UsageError(f"{flag}: needs root (creating an I/O cgroup)")
    if controller is None:
        raise UsageError(f"{flag}: no I/O cgroup controller here (neither cgroup v2 with `io` "
                         "enabled in cgroup.subtree_control nor a cgroup v1 blkio mount)")
    if controller.version == 1:
        missing = [V1_THROTTLE[k] for k in settings.io_max
                   if not (controller.root / V1_THROTTLE[k]).exists()]
        if missing:
            raise UsageError(f"--io-max: this kernel's blkio controller has no "
                             f"{', '.join(missing)} (CONFIG_BLK_DEV_THROTTLING)")
        if settings.io_weight is not None and _v1_weight_file(controller.root) is None:
            raise UsageError("--io-weight: the cgroup v1 blkio controller here has no weight "
                             f"file ({' or '.join(V1_WEIGHTS)}: needs the bfq scheduler's cgroup "
                             f"support or CFQ); it offers only {_offered(controller.root)}")
        if settings.io_latency_us is not None:
            raise UsageError("--io-latency: cgroup v1 blkio has no latency target (io.latency "
                             "is cgroup v2 only); this machine's I/O controller is v1")
    elif settings.io_weight is not None and settings.io_weight > 10_000:
        raise UsageError("--io-weight: from 1 to 10000")


def _offered(root: Path) -> str:
    names = sorted(p.name for p in root.glob("blkio.throttle.*_device"))
    return ", ".join(names) or "no throttle files"


def device_number(device: str) -> str:
    try:
        return (Path("/sys/block") / device / "dev").read_text().strip()
    except OSError:
        raise UsageError(f"--io-max: cannot find the device number of {device}") from None


@contextlib.contextmanager
def io_cgroup(settings: VariantSettings, controller: Controller, devices: list[str],
              memory_cgroup: MemoryCgroup | None, journal: Journal,
              metadata: dict[str, Any]) -> Iterator[Callable[[], None]]:
    """Set the I/O knobs; yields the function a workload child runs to join the cgroup (a no-op
    when the knobs went into the memory cgroup the child joins anyway)."""
    if not devices:
        raise UsageError("--io-max/--io-weight/--io-latency: no block device under the "
                         "workload's directory")
    device = devices[-1]
    number = device_number(device)
    shared = (memory_cgroup is not None and controller.version == 2
              and memory_cgroup.version == 2
              and Path(memory_cgroup.path).parent == controller.root)
    entry = None
    if shared:
        path = Path(memory_cgroup.path)
    else:
        path, entry = make_cgroup(controller, journal)
    metadata.update({"cgroup": str(path), "version": controller.version, "device": device,
                     "dev": number, "files": {}})
    try:
        for name, value in _writes(settings, controller, number):
            target = path / name
            try:
                target.write_text(value)
            except OSError as exc:
                raise UsageError(f"I/O cgroup: the kernel refused {name} = {value!r} "
                                 f"({exc.strerror})") from None
            metadata["files"][name] = {"written": value, "now": _read(target)}
        yield (lambda: None) if shared else cgroup_joiner(path)
    finally:
        if controller.version == 1:
            metadata["io_service_bytes"] = _read(path / "blkio.throttle.io_service_bytes")
        else:
            metadata["io_stat"] = _read(path / "io.stat")
        if entry is not None:
            journal.undo(entry)


def _writes(settings: VariantSettings, controller: Controller, number: str
            ) -> list[tuple[str, str]]:
    if controller.version == 2:
        writes = []
        if settings.io_max:
            writes.append(("io.max", number + " " + " ".join(
                f"{k}={v}" for k, v in settings.io_max.items())))
        if settings.io_weight is not None:
            writes.append(("io.weight", f"default {settings.io_weight}"))
        if settings.io_latency_us is not None:
            writes.append(("io.latency", f"{number} target={settings.io_latency_us}"))
        return writes
    writes = [(V1_THROTTLE[k], f"{number} {v}") for k, v in settings.io_max.items()]
    if settings.io_weight is not None:
        name = _v1_weight_file(controller.root)
        assert name is not None
        writes.append((name, str(settings.io_weight)))
    return writes


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


