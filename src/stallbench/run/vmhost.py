"""The host side of a kernel variant: boot the variant's kernel under QEMU, run the workload
and the monitors in the guest with this stallbench installation, bring the run directory back.

Every change is journaled before it is made: the QEMU process (`kill`), the guest's disk image
(`unlink`) and the exchange directory inside the run directory (`rmtree`); the run itself has a
`finalize_run` entry like a local one. The guest has no network device, so no tap device is made.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import pickle
import shlex
import socket
import sys
import threading
import time
from pathlib import Path, PurePosixPath
from typing import Any

from ..analysis.display import format_size
from ..core import machineload
from ..core.envvars import GUEST_ACCEL
from ..core.errors import RunDataError, UsageError
from ..core.hostfacts import kernel_info
from ..core.journal import Journal
from ..plan.plan import Plan
from ..plan.record import plan_record
from ..results.guestnote import TCG_NOTE
from ..results.regular import copy_regular
from ..results.rundirs import RUN_FILE
from ..results.runmeta import Status, read_meta
from ..results.store import RunWriter
from ..settings.variant import VariantSettings
from ..vm import exchange as guest_side  # the contract with run/guest.py
from ..vm.checks import DEFAULT_CPUS, DEFAULT_MEMORY
from ..vm.initramfs import build_initramfs
from ..vm.kernel import KernelError, cache_dir, pvh_vmlinux, resolve_kernel
from ..vm.qemu import Guest, GuestError, choose_accel, qemu_argv, qemu_binary, qemu_version
from ..workloads import native
from .job import Interrupt, RunJob
from .undo import undo_kinds

BOOT_TIMEOUT_S = {"kvm": 60.0, "tcg": 120.0}
RUN_GRACE_S = 600.0          # setup in the guest (data files) on top of the run's duration
_counter = itertools.count(1)


def run_in_guest(job: RunJob) -> tuple[Path, Status, str | None]:
    """One run of one kernel variant; returns (run directory, status, reason)."""
    plan, variant, workload = job.plan, job.variant, job.workload
    cpus = variant.vm_cpus or DEFAULT_CPUS
    memory = variant.vm_memory or DEFAULT_MEMORY
    with Journal(kinds=undo_kinds()) as journal:
        writer = RunWriter(plan.results, variant.name, workload.name, workload.params())
        writer.meta.plan = plan_record(plan, variant)
        writer.meta.round_order = job.round_record
        unfinished = journal.push("finalize_run", path=str(writer.path.resolve()))
        writer.meta.ops_declared = list(workload.ops)
        writer.meta.duration_planned_s = plan.duration_s
        vm: dict[str, Any] = {"kernel_spec": variant.kernel, "vcpus": cpus, "memory": memory,
                              "host": {"name": socket.gethostname(), "kernel": kernel_info()}}
        writer.meta.environment = {"vm": vm}
        writer.save()
        try:
            status, reason = _boot_and_run(job, journal, writer, vm, cpus, memory)
        except (KernelError, GuestError) as exc:
            status, reason = Status.FAILED, str(exc)
        except KeyboardInterrupt:
            status = Status.INTERRUPTED
            reason = f"stopped by {job.interrupt.signalled or 'signal'} before the run finished"
        except UsageError as exc:
            writer.finalize(Status.FAILED, str(exc))
            journal.forget(unfinished)
            raise
        except Exception as exc:  # noqa: BLE001 - the run fails with the reason, the plan goes on
            status, reason = Status.FAILED, f"{type(exc).__name__}: {exc}"
        journal.forget(unfinished)
        errors = journal.undo_all()
        if errors:
            writer.note("cleanup problems: " + "; ".join(errors))
        writer.finalize(status, reason)
        return writer.path, status, reason


def _boot_and_run(job: RunJob, journal: Journal, writer: RunWriter, vm: dict[str, Any],
                  cpus: int, memory: int) -> tuple[Status, str | None]:
    plan, variant, workload, log = job.plan, job.variant, job.workload, job.log
    binary = qemu_binary()
    vm["qemu"] = qemu_version(binary)
    kernel = resolve_kernel(variant.kernel, variant.work_dir, journal)
    vm.update(release=kernel.release, image=str(kernel.image), image_sha256=kernel.digest,
              config_sha256=writer.keep_kernel_config(kernel.config))
    for option in ("CONFIG_NET_9P_VIRTIO", "CONFIG_9P_FS", "CONFIG_VIRTIO_PCI"):
        if kernel.config and kernel.config.get(option) not in ("y", "m"):
            raise KernelError(f"{kernel.release}: {option} is not set, and stallbench shares "
                              "the host's files with the guest over virtio-9p; use a kernel "
                              "with 9p and virtio (Debian's amd64 or rt flavour, not cloud)")
    fs = variant.fs or "ext4"
    cache = cache_dir(variant.work_dir)
    initramfs = build_initramfs(kernel, [fs], cache, journal)
    boot_image = pvh_vmlinux(kernel, cache, journal)
    vm["boot"] = "PVH entry of the uncompressed kernel" if boot_image else "bzImage"
    accel, why_not_kvm = choose_accel(binary, kernel, initramfs, cache, journal, log, boot_image)
    vm["hypervisor"] = accel
    if why_not_kvm:
        vm["kvm_not_used"] = why_not_kvm
    if accel == "tcg":
        writer.note(TCG_NOTE)
        log(f"{variant.name}: {TCG_NOTE}")

    exchange = writer.path / ".guest"
    journal.push("rmtree", path=str(exchange.resolve()))
    exchange.mkdir()
    disk = _make_disk(variant, plan, journal, memory)
    vm["disk"] = {"image": str(disk), "size": disk.stat().st_size, "fs": fs}
    _write_job(exchange, plan, variant, job.monitors, fs, accel)

    argv = qemu_argv(binary, kernel, initramfs, accel, cpus, memory, exchange, disk,
                     "STALLBENCH_HOST_TMP=1" if _installed_under_tmp() else "",
                     boot_image=boot_image)
    vm["qemu_argv"] = argv
    writer.save()
    booted_at = time.monotonic()
    guest = Guest(argv, journal, writer.path / "console.log",
                  on_line=lambda line: None if line.startswith("[") else log(f"  guest: {line}"))
    try:
        boot_timeout = float(os.environ.get("STALLBENCH_VM_BOOT_TIMEOUT") or BOOT_TIMEOUT_S[accel])
        log(f"{variant.name}: booting {kernel.release} under {accel.upper()} "
            f"({cpus} vCPUs, {format_size(memory)})")
        if not guest.wait_mark("up", boot_timeout):
            failed = guest.mark("fail")
            code = guest.proc.poll()
            if failed:
                what = f"the guest could not start: {failed.removeprefix('fail ')}"
            elif code is None:
                what = f"{kernel.release} did not boot within {boot_timeout:g} s"
            else:
                what = f"{kernel.release} stopped during boot (QEMU exit {code})"
            raise GuestError(f"{what}; last console lines: {guest.console_tail()}")
        vm["boot_s"] = round(time.monotonic() - booted_at, 2)
        load_at_up = machineload.snapshot()
        log(f"{variant.name}: {kernel.release} up after {vm['boot_s']:.1f} s; running "
            f"{workload.name} in the guest")
        warmup = plan.warmup_s or 0.0
        timeout = float(os.environ.get("STALLBENCH_VM_TIMEOUT") or
                        (plan.duration_s + warmup) * 2 + RUN_GRACE_S)
        stop = threading.Event()
        sent = False
        deadline = time.monotonic() + timeout
        with job.interrupt.stoppable(stop):
            while guest.wait_exit(0.2) is None:
                if stop.is_set() and not sent:
                    guest.send(b"\x03")        # the guest's job sees SIGINT: it keeps its ops
                    sent = True
                if time.monotonic() > deadline:
                    raise GuestError(f"the guest gave no result within {timeout:.0f} s (hung?); "
                                     f"last console lines: {guest.console_tail()}")
        host_load = machineload.between(load_at_up, machineload.snapshot())
    finally:
        guest.stop()
    vm["guest_s"] = round(time.monotonic() - booted_at, 2)
    return _collect(exchange, writer, vm, guest, job.interrupt, host_load)


def _installed_under_tmp() -> bool:
    """The guest gets its own /tmp, unless this stallbench (or its Python) lives under the
    host's /tmp: then the guest keeps seeing that, read-only, and writes under /run/tmp."""
    package = os.path.dirname(os.path.dirname(__file__))   # src/stallbench, run/'s parent
    paths = [sys.executable, os.path.realpath(sys.executable), sys.prefix, package]
    return any(os.path.realpath(p).startswith("/tmp/") or p.startswith("/tmp/") for p in paths)


