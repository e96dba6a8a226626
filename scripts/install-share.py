#!/usr/bin/env python3
"""Copy the man page and the completion scripts under an installation's prefix, where man and
the shells look: what pyproject.toml's [tool.setuptools.data-files] does for a wheel install,
for the editable install of `make demo` (pip installs no data files for it).

Usage: install-share.py PREFIX   (e.g. .venv; `man stallbench` then finds the page while
PREFIX/bin is on PATH)."""

import shutil
import sys
import tomllib
from pathlib import Path

root = Path(__file__).resolve().parent.parent
if len(sys.argv) != 2:
    sys.exit(__doc__.split("\n\n")[1].strip())
prefix = Path(sys.argv[1])
table = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
for directory, files in table.items():
    for name in files:
        target = prefix / directory / Path(name).name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / name, target)
        print(f"installed {target}", file=sys.stderr)
