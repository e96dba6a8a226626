"""check's outputs for CI (issue 35 item 7): --format json valid against
schemas/check.schema.json with the numbers of the comparison JSON, --junit read back by a real
JUnit parser (junitparser) with one testcase per metric (a regression failed, an undecided one
skipped), and $GITHUB_STEP_SUMMARY given the markdown headline after what it held."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from compare_fixtures import lognormal_ns, write_run

from stallbench.cli import main
from stallbench.schemas import load

pytestmark = pytest.mark.pure


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("checkout")
    rng = np.random.default_rng(35)
    for iteration in range(3):
        for variant, scale in (("good", 1.0), ("bad", 3.0)):
            write_run(path, variant, {
                "read": lognormal_ns(rng, 20000, 300e3, 0.4, scale),
                "fsync": lognormal_ns(rng, 30, 5e6, 0.5),     # too few for a p99
            }, duration_s=4.0, seed=iteration)
    return path


METRICS = ("read:p99", "read:p50", "fsync:p99")


def _check(capsys, results: Path, *extra: str) -> tuple[int, str, str]:
    argv = ["check", "good", "bad", "--results", str(results), "--max-regression", "10%"]
    for metric in METRICS:
        argv += ["--metric", metric]
    code = main([*argv, *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_json_is_valid_and_holds_the_comparisons_numbers(results, capsys):
    import jsonschema

    code, out, _ = _check(capsys, results, "--format", "json")
    document = json.loads(out)
    jsonschema.validate(document, load("check"))
    assert code == 1 and document["exit_code"] == 1            # a regression beats undecided
    assert [m["metric"] for m in document["metrics"]] == list(METRICS)
    outcomes = {m["metric"]: m["outcome"] for m in document["metrics"]}
    assert outcomes == {"read:p99": "regression", "read:p50": "regression",
                        "fsync:p99": "undecided"}
    # the same change and interval as compare's JSON with the metrics asked for
    assert main(["compare", "good", "bad", "--results", str(results), "--format", "json",
                 "--metric", "read:p99", "--metric", "read:p50"]) == 0
    compared = json.loads(capsys.readouterr().out)["ops"]["read"]["variants"]["bad"]["change"]
    for metric in document["metrics"][:2]:
        change = compared[f"{metric['stat']}_ns"]
        assert metric["change"] == pytest.approx(change["change"])
        assert (metric["low"], metric["high"]) == pytest.approx((change["low"], change["high"]))
        assert metric["low"] > 0.10 and metric["bound"] == 0.10   # beyond the bound: its oracle


def test_junit_xml_read_by_a_junit_parser(results, capsys, tmp_path):
    from junitparser import Failure, JUnitXml, Skipped

    report = tmp_path / "check.xml"
    code, out, _ = _check(capsys, results, "--junit", str(report))
    assert code == 1
    xml = JUnitXml.fromfile(str(report))
    suites = list(xml)
    assert len(suites) == 1
    suite = suites[0]
    assert (suite.tests, suite.failures, suite.skipped, suite.errors) == (3, 2, 1, 0)
    cases = {case.name: case for case in suite}
    assert set(cases) == set(METRICS)
    for name in ("read:p99", "read:p50"):
        (result,) = cases[name].result
        assert isinstance(result, Failure) and "regression" in result.message
    (skipped,) = cases["fsync:p99"].result
    assert isinstance(skipped, Skipped) and "undecided" in skipped.message
    assert all(case.classname for case in suite)
    # the failure messages are the text lines check printed
    assert {c.result[0].message for c in suite} == set(out.splitlines())


def test_the_step_summary_gets_the_headline_appended(results, capsys, tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, _, _ = _check(capsys, results)
    text = summary.read_text()
    assert code == 1 and text.startswith("# earlier step\n")
    assert "## bad against good (3 vs 3 run(s)): 2 worse" in text
    assert "| read:p99 |" in text and "**regression**" in text and "**undecided**" in text


def test_an_unwritable_junit_file_is_one_line_and_exit_2(results, capsys, tmp_path):
    code, _, err = _check(capsys, results, "--junit", str(tmp_path / "no" / "such" / "x.xml"))
    assert code == 2 and err.count("\n") == 1 and err.startswith("stallbench: ")
