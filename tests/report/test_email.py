"""`compare --format email` on a real comparison (randread, all memory vs a memory cgroup smaller
than its file, 2+2 runs) mails itself nothing: its lines are plain ASCII within 72 columns,
the subject first and the signature last; every number of its tables, its headline and its
subject is the comparison JSON's (parsed back here and held to the JSON's values within the
last digit shown) with the JSON's verdict words; its `To reproduce:` commands, pasted as they
are into bash in an empty folder, record the same plan (the same plan hash in the new
run.json) and end in a `stallbench compare` that accepts the runs. Bad flags: one line."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_stallbench

pytestmark = [pytest.mark.machine, pytest.mark.root]

PLAN = """# randread: the machine's memory against a memory cgroup smaller than the file
workload = "randread"
duration = "1s"
iterations = 2
monitors = ["counters"]
results = "{results}"

[workload_options]
file_size = "32M"
record_size = "4K"

[[variants]]
name = "unlimited"

[[variants]]
name = "memcg-16M"
memory = "16M"
"""
UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
NUMBER = re.compile(r"^[+-]?[\d,]*\.?\d+")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("email")
    plan = base / "plan.toml"
    plan.write_text(PLAN.format(results=base / "results"))
    run_stallbench("-q", "run", "--plan", str(plan), "--no-progress", check=True, timeout=300)
    return base / "results"


@pytest.fixture(scope="module")
def mail(recorded) -> str:
    proc = run_stallbench("compare", "unlimited", "memcg-16M", "--results", str(recorded),
                          "--format", "email")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def document(recorded) -> dict:
    proc = run_stallbench("compare", "unlimited", "memcg-16M", "--results", str(recorded),
                          "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _close(text: str, value: float, scale: float = 1.0) -> None:
    """`text` (as shown: '1,234', '46.0', '+4182%') is `value` / `scale` to its last digit."""
    shown = NUMBER.match(text.replace("−", "-"))
    assert shown, text
    digits = shown.group(0).replace(",", "")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    assert abs(float(digits) - value / scale) <= 0.5 * 10 ** -decimals + 1e-9, (text, value)


def test_lines_fit_a_mail(mail):
    lines = mail.splitlines()
    assert lines[0].startswith("Subject: [")
    assert all(len(line) <= 72 for line in lines), [line for line in lines if len(line) > 72]
    assert mail.isascii() and "\x1b" not in mail
    assert not any(ch in mail for ch in "│─┌┐└┘├┤┬┴┼═║")
    assert lines[-2:] == ["-- ", lines[-1]] and lines[-1].startswith("stallbench ")
    assert 25 <= len(lines) <= 90       # short enough to be read: the issue's ~60 lines


def _op_tables(mail: str) -> dict[tuple[str, str], tuple[float, list[list[str]]]]:
    """(op, candidate) -> (the unit's ns, the rows: stat, baseline, candidate, change,
    interval and the verdict words under or beside the row)."""
    tables = {}
    lines = mail.splitlines()
    for i, line in enumerate(lines):
        head = re.match(r"^(\S+) - latency in (\w+) \((\S+) vs (\S+)\)$", line)
        if not head:
            continue
        op, unit, candidate, _ = head.groups()
        rows: list[list[str]] = []
        for row in lines[i + 2:]:
            if not row.strip():
                break
            if row.startswith("    "):            # the verdict, under its row
                rows[-1].append(row.strip())
                continue
            cells = re.split(r"\s{2,}|(?<=\S) (?=\[)", row.strip())
            rows.append(cells)
        tables[op, candidate] = (UNITS[unit], rows)
    return tables


def test_its_numbers_are_the_jsons(mail, document):
    tables = _op_tables(mail)
    assert tables, mail
    keys = {p["label"]: p["key"] for p in document["percentiles"]}
    for (op, candidate), (scale, rows) in tables.items():
        base = document["ops"][op]["variants"][document["baseline"]]
        cand = document["ops"][op]["variants"][candidate]
        samples = rows[0]
        assert samples[0] == "samples"
        assert int(samples[1].replace(",", "")) == base["samples"]
        assert int(samples[2].replace(",", "")) == cand["samples"]
        shown = set()
        for row in rows[1:]:
            key = "rate" if row[0] == "rate/s" else keys[row[0]]
            unit = 1.0 if key == "rate" else scale
            _close(row[1], base[key], unit)
            _close(row[2], cand[key], unit)
            change = cand["change"][key]
            _close(row[3], change["change"] * 100)
            interval = next((c for c in row if c.startswith("[")), None)
            if change["interval_shown"]:
                low, high = interval.strip("[]").split(", ")
                _close(low, change["low"] * 100)
                _close(high, change["high"] * 100)
            else:
                assert interval is None
            words = change["verdict_text"].replace("×", "x")
            assert words in " ".join(row[4:]), (row, words)
            shown.add(key)
        deciding = {s for s, c in cand["change"].items()
                    if c["verdict"] in ("better", "worse", "same", "unclear", "paced")}
        assert shown == deciding


def test_the_subject_and_headline_say_the_jsons_call(mail, document):
    subject = mail.split("\n\n", 1)[0].replace("\n", "")
    found = re.match(r"Subject: \[([A-Z ]+)\] (\S+) (\S+) ([+-][\d.]+%)", subject)
    if found is None:
        assert "[NO CHANGE CALLED]" in subject
        return
    tag, op, label, change = found.groups()
    key = "rate" if label == "rate/s" else \
        {p["label"]: p["key"] for p in document["percentiles"]}[label]
    entry = document["ops"][op]["variants"]["memcg-16M"]["change"][key]
    _close(change, entry["change"] * 100)
    expected = {"worse": "REGRESSION", "better": "IMPROVEMENT"}.get(entry["verdict"])
    assert tag == expected or (expected is None and tag in ("UNDECIDED", "REGRESSION"))
    assert "unlimited -> memcg-16M" in subject and "(randread, 2+2 runs)" in subject


def test_to_reproduce_runs_as_printed_in_an_empty_folder(mail, recorded, tmp_path):
    commands = mail.split("\nTo reproduce:\n", 1)[1].split("\n-- \n", 1)[0]
    assert "cat > plan.toml <<'EOF'" in commands and "results =" not in commands
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "stallbench"     # this tree's stallbench, as the installed one would be
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m stallbench \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    script = tmp_path / "pasted.sh"
    script.write_text(commands)
    proc = subprocess.run(["bash", "-e", str(script)], cwd=fresh, capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "stallbench compare — workload randread" in proc.stdout
    then = json.loads(next(recorded.glob("unlimited/randread/1/run.json")).read_text())
    for variant in ("unlimited", "memcg-16M"):
        runs = sorted((fresh / "results" / variant / "randread").glob("*/run.json"))
        assert len(runs) == 2
        for run in runs:
            meta = json.loads(run.read_text())
            assert meta["status"] == "complete"
            assert meta["plan"]["hash"] == then["plan"]["hash"]


def test_sections_and_brief_are_refused_with_email(recorded):
    proc = run_stallbench("compare", "unlimited", "memcg-16M", "--results", str(recorded),
                          "--format", "email", "--brief")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("stallbench: ")
