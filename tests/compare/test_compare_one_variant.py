"""`stallbench compare X` with one variant: X's summary as `show` prints it (issue 15 item 12)."""

from __future__ import annotations

import numpy as np
import pytest
from compare_fixtures import lognormal_ns, write_run

from stallbench.cli import main

pytestmark = pytest.mark.pure


def test_compare_with_one_variant_prints_its_summary(tmp_path, capsys):
    rng = np.random.default_rng(7)
    write_run(tmp_path, "vanilla", {"read": lognormal_ns(rng, 3000, 2e5)}, duration_s=3.0)
    assert main(["show", "vanilla", "--results", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert main(["compare", "vanilla", "--results", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == shown and "variant vanilla" in shown
    assert "comparison needs two variants" in captured.err
    assert "CANDIDATE" in captured.err


def test_compare_with_one_missing_variant_is_still_exit_2(tmp_path, capsys):
    assert main(["compare", "nosuch", "--results", str(tmp_path)]) == 2
    assert "nosuch" in capsys.readouterr().err
