#!/usr/bin/env python3
"""Write the bash and zsh completion and the man page from stallbench's parser (into share/).
Run after changing the command line: `make cli-docs`; tests/test_export_cli.py checks them."""

import sys
from pathlib import Path

from stallbench.cli import build_parser
from stallbench.clidocs import generate

root = Path(__file__).resolve().parent.parent
for relative, text in generate(build_parser()).items():
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {relative}", file=sys.stderr)
