"""QEMU: choose the accelerator, start the guest (journaled), capture its serial console.

The guest's only devices are a virtio disk, two virtio-9p shares (the host's / read-only, the
run's exchange directory read-write) and the serial console on QEMU's stdin/stdout: no network,
so no tap device or bridge is ever made. QEMU dies with stallbench (PR_SET_PDEATHSIG) and is in
the journal as a `kill` entry, so `stallbench cleanup` stops one that outlived a kill -9 too.
"""

from __future__ import annotations

import collections
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..core.errors import UsageError
from ..core.journal import Journal, process_start_time
from ..core.signals import held_while_starting
from .initramfs import MARK
from .kernel import Kernel

KVM_PROBE_TIMEOUT_S = 15.0
CONSOLE_TAIL_LINES = 20
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1bc")


class GuestError(Exception):
    """The guest did not boot, panicked, hung or died: the message ends with its console."""


def qemu_binary() -> str:
    path = shutil.which("qemu-system-x86_64")
    if path is None:
        raise UsageError("qemu-system-x86_64 not found: --kernel boots the kernel under QEMU; "
                         "install qemu-system-x86 (scripts/install-system-deps.sh)")
    return path


def qemu_version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0].strip() if out else "?"


def kvm_usable() -> str | None:
    """None when /dev/kvm can be opened, else why not."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        return f"/dev/kvm: {exc.strerror}"
    os.close(fd)
    return None


def _pdeathsig() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)          # PR_SET_PDEATHSIG: no QEMU outlives stallbench
    os.setpgrp()                           # a Ctrl-C on the terminal is stallbench's to handle


class Guest:
    """One running QEMU; console lines are kept (last N) and written to a log file."""

    def __init__(self, argv: list[str], journal: Journal, console_log: Path,
                 on_line: Callable[[str], None] | None = None):
        self.console_log = console_log
        self.tail: collections.deque[str] = collections.deque(maxlen=CONSOLE_TAIL_LINES)
        self.marks: list[str] = []
        self.changed = threading.Condition()
        self.on_line = on_line
        self._journal = journal
        with held_while_starting():   # journaled once it exists, before a Ctrl-C acts
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, preexec_fn=_pdeathsig)
            self._entry = journal.push("kill", pid=self.proc.pid, what="qemu",
                                       start_time=process_start_time(self.proc.pid))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with open(self.console_log, "ab") as log:
            for raw in iter(self.proc.stdout.readline, b""):
                log.write(raw)
                log.flush()
                line = _ANSI_RE.sub("", raw.decode("utf-8", "replace")).rstrip("\r\n")
                line = line.replace("\r", "")
                if not line.strip():
                    continue
                with self.changed:
                    self.tail.append(line)
                    if MARK in line:
                        self.marks.append(line.split(MARK, 1)[1].strip())
                    self.changed.notify_all()
                if self.on_line is not None and MARK not in line:
                    self.on_line(line)
        with self.changed:
            self.changed.notify_all()

    def wait_mark(self, prefix: str, timeout: float) -> bool:
        """Until a console mark starting with prefix, the guest's end, or the timeout."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                if any(m.startswith(prefix) for m in self.marks):
                    return True
                if self.proc.poll() is not None and not self._reader.is_alive():
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.5))

    def mark(self, prefix: str) -> str | None:
        with self.changed:
            for m in self.marks:
                if m.startswith(prefix):
                    return m
        return None

    def wait_exit(self, timeout: float) -> int | None:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(5)
        return code

    def send(self, data: bytes) -> None:
        """Type on the guest's serial console (b"\\x03" is a Ctrl-C for the guest's job)."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def console_tail(self, n: int = 8) -> str:
        with self.changed:
            lines = list(self.tail)[-n:]
        return " | ".join(line.strip() for line in lines) or "(no console output)"

    def stop(self) -> None:
        """Kill QEMU (the guest has nothing left worth waiting for) and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self._reader.join(5)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self._journal.forget(self._entry)


