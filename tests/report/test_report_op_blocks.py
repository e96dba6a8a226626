"""Each op's distribution and stalls over time are tables of the table model in markdown (no
preformatted text), their cells the comparison JSON's numbers: the band shares recomputed with
numpy from the JSON's log2 band counts, the longest stall from its longest_stall; the runs are
the real recorded ones of tests/data/snapshot."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from stallbench.cli import main

pytestmark = pytest.mark.pure

DATA = Path(__file__).resolve().parents[1] / "data" / "snapshot" / "results"
# band_label's units: 1024 is the step between them
_UNIT_NS = {"ns": 1, "µs": 1024, "ms": 1024 ** 2, "s": 1024 ** 3}
_TIME_NS = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    results = tmp_path_factory.mktemp("blocks") / "results"
    shutil.copytree(DATA, results)
    out = tmp_path_factory.mktemp("out")
    for fmt in ("markdown", "json"):
        assert main(["compare", "a", "b", "--results", str(results), "--format", fmt,
                     "--output", str(out / fmt)]) == 0
    return (out / "markdown").read_text(), json.loads((out / "json").read_text())


def block(md: str, heading: str) -> list[str]:
    """The lines of the markdown section whose heading starts with `heading`, to the next heading
    or fenced block; each line of it is blank or a table's."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"### {heading}"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("#", "```"))),
               len(lines))
    assert all(not line or line.startswith("|") for line in lines[start + 1:end])
    return lines[start + 1:end]


def tables(lines: list[str]) -> list[list[list[str]]]:
    """Each markdown table in the lines: its header and rows, cells stripped; a table must have
    its |---| line under the header."""
    out: list[list[list[str]]] = []
    previous = ""
    for line in lines:
        if line.startswith("|") and not line.startswith("|---"):
            if not previous.startswith("|"):
                out.append([])
            out[-1].append([c.strip() for c in line.strip("|").split("|")])
        elif line.startswith("|---"):
            assert previous.startswith("|") and len(out[-1]) == 1, "a table's rule is its 2nd line"
        previous = line
    return out


def band(label: str) -> int:
    """'32 µs' -> 15: the exponent of the band's lower bound in ns."""
    value, unit = label.split(" ")
    return int(round(np.log2(float(value) * _UNIT_NS[unit])))


def nanoseconds(text: str) -> float:
    value, unit = text.split(" ")
    return float(value) * _TIME_NS[unit]


def test_the_distribution_is_a_table_of_the_json_band_shares(reports):
    md, document = reports
    lines = block(md, "read — distribution")
    *_, (header, *rows) = tables(lines)
    labels = header[1:]
    assert labels == [document["baseline"], *document["candidates"]]
    variants = document["ops"]["read"]["variants"]
    counts = np.array([variants[label]["bands"]["log2_ns_counts"] for label in labels], float)
    shares = counts / counts.sum(axis=1, keepdims=True)
    used = np.flatnonzero(counts.sum(axis=0))
    assert [band(row[0].split(" – ")[0]) for row in rows] == \
        list(range(used[0], used[-1] + 1))
    for row in rows:
        low, high = (band(bound) for bound in row[0].split(" – "))
        assert high == low + 1
        for cell, share in zip(row[1:], shares[:, low], strict=True):
            assert float(cell.removesuffix("%")) == pytest.approx(100 * share, abs=0.05)


def test_the_stalls_are_a_table_of_the_json_longest_stalls(reports):
    md, document = reports
    lines = block(md, "read — stalls over time")
    (header, *rows), = tables(lines)
    assert header == ["variant", "longest without a completed op", "at", "iteration"]
    variants = document["ops"]["read"]["variants"]
    assert [row[0] for row in rows] == [document["baseline"], *document["candidates"]]
    for label, longest, at, iteration in rows:
        stall = variants[label]["stalls"]["longest_stall"]
        assert nanoseconds(longest) == pytest.approx(stall["duration_ns"], rel=0.005)
        assert float(at.removesuffix(" s")) == pytest.approx(stall["start_ns"] / 1e9, abs=0.05)
        assert int(iteration) == stall["iteration"]
    assert not any(variants[label]["stalls"]["episodes"] for label, *_ in rows)
    assert re.search(r"^### read — stalls over time \(1 s intervals\): no stall episodes$", md,
                     re.M)
