"""The headline (issue 35 items 1, 2, 5, 8, 12): what it calls is what the comparison JSON
calls, its numbers the JSON's (formatted here, independently), worse first; --brief and
--sections pick the report's parts; colour only where asked; the where section's warnings
once, at its end; the one-run note states the interval the runs get (t at the prior's
degrees of freedom, from scipy); compare without arguments says what to give."""

from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from compare_fixtures import lognormal_ns, write_run

from stallbench.cli import main
from stallbench.core.terminal import use_color
from stallbench.report.where import merged_warnings

pytestmark = pytest.mark.pure

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """Three runs a side: reads 3x slower, writes 2x faster, a steady op that does not move."""
    path = tmp_path_factory.mktemp("headline")
    rng = np.random.default_rng(3535)
    for seed in range(3):
        for variant, (read, write) in (("base", (1.0, 1.0)), ("cand", (3.0, 0.5))):
            write_run(path, variant, {
                "read": lognormal_ns(rng, 20000, 200e3, 0.4, read),
                "write": lognormal_ns(rng, 8000, 1e6, 0.4, write),
                "steady": lognormal_ns(rng, 8000, 50e3, 0.3)}, duration_s=4.0, seed=seed)
    return path


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _percent(x: float) -> str:
    """The oracle's own rendering of a change: +N% from ±100% on, else one decimal."""
    p = x * 100
    return f"{p:+.0f}%" if abs(p) >= 100 else f"{p:+.1f}%"


def test_the_headline_calls_what_the_json_calls_with_its_numbers(results, capsys):
    code, out, _ = _run(capsys, "compare", "base", "cand", "--results", str(results),
                        "--format", "json")
    assert code == 0
    document = json.loads(out)
    called = []
    for op, entry in document["ops"].items():
        cand = entry["variants"]["cand"]
        for key, change in cand["change"].items():
            flagged = key == "rate" and (cand["rate_fell"] or cand["starved"])
            if change["verdict"] in ("worse", "better") or flagged:
                called.append((change["verdict"], op, key, change))
    assert {(op, v) for v, op, _, _ in called} >= {("read", "worse"), ("write", "better")}
    (section,) = document["headline"]
    assert section["title"].startswith("cand against base (3 vs 3 run(s)): ")
    (table,) = section["tables"]
    rows = [[cell["text"] for cell in row] for row in table["rows"]]
    # worse first, then better; every call once
    verdicts = [row[0] for row in rows]
    assert verdicts == sorted(verdicts, key=lambda v: not v.startswith("worse"))
    assert len(rows) == len(called)
    labels = {"rate": "rate/s", "p50_ns": "p50", "p99_ns": "p99"}
    for verdict, op, key, change in called:
        row = next(r for r in rows if r[1] == op and r[2] == labels[key])
        assert row[0].startswith(verdict)
        assert row[5] == _percent(change["change"])
        assert row[6] == f"[{_percent(change['low'])}, {_percent(change['high'])}]"
    # the text report opens with the same headline, after the variants
    code, text, _ = _run(capsys, "compare", "base", "cand", "--results", str(results))
    lines = text.splitlines()
    assert lines[4] == section["title"]
    assert text.index(section["title"]) < text.index("read — latency in")
    assert lines[-1].startswith("  ") and "how to read it: change = candidate/baseline" in text
    assert text.index("how to read it") > text.index("stalls over time")


def test_brief_and_sections_pick_the_parts(results, capsys):
    code, brief, _ = _run(capsys, "compare", "base", "cand", "--results", str(results),
                          "--brief")
    assert code == 0 and brief.startswith("cand against base")
    assert "— latency in" not in brief and "how to read it" not in brief
    assert len(brief.splitlines()) <= 15
    code, parts, _ = _run(capsys, "compare", "base", "cand", "--results", str(results),
                          "--sections", "tables,method")
    assert code == 0 and parts.splitlines()[0].startswith("read — latency in")
    assert "against base" not in parts and parts.rstrip().endswith("no interval")
    code, md, _ = _run(capsys, "compare", "base", "cand", "--results", str(results),
                       "--brief", "--format", "markdown")
    assert md.startswith("## cand against base") and "| **worse** | read |" in md
    for bad in (["--brief", "--format", "json"], ["--sections", "tables,nothing"],
                ["--brief", "--sections", "tables"]):
        code, _, err = _run(capsys, "compare", "base", "cand", "--results", str(results), *bad)
        assert code == 2 and err.count("\n") == 1 and err.startswith("stallbench: ")


