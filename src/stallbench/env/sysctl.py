"""--sysctl KEY=VALUE: set kernel parameters for a run and put the old values back."""

from __future__ import annotations

import contextlib
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..core.errors import UsageError
from ..core.journal import Journal, register_undo
from ..settings.shapes import check_sysctl
from .locks import exclusive

PROC_SYS = Path("/proc/sys")

# Writing one of a pair zeroes the other, and the *_bytes files refuse 0: restoring must write
# whichever of the pair was in effect before.
COUPLED = {
    "vm.dirty_ratio": "vm.dirty_bytes",
    "vm.dirty_bytes": "vm.dirty_ratio",
    "vm.dirty_background_ratio": "vm.dirty_background_bytes",
    "vm.dirty_background_bytes": "vm.dirty_background_ratio",
}


def sysctl_path(key: str) -> Path:
    return PROC_SYS / key.replace(".", "/")


def check_sysctl_key(key: str, value: str) -> Path:
    """The key exists as a readable and writable file under /proc/sys (no change made)."""
    check_sysctl(key, value)
    path = sysctl_path(key)
    try:
        mode = path.stat().st_mode
    except OSError:
        raise UsageError(f"--sysctl {key}: no such sysctl on this kernel ({path} does not exist)"
                         ) from None
    if not stat.S_ISREG(mode):
        raise UsageError(f"--sysctl {key}: {path} is a directory, not a setting")
    if not mode & 0o222:
        raise UsageError(f"--sysctl {key}: read-only on this kernel")
    if not mode & 0o444:
        raise UsageError(f"--sysctl {key}: write-only (a trigger, not a setting); "
                         "caches are dropped with drop_caches")
    return path


def read_value(path: Path) -> str:
    return path.read_text().strip()


@register_undo("sysctl")
def _undo_sysctl(action: dict[str, Any]) -> None:
    """Write back saved values; a 0 in a coupled pair is skipped (the partner's write clears it)."""
    errors = []
    for key, value in action["restore"]:
        if key in COUPLED and value.strip() == "0":
            continue
        try:
            with open(sysctl_path(key), "w") as f:
                f.write(value)
        except OSError as exc:
            errors.append(f"{key}={value}: {exc.strerror}")
    if errors:
        raise OSError("; ".join(errors))


@contextlib.contextmanager
def sysctls(settings: dict[str, str], journal: Journal, metadata: dict[str, Any]
            ) -> Iterator[None]:
    """Set every sysctl (journaled), restore on exit. Fills metadata[key] = {old, new, now}."""
    if not settings:
        yield
        return
    with contextlib.ExitStack() as stack:
        locked: set[str] = set()
        for key in sorted(settings):
            for name in sorted({key, COUPLED.get(key, key)}):
                if name not in locked:
                    stack.enter_context(exclusive(f"sysctl:{name}", f"sysctl {name}"))
                    locked.add(name)
        for key, value in settings.items():
            path = check_sysctl_key(key, value)
            restore = []
            partner = COUPLED.get(key)
            if partner and sysctl_path(partner).exists():
                restore.append([partner, read_value(sysctl_path(partner))])
            old = read_value(path)
            restore.append([key, old])
            entry = journal.push("sysctl", restore=restore)
            stack.callback(journal.undo, entry)
            try:
                with open(path, "w") as f:
                    f.write(value)
            except OSError as exc:
                raise UsageError(f"--sysctl {key}={value}: the kernel refused it "
                                 f"({exc.strerror}); current value is {old!r}") from None
            metadata[key] = {"old": old, "new": value, "now": read_value(path)}
            if len(restore) > 1:
                metadata[key][f"old {partner}"] = restore[0][1]
        yield
