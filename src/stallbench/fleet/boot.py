"""Booting a host into a segment's kernel (a fleet run's `boot` step, orchestrate.py): the
one-shot boot entry or kexec -l, Ansible's reboot, and the check after it that the host booted
what the plan asks."""

from __future__ import annotations

import shlex
from typing import Any

from ..settings.hosts import describe_boot
from .inventory import HostConfig
from .outcome import HostReport
from .probe import PROBE_LINES, PYTHON_KNOWN, probe_lines
from .subplan import Segment


def boot_tasks(cfg: HostConfig, segment: Segment) -> list[dict[str, Any]]:
    """The one-shot boot entry (or kexec -l), then Ansible's reboot, which waits until the
    boot id changes; the probe after it checks uname -r against the plan."""
    boot = segment.boot or {}
    reboot: dict[str, Any] = {"boot_time_command": f"cat {shlex.quote(cfg.boot_id_path)}",
                              "reboot_timeout": int(cfg.reboot_timeout_s),
                              "test_command": "uname -r"}
    if "entry" in boot:
        prepare = [cfg.grub_reboot, boot["entry"]]
        if cfg.reboot_command:
            reboot["reboot_command"] = cfg.reboot_command
    else:
        prepare = [cfg.kexec, "-l", boot["kexec"]]
        if boot.get("initrd"):
            prepare.append(f"--initrd={boot['initrd']}")
        prepare.append(f"--append={boot['append']}" if boot.get("append")
                       else "--reuse-cmdline")
        reboot["reboot_command"] = cfg.reboot_command or "systemctl kexec"
    return [{"name": "boot entry", "raw": shlex.join(prepare)},
            {"name": "reboot", "reboot": reboot, "vars": PYTHON_KNOWN}]

def boot_failed(report: HostReport, segment: Segment, result: Any, version_here: str) -> bool:
    """After a start playbook that booted first: did the boot go wrong? (reports it;
    `version_here` is this controller's `stallbench --version`)"""
    boot = segment.boot or {}
    what = f"{describe_boot(boot)} for {segment.variants[0]}"
    for name in ("boot entry", "reboot"):
        outcome = result.task(name)
        if not outcome or outcome.get("failed") or outcome.get("unreachable"):
            report.fail(f"reboot ({what}) failed at {name}: {result.message}")
            return True
    lines = probe_lines(result)
    if len(lines) == PROBE_LINES and lines[0] == version_here:
        if lines[1] in report.boot_ids:
            report.fail(f"reboot ({what}): the boot id did not change")
            return True
        if lines[2] != boot.get("release"):
            report.fail(f"booted {what}, but uname -r says {lines[2]!r} where the plan "
                        f"expects {boot.get('release')!r}: refused; no more runs on this "
                        "host")
            return True
        report.events.append(f"segment {segment.number}: booted {lines[2]} ({what}), "
                             f"boot id {lines[1]}")
    return False