def qemu_argv(binary: str, kernel: Kernel, initramfs: Path, accel: str, cpus: int,
              memory: int, exchange: Path, disk: Path | None, cmdline_extra: str = "",
              boot_image: Path | None = None) -> list[str]:
    cmdline = ("console=ttyS0 panic=-1 oops=panic quiet loglevel=4 psi=1 delayacct "
               "transparent_hugepage=madvise " + cmdline_extra).strip()
    argv = [binary, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-machine", f"q35,accel={accel}", "-cpu", "host" if accel == "kvm" else "max",
            "-smp", str(cpus), "-m", f"{memory >> 20}M",
            "-kernel", str(boot_image or kernel.image), "-initrd", str(initramfs),
            "-append", cmdline,
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,"
                       "multidevs=remap",
            "-virtfs", f"local,path={exchange},mount_tag=exchange,"
                       f"security_model={exchange_model(exchange)},multidevs=remap",
            "-serial", "stdio", "-monitor", "none"]
    if disk is not None:
        argv += ["-drive", f"file={disk},format=raw,if=virtio,cache={_disk_cache(disk)},"
                           "aio=threads,discard=unmap"]
    return argv


def exchange_model(exchange: Path) -> str:
    """The exchange share's security model: mapped-xattr where the host's filesystem keeps
    user xattrs, so what the guest's root makes (owners, set-id bits, device nodes, symlinks)
    is only recorded in xattrs and the host holds plain files of its own; else none (the host
    then takes only the regular files, results/regular.py)."""
    try:
        os.setxattr(exchange, "user.stallbench", b"1")
        os.removexattr(exchange, "user.stallbench")
    except OSError:
        return "none"
    return "mapped-xattr"


def _disk_cache(disk: Path) -> str:
    """cache=none (O_DIRECT): the host's page cache stays out of the guest's I/O, where the
    host filesystem allows it."""
    try:
        fd = os.open(disk, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return "writeback"
    os.close(fd)
    return "none"


def choose_accel(binary: str, kernel: Kernel, initramfs: Path, cache: Path, journal: Journal,
                 log: Callable[[str], None], boot_image: Path | None = None
                 ) -> tuple[str, str | None]:
    """("kvm", None) when a short probe boot under KVM reaches /init's mark, else ("tcg", why).
    The answer is cached per kernel, host kernel and QEMU version; STALLBENCH_VM_ACCEL=kvm|tcg
    forces it."""
    forced = os.environ.get("STALLBENCH_VM_ACCEL")
    if forced in ("kvm", "tcg"):
        return forced, None if forced == "kvm" else "STALLBENCH_VM_ACCEL=tcg"
    why = kvm_usable()
    if why:
        return "tcg", why
    key = f"{kernel.digest[:16]}-{os.uname().release}-{qemu_version(binary)}"
    key = re.sub(r"[^A-Za-z0-9._-]", "_", key)[:200]
    cache_file = cache / f"kvm-probe-{key}.json"
    try:
        cached = json.loads(cache_file.read_text())
        return cached["accel"], cached.get("why")
    except (OSError, ValueError, KeyError):
        pass
    log(f"probing whether {kernel.release} boots under KVM here (at most "
        f"{KVM_PROBE_TIMEOUT_S:.0f} s, once per kernel)")
    exchange = cache / f".probe-{os.getpid()}"
    exchange.mkdir(parents=True, exist_ok=True)
    entry = journal.push("rmtree", path=str(exchange))
    argv = qemu_argv(binary, kernel, initramfs, "kvm", 1, 256 << 20, exchange, None,
                     "STALLBENCH_PROBE=1", boot_image)
    guest = Guest(argv, journal, exchange / "console.log")
    try:
        ok = guest.wait_mark("probe ok", KVM_PROBE_TIMEOUT_S)
        tail = guest.console_tail(3)
    finally:
        guest.stop()
        journal.undo(entry)
    result = ("kvm", None) if ok else (
        "tcg", f"{kernel.release} did not boot under KVM within {KVM_PROBE_TIMEOUT_S:.0f} s "
        f"(console: {tail})")
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache_file.with_name(f".{cache_file.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"accel": result[0], "why": result[1]}))
    os.replace(tmp, cache_file)
    return result
