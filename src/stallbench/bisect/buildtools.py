"""`bisect --git`'s kernel build: its default steps, what a failed build's log says, and what
the default build needs on this machine, checked before the first step (without flex a step
failed with `Error 127` after minutes, and only build.log said `flex: not found`; without make
the build's start failed before any process existed).

Each need is a program on PATH or a header under an include folder, with the Debian package
that provides it (scripts/install-system-deps.sh installs them).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..core.errors import UsageError

# (what the build runs or includes, the Debian package)
PROGRAMS = (("make", "make"), ("gcc", "gcc"), ("flex", "flex"), ("bison", "bison"),
            ("bc", "bc"))
HEADERS = (("gelf.h", "libelf-dev"),)
INCLUDE_DIRS = ("/usr/include", "/usr/local/include")


def build_error(log_text: str) -> str:
    """The build log's lines that say why: the first compiler or make error and the last line."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    if not lines:
        return "(no output)"
    first = next((line for line in lines if "error:" in line or "Error " in line
                  or line.startswith("ERROR")), None)
    return " | ".join(dict.fromkeys(filter(None, [first, lines[-1]])))[:400]


def missing_options(fragment: str, config: str) -> list[str]:
    """The fragment's settings that the resolved .config does not have (dependencies not met on
    this commit, or an option this tree does not know)."""
    have = {line.strip() for line in config.splitlines()}
    wanted = [line.strip() for line in fragment.splitlines()
              if line.strip().startswith("CONFIG_")]
    return [line for line in wanted if line not in have]


def default_steps(fragment: Path, jobs: int) -> list[list[str]]:
    """The default build: allnoconfig with the fragment's settings forced (KCONFIG_ALLCONFIG),
    olddefconfig, then the bzImage; ccache when it is installed."""
    cc = ["CC=ccache gcc"] if shutil.which("ccache") else []
    return [["make", "-s", f"KCONFIG_ALLCONFIG={fragment}", "allnoconfig"],
            ["make", "-s", "olddefconfig"],
            ["make", f"-j{jobs}", *cc, "bzImage"]]


def missing_build_tools(path: str | None = None,
                        include_dirs: tuple[str, ...] = INCLUDE_DIRS) -> list[tuple[str, str]]:
    """(what, package) for each need this machine lacks; `path` as PATH (default: the
    environment's)."""
    path = os.environ.get("PATH", os.defpath) if path is None else path
    missing = [(name, package) for name, package in PROGRAMS
               if shutil.which(name, path=path) is None]
    missing += [(header, package) for header, package in HEADERS
                if not any((Path(d) / header).is_file() for d in include_dirs)]
    return missing


def check_build_tools(build: str | None) -> None:
    """UsageError (one line, exit 2) when the default build (`build` None) cannot run here;
    a --build command is the user's, and needs what it needs."""
    if build is not None:
        return
    missing = missing_build_tools()
    if missing:
        packages = " ".join(dict.fromkeys(package for _, package in missing))
        raise UsageError("bisect --git: the default kernel build needs "
                         f"{', '.join(name for name, _ in missing)}, which this machine lacks; "
                         f"install them (Debian: apt-get install {packages}) or give --build")