def _make_disk(variant: VariantSettings, plan: Plan, journal: Journal, memory: int) -> Path:
    from ..env.loopfs import MIN_SIZE

    fs = variant.fs or "ext4"
    size = variant.fs_size or max(MIN_SIZE[fs], 2 * memory + (1 << 30))  # data ~2x memory
    work_dir = Path(variant.work_dir) if variant.work_dir else plan.results / ".work"
    work_dir.mkdir(parents=True, exist_ok=True)
    while True:
        image = work_dir.resolve() / f"stallbench-vm-{os.getpid()}-{next(_counter)}.img"
        entry = journal.push("unlink", path=str(image))
        try:
            fd = os.open(image, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            journal.forget(entry)
            continue
        try:
            os.ftruncate(fd, size)        # sparse: only what the guest writes takes space
        finally:
            os.close(fd)
        return image


def _write_job(exchange: Path, plan: Plan, variant: VariantSettings, monitor_names: list[str],
               fs: str, accel: str) -> None:
    inner = dataclasses.replace(variant, kernel=None, vm_cpus=None, vm_memory=None, fs=None,
                                fs_size=None, mkfs_opts="", mount_opts="", keep_image=False,
                                work_dir=None, dir=None)
    guest_plan = dataclasses.replace(plan, variants=[inner], iterations=1,
                                     results=guest_side.EXCHANGE / "results",
                                     monitors=list(monitor_names), source=None)
    job = {"plan": guest_plan, "fs": fs, "mkfs_opts": variant.mkfs_opts or "",
           "mount_opts": variant.mount_opts or ""}
    (exchange / guest_side.JOB_FILE).write_bytes(pickle.dumps(job))
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": "/tmp", "TERM": "dumb", "PYTHONDONTWRITEBYTECODE": "1",
           "STALLBENCH_STATE_DIR": "/run/stallbench", GUEST_ACCEL: accel}
    for key in ("PYTHONPATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", native.NO_C_LOOP):
        if os.environ.get(key):
            env[key] = os.environ[key]
    cache_home = native.cache_home_for_guest()
    if cache_home:
        env["XDG_CACHE_HOME"] = cache_home
    if _installed_under_tmp():
        env["TMPDIR"] = "/run/tmp"
    lines = ["set -e", *(f"export {k}={shlex.quote(v)}" for k, v in env.items()),
             "mkdir -p /run/tmp", "cd /run/tmp",
             f"exec {shlex.quote(sys.executable)} -m stallbench.run.guest "
             f"{guest_side.EXCHANGE / guest_side.JOB_FILE}"]
    (exchange / "job.sh").write_text("\n".join(lines) + "\n")


