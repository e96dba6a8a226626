"""System call numbers -> names for the architecture this runs on, from the kernel's own UAPI
headers (Debian: linux-libc-dev), read once. raw_syscalls trace events carry only the number.

The headers are the kernel's table: asm/unistd_64.h on x86_64 (`#define __NR_pread64 17`),
asm-generic/unistd.h where the architecture uses the generic table (arm64, riscv64, ...), with
its `__NR3264_` indirections resolved. Where no header is found, names are {} and the caller
says so (numbers stay numbers).
"""

from __future__ import annotations

import functools
import os
import re
import sysconfig
from pathlib import Path

# machine (uname -m) -> the header that holds its table, relative to an include directory
HEADERS = {
    "x86_64": "asm/unistd_64.h",
    "i386": "asm/unistd_32.h", "i486": "asm/unistd_32.h", "i586": "asm/unistd_32.h",
    "i686": "asm/unistd_32.h",
    "aarch64": "asm-generic/unistd.h", "riscv64": "asm-generic/unistd.h",
    "loongarch64": "asm-generic/unistd.h",
    "ppc64le": "asm/unistd_64.h", "ppc64": "asm/unistd_64.h", "s390x": "asm/unistd_64.h",
    "armv7l": "asm/unistd-eabi.h",
}
INCLUDE_ROOT = Path("/usr/include")
_DEFINE = re.compile(r"^\s*#\s*define\s+(__NR(?:3264)?_\w+)\s+(.+?)\s*(?:/\*.*)?$")
_TERM = re.compile(r"\(?\s*(\w+)\s*(?:\+\s*(\w+))?\s*\)?$")


def header_for(machine: str | None = None) -> Path | None:
    """The header with this machine's syscall table, or None when it is not installed."""
    machine = machine or os.uname().machine
    relative = HEADERS.get(machine)
    if relative is None:
        return None
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for base in ([INCLUDE_ROOT / multiarch] if multiarch else []) + [INCLUDE_ROOT]:
        if (base / relative).is_file():
            return base / relative
    return None


def parse_table(text: str) -> dict[int, str]:
    """`#define __NR_name N` lines (N a number, another macro, or MACRO + N) -> {N: name};
    the first name given for a number wins (64-bit names come first in the generic table)."""
    macros: dict[str, str] = {}
    order: list[str] = []
    for line in text.splitlines():
        match = _DEFINE.match(line)
        if match and match[1] not in macros:
            macros[match[1]] = match[2]
            order.append(match[1])

    def value(token: str, depth: int = 0) -> int | None:
        if token.isdigit():
            return int(token)
        if depth > 8 or token not in macros:
            return None
        match = _TERM.match(macros[token])
        if not match:
            return None
        base = value(match[1], depth + 1)
        offset = value(match[2], depth + 1) if match[2] else 0
        return None if base is None or offset is None else base + offset

    names: dict[int, str] = {}
    for macro in order:
        if not macro.startswith("__NR_") or macro in ("__NR_syscalls",):
            continue
        number = value(macro)
        if number is not None:
            names.setdefault(number, macro[len("__NR_"):])
    return names


@functools.lru_cache(maxsize=1)
def syscall_names() -> dict[int, str]:
    """{number: name} for this machine; {} when the kernel headers are not installed."""
    header = header_for()
    if header is None:
        return {}
    try:
        return parse_table(header.read_text(errors="replace"))
    except OSError:
        return {}


def names_unavailable() -> str | None:
    """Why syscalls show as numbers here, or None."""
    if syscall_names():
        return None
    return (f"no syscall table for {os.uname().machine} (install the kernel headers, Debian "
            "linux-libc-dev): syscalls are shown by number")
