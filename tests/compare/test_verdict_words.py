"""The verdict words: one Enum, the words the reports print, and the JSON schema's list."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from stallbench.analysis.intervals import DECIDED, DIRECTED, Verdict

pytestmark = pytest.mark.pure


def test_verdict_words_are_the_printed_ones() -> None:
    words = ["better", "worse", "same", "unclear", "n/a", "paced", "interval only"]
    assert [v.value for v in Verdict] == words
    assert json.dumps({"verdict": Verdict.INTERVAL_ONLY}) == '{"verdict": "interval only"}'
    assert f"{Verdict.NA}" == "n/a" and str(Verdict.BETTER) == "better"
    assert set(DIRECTED) == {"better", "worse"} and set(DECIDED) == {"better", "worse", "same"}


def test_comparison_schema_lists_every_verdict() -> None:
    text = resources.files("stallbench.schemas").joinpath("comparison.schema.json").read_text()
    enums = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "verdict" in node and isinstance(node["verdict"], dict):
                enums.append(node["verdict"].get("enum"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(json.loads(text))
    assert enums and all(e == [v.value for v in Verdict] for e in enums), enums
