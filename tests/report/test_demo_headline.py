"""`make demo`'s answer on one screen (issue 35, "Must show"): a real demo-like run — the demo's
own plan (plan/demo.py writes it as demo.toml), shortened to 5 s with the data file and the
memory limit halved in proportion — then its comparison as `run --plan` and `demo` print it.
The first 20 lines name the read regression with its interval, FEWER OPS (or STARVED) and its
first cause; the headline's numbers are those of the comparison JSON; its last line says what
would decide more (duets, calibrate)."""

from __future__ import annotations

import json
import re

import pytest

from conftest import run_stallbench, skip_when_saturated
from stallbench.plan.demo import demo_plan

pytestmark = [pytest.mark.quiet, pytest.mark.root]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    _, _ = demo_plan(root, as_root=True)
    (plan,) = root.glob("demo-*/demo.toml")
    text = plan.read_text()
    short = (text.replace('duration = "20s"', 'duration = "5s"')
             .replace('data_size = "384M"', 'data_size = "192M"')
             .replace('memory = "96M"', 'memory = "48M"').replace("memcg-96M", "memcg-48M"))
    assert short.count("48M") == 2 and 'duration = "5s"' in short
    plan.write_text(short)
    done = run_stallbench("run", "--plan", str(plan), "--no-progress", timeout=600)
    assert done.returncode == 0, done.stderr
    return plan.parent, plan, done.stdout


def test_the_first_20_lines_hold_the_answer(demo):
    results, plan, out = demo
    skip_when_saturated(results)
    first = "\n".join(out.splitlines()[:20])
    assert "memcg-48M against unlimited (1 vs 1 run(s)): " in first
    read_rows = {m.group(1): m.group(0) for m in re.finditer(
        r"^  \S.*?  read\s+(rate/s|p50|p99)\s.*$", first, re.M)}
    assert "p50" in read_rows and read_rows["p50"].startswith("  worse")
    assert re.search(r"\+\d+%\s+\[\+\d+%, \+\d+%\]", read_rows["p50"])       # with its interval
    assert re.search(r"FEWER OPS|STARVED", read_rows["rate/s"])
    why = re.search(r"^  why: (read .*(?:\n    .*)*)", first, re.M)
    assert why and ("memcg reclaim" in why.group(1) or "block I/O" in why.group(1)), first
    headline = " ".join(out.split("\nnote: ", 1)[0].split())       # the headline, whole
    assert f"stallbench run --plan {plan} --duet" in headline
    assert f"stallbench calibrate {plan}" in headline
    assert "\x1b[" not in out                                   # not a terminal: no colour


def test_the_headline_holds_the_json_numbers(demo):
    results, _, out = demo
    done = run_stallbench("compare", "unlimited", "memcg-48M", "--results", str(results),
                          "--format", "json", timeout=300)
    document = json.loads(done.stdout)
    cand = document["ops"]["read"]["variants"]["memcg-48M"]
    base = document["ops"]["read"]["variants"]["unlimited"]
    # the rate as the oracle computes it from the JSON: the change is the rates' ratio
    assert cand["change"]["rate"]["change"] == pytest.approx(cand["rate"] / base["rate"] - 1)
    lines = out.splitlines()
    for key, label in (("p50_ns", "p50"), ("rate", "rate/s")):
        change = cand["change"][key]
        if change["verdict"] not in ("worse", "better"):
            continue
        row = next(line for line in lines
                   if re.match(rf"  \S.*?  read\s+{re.escape(label)}\s", line))
        shown = [f"{x * 100:+.0f}%" if abs(x) >= 1 else f"{x * 100:+.1f}%"
                 for x in (change["change"], change["low"], change["high"])]
        assert f"{shown[0]}  [{shown[1]}, {shown[2]}]" in row, (row, shown)
    assert cand["rate_fell"] or cand["starved"]
