"""stallbench show: metadata and per-op table of a run or a variant."""

from __future__ import annotations

import json

import numpy as np
import pytest
from compare_fixtures import lognormal_ns, ops_span_s, write_run

from stallbench.analysis.histogram import QUANTILE_RELATIVE_ERROR
from stallbench.cli import main

pytestmark = pytest.mark.pure


def test_show_variant_and_run(tmp_path, capsys):
    rng = np.random.default_rng(3)
    read = lognormal_ns(rng, 5000, 300e3)
    path = write_run(tmp_path, "vanilla", {"read": read, "discard": np.array([], np.int64)},
                     duration_s=4.0, rusage={"user_s": 0.25, "system_s": 1.5, "elapsed_s": 4.0})
    assert main(["show", "vanilla", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "iteration 1: complete" in out and "kernel 6.1.0-test" in out
    assert "cpu user 0.25 s, system 1.50 s, elapsed 4.00 s" in out
    assert "discard" in out and "no samples" in out
    assert max(len(line) for line in out.splitlines()) <= 100

    assert main(["show", str(path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    entry = data["ops"]["read"]
    assert entry["samples"] == 5000 and entry["rate"] == 5000 / ops_span_s(path)
    np.testing.assert_allclose(entry["p99_ns"], np.percentile(read, 99, method="inverted_cdf"),
                               rtol=QUANTILE_RELATIVE_ERROR)
    assert data["ops"]["discard"]["no_samples"] is True


def test_show_incomplete_run_says_so(tmp_path, capsys):
    rng = np.random.default_rng(4)
    write_run(tmp_path, "v", {"read": lognormal_ns(rng, 100, 1e6)}, duration_s=1.0,
              status="interrupted")
    assert main(["show", "v", "--results", str(tmp_path)]) == 0
    assert "iteration 1: interrupted" in capsys.readouterr().out


def test_show_missing_is_exit_2(tmp_path, capsys):
    assert main(["show", "nosuch", "--results", str(tmp_path)]) == 2
    assert "nosuch" in capsys.readouterr().err
