#!/usr/bin/env python3
"""Write the bash and zsh completion and the man page from stallbench's parser (into share/),
the plan schema from the settings tables (src/stallbench/schemas/plan.schema.json), and this
release's `$id` into every JSON schema (core/version.py schema_id).
Run after changing the command line: `make cli-docs`; tests/cli/test_cli_conventions.py and
tests/core/test_options_schema.py check them."""

import json
import re
import sys
from pathlib import Path

from stallbench.cli import build_parser
from stallbench.cli.docs import generate
from stallbench.core.version import schema_id
from stallbench.plan.schema import plan_json_schema

root = Path(__file__).resolve().parent.parent
for relative, text in generate(build_parser()).items():
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {relative}", file=sys.stderr)
schema = root / "src/stallbench/schemas/plan.schema.json"
schema.write_text(json.dumps(plan_json_schema(), indent=2) + "\n")
print(f"wrote {schema.relative_to(root)}", file=sys.stderr)
for other in sorted(schema.parent.glob("*.schema.json")):
    text = other.read_text()
    stamped = re.sub(r'"\$id": "[^"]*"', f'"$id": "{schema_id(other.name)}"', text, count=1)
    if stamped != text:
        other.write_text(stamped)
        print(f"wrote {other.relative_to(root)} ($id)", file=sys.stderr)
