"""stallbench check: exit 0 (no regression beyond the bound), 1 (regression), 125 (cannot
decide), 2 (bad input) on real run directories."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from compare_fixtures import lognormal_ns, write_run

from stallbench.cli import main

pytestmark = pytest.mark.quiet


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gate")
    rng = np.random.default_rng(7)
    for iteration in range(3):
        for variant, scale in (("good", 1.0), ("same", 1.0), ("bad", 2.5)):
            write_run(path, variant, {
                "read": lognormal_ns(rng, 30000, 400e3, 0.4, scale),
                "fsync": lognormal_ns(rng, 30, 5e6, 0.5),  # too few for p99
            }, duration_s=5.0, seed=iteration)
    return path


def check(capsys, results: Path, baseline: str, candidate: str, *metrics: str,
          bound: str = "10%") -> tuple[int, str, str]:
    argv = ["check", baseline, candidate, "--results", str(results), "--max-regression", bound]
    for metric in metrics:
        argv += ["--metric", metric]
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_no_regression_is_exit_0(results, capsys):
    # three runs each: with this machine's run-to-run spread (the prior, partly replaced by
    # what three runs show) p99 is known within about ±35%, so that is the bound to certify
    code, out, _ = check(capsys, results, "good", "same", "read:p50", "read:p99", "read:rate",
                         bound="60%")
    assert code == 0, out
    assert out.count("ok: within the bound") == 3


def test_regression_is_exit_1(results, capsys):
    code, out, _ = check(capsys, results, "good", "bad", "read:p99")
    assert code == 1
    assert out.startswith("read:p99  +15") and "regression: grew beyond the bound" in out


def test_regression_wins_over_undecided(results, capsys):
    code, _, _ = check(capsys, results, "good", "bad", "read:p50", "fsync:p99")
    assert code == 1


def test_too_few_samples_is_exit_125(results, capsys):
    code, out, err = check(capsys, results, "good", "same", "fsync:p99")
    assert code == 125
    assert "not resolvable" in out and "cannot decide" in err


def test_interval_straddling_the_bound_is_exit_125(results, capsys):
    # +150% with a bound of 150%: the interval cannot lie wholly on one side
    code, out, _ = check(capsys, results, "good", "bad", "read:p50", bound="150%")
    assert code == 125 and "straddles" in out


def test_incomplete_run_is_exit_125(results, tmp_path, capsys):
    import shutil
    shutil.copytree(results, tmp_path / "r")
    meta_path = tmp_path / "r" / "bad" / "sim" / "3" / "run.json"
    meta = json.loads(meta_path.read_text())
    meta["status"] = "running"
    meta["pid"] = 2 ** 22 + 12345  # no such process: killed
    meta_path.write_text(json.dumps(meta))
    code, _, err = check(capsys, tmp_path / "r", "good", "bad", "read:p99")
    assert code == 125 and "killed" in err


@pytest.mark.parametrize("metric", ["read", "read:p100", "read:pfoo", ":p99", "nosuch:p99"])
def test_bad_metric_is_exit_2(results, capsys, metric):
    code, _, err = check(capsys, results, "good", "bad", metric)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_bad_bound_is_exit_2(results, capsys):
    code, _, err = check(capsys, results, "good", "bad", "read:p99", bound="ten")
    assert code == 2 and "--max-regression" in err