def test_colour_only_where_asked(results, capsys, monkeypatch):
    code, plain, _ = _run(capsys, "compare", "base", "cand", "--results", str(results),
                          "--brief")
    assert "\x1b[" not in plain                     # not a terminal: auto is plain
    code, coloured, _ = _run(capsys, "compare", "base", "cand", "--results", str(results),
                             "--brief", "--color", "always")
    assert "\x1b[31mworse\x1b[0m" in coloured and "\x1b[32mbetter\x1b[0m" in coloured
    assert coloured.startswith("\x1b[1mcand against base")
    assert ANSI.sub("", coloured) == plain          # the colours only, the layout the same

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert use_color("auto", Terminal()) and not use_color("never", Terminal())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color("auto", Terminal()) and use_color("always", io.StringIO())
    monkeypatch.setenv("NO_COLOR", "")              # set but empty: no-color.org says colour
    assert use_color("auto", Terminal())
    monkeypatch.setenv("TERM", "dumb")
    assert not use_color("auto", Terminal())


def test_the_one_run_note_states_the_interval_one_run_a_side_gets(tmp_path, capsys):
    from scipy import stats

    rng = np.random.default_rng(48)
    for variant, scale in (("one", 1.0), ("two", 1.48)):        # +48% at every quantile
        write_run(tmp_path, variant, {"read": lognormal_ns(rng, 40000, 100e3, 0.4, scale)},
                  duration_s=4.0)
    code, out, _ = _run(capsys, "compare", "one", "two", "--results", str(tmp_path),
                        "--format", "json")
    document = json.loads(out)
    p50 = document["ops"]["read"]["variants"]["two"]["change"]["p50_ns"]
    assert p50["prior_dof"] == 4 and p50["verdict"] == "unclear"
    reach = stats.t.ppf(0.975, 4) * math.sqrt(2) * 0.14          # the A/A prior's sd at p50
    half = (math.log1p(p50["high"]) - math.log1p(p50["low"])) / 2
    assert half == pytest.approx(reach, rel=0.05)                 # what the note says ...
    assert abs(math.log1p(p50["change"])) < reach                 # ... so +48% is not called
    code, text, _ = _run(capsys, "compare", "one", "two", "--results", str(tmp_path))
    flat = " ".join(text.split())
    assert "a prior worth 4 degrees of freedom" in flat
    assert (f"called only beyond about p50 {_percent(math.expm1(-reach))} to "
            f"{_percent(math.expm1(reach))}") in flat


def test_the_where_warnings_are_one_note_each():
    sentence = ("taskstats accounted more blkio delay to some tasks than they lived: those "
                "tasks' maxima are not shown (a kernel accounting fault, not a measurement)")
    warnings = [f"unlimited: {sentence}", f"memcg-96M: {sentence}", f"unlimited: {sentence}",
                "counters not collected in a: a and b are not compared on kernel counters"]
    assert merged_warnings(warnings, ["unlimited", "memcg-96M"]) == [
        f"unlimited, memcg-96M: {sentence}", warnings[3]]


def test_compare_without_arguments_says_what_to_give(capsys):
    code, _, err = _run(capsys, "compare")
    assert code == 2 and err.count("\n") == 1
    assert "BASELINE" in err and "CANDIDATE" in err and "required" not in err
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = capsys.readouterr().out
    assert "examples:\n  stallbench compare vanilla patched" in text
    assert "the variant the others are compared with" in text       # positional help


def test_the_first_time_path_offers_what_decides():
    """One run a side (the demo, `iterations = 1`): duets where the plan may run as duets
    (check_plan), else more iterations, saying why not; and calibrate. Nothing for a plan that
    repeats already."""
    from conftest import ROOT
    from stallbench.plan.planfile import load_plan
    from stallbench.run.duet import decide_hint

    duet = load_plan(ROOT / "examples" / "ext3-vs-ext4.toml")
    sysctls = load_plan(ROOT / "examples" / "dirty-ratio.toml")
    assert decide_hint(duet) is None                      # iterations = 3 already
    duet.iterations = sysctls.iterations = 1
    hint = decide_hint(duet)
    assert f"`stallbench run --plan {duet.source} --duet`" in hint
    assert f"`stallbench calibrate {duet.source}`" in hint
    hint = decide_hint(sysctls)
    assert "--duet" not in hint and "iterations = 3" in hint and "sets sysctls" in hint
    assert "\n" not in hint and len(hint) < 260 + 2 * len(str(sysctls.source))