def confined(exchange: Path, guest_path: object) -> Path:
    """The host's side of the run folder the guest named in its outcome: inside the exchange
    folder, by name and once resolved (a `..`, an absolute path elsewhere or a symlink the guest
    made is refused: the host would move files from outside)."""
    try:
        rel = PurePosixPath(str(guest_path)).relative_to(guest_side.EXCHANGE)
    except ValueError:
        rel = None
    folder = exchange / rel if rel is not None else None
    if rel is None or ".." in rel.parts or folder.is_symlink() \
            or not folder.resolve().is_relative_to(exchange.resolve()):
        raise GuestError(f"the guest named a result folder outside its exchange folder "
                         f"({str(guest_path)[:200]!r}): refused, nothing taken from it")
    if (folder / RUN_FILE).is_symlink():
        raise GuestError(f"the guest's {RUN_FILE} is a symlink: refused, nothing taken")
    return folder


def _collect(exchange: Path, writer: RunWriter, vm: dict[str, Any], guest: Guest,
             interrupt: Interrupt, host_load: dict[str, Any] | None) -> tuple[Status, str | None]:
    """Move the guest's run directory into the host's and merge its run.json. The run's
    machine_load is the host's from the guest being up to its exit (QEMU is the run's own): the
    guest's vCPUs are host threads, and the host's other processes take them without the
    guest seeing it (its own view, vm.guest_machine_load, said 0.0 others with three busy
    loops beside the host's two CPUs)."""
    try:
        outcome = json.loads((exchange / guest_side.OUTCOME_FILE).read_text())
    except (OSError, ValueError):
        if interrupt.signalled:               # the Ctrl-C reached the guest before its runner
            raise KeyboardInterrupt from None
        tail = guest.console_tail()
        panic = "panic" in tail.lower()
        what = "the guest kernel panicked" if panic else "the guest stopped without a result"
        raise GuestError(f"{what}; last console lines: {tail}") from None
    vm["disk"].update(outcome.get("disk") or {})
    if outcome.get("error"):
        if interrupt.signalled:
            raise KeyboardInterrupt
        raise GuestError(f"in the guest: {outcome['error']}")
    runs = outcome.get("outcomes") or []
    if not runs:
        raise GuestError("the guest recorded no run")
    guest_dir = confined(exchange, runs[0].get("path"))
    try:
        merged = read_meta(guest_dir / RUN_FILE)
    except RunDataError as exc:          # the run fails with the reason, the plan goes on
        raise GuestError(f"the guest's {exc}") from None
    left_out = copy_regular(guest_dir, writer.path, move=True, leave=(RUN_FILE,))
    host = writer.meta
    merged.variant, merged.iteration, merged.pid = host.variant, host.iteration, host.pid
    merged.start_utc, merged.host, merged.plan = host.start_utc, host.host, host.plan
    merged.round_order = host.round_order
    merged.duration_planned_s = host.duration_planned_s
    if host_load is not None:
        vm["guest_machine_load"] = merged.machine_load
        merged.machine_load = host_load
    merged.environment = {**merged.environment, "vm": vm}
    merged.notes = host.notes + merged.notes
    if left_out:
        merged.notes.append("left out of what the guest wrote (not a regular file or folder): "
                            + ", ".join(left_out))
    writer.meta = merged
    status, reason = Status(runs[0]["status"]), runs[0]["reason"]
    if status == Status.INTERRUPTED and interrupt.signalled:
        reason = f"stopped by {interrupt.signalled}"
    return status, reason
