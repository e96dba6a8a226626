"""JSON Schemas of stallbench's documents, shipped as package data: run.json (`run`), the
comparison JSON (`comparison`), plan files as parsed from TOML (`plan`) and the
check JSON (`check`)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

NAMES = ("run", "comparison", "plan", "check")


def load(name: str) -> dict[str, Any]:
    if name not in NAMES:
        raise KeyError(name)
    return json.loads(resources.files(__name__).joinpath(f"{name}.schema.json").read_text())
