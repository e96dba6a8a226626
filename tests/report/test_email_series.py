"""`series --format email` on a hand-made step (p50 and p99 x1.6 from the fourth of six points,
2 runs a point): ASCII within 72 columns, the subject names the first new regression with the
JSON's change and interval, each change point's row and each point's change along the points
are the JSON's; runs recorded without their plan's text (these were written by hand) are said
in `To reproduce:` instead of commands that could not be given."""

from __future__ import annotations

import json

import numpy as np
import pytest
from compare_fixtures import lognormal_ns, write_run

from conftest import run_stallbench

pytestmark = pytest.mark.pure


def _percent(x: float) -> str:
    """The oracle's rendering of a change: +N% from ±100% on, else one decimal."""
    p = x * 100
    return f"{p:+.0f}%" if abs(p) >= 100 else f"{p:+.1f}%"


@pytest.fixture(scope="module")
def series(tmp_path_factory) -> tuple[str, dict, int]:
    root = tmp_path_factory.mktemp("series-email")
    rng = np.random.default_rng(46)
    names = []
    for i in range(6):
        names.append(f"p{i}")
        for _ in range(2):
            scale = (1.6 if i >= 3 else 1.0) * np.exp(rng.normal(0, 0.02))
            write_run(root, f"p{i}", {"read": lognormal_ns(rng, 20000, 5e4, 0.4, scale)},
                      duration_s=2.0)
    mail = run_stallbench("series", *names, "--results", str(root), "--format", "email")
    data = run_stallbench("series", *names, "--results", str(root), "--format", "json")
    return mail.stdout, json.loads(data.stdout), mail.returncode


def test_the_series_mail_fits_and_holds_the_jsons_numbers(series):
    mail, data, code = series
    assert code == 1                                    # as the text format: a new regression
    lines = mail.splitlines()
    assert lines[0].startswith("Subject: [REGRESSION] read ")
    assert all(len(line) <= 72 for line in lines) and mail.isascii()
    first = data["change_points"][0]
    subject = " ".join(mail.split("\n\n", 1)[0].split())
    low, high = _percent(first["low"]), _percent(first["high"])
    assert f"{_percent(first['change'])} [{low}, {high}]" in subject
    assert "p2 -> p3" in subject and "(sim series, 6 points)" in subject
    for point in data["change_points"]:
        row = next(line for line in lines if line.strip().startswith(point["metric"] + " "))
        assert _percent(point["change"]) in row and point["verdict"] in row
    table = mail.split("read p50 along the points\n", 1)[1].split("\n\n", 1)[0].splitlines()
    cells = {row.split()[0]: row.split() for row in table[1:] if row.startswith("  p")}
    for label, entry in data["ops"]["read"]["points"].items():
        change = entry.get("change", {}).get("p50")
        if change:
            assert _percent(change["change"]) in cells[label], (label, cells[label])


def test_runs_without_their_plans_text_are_said_not_given(series):
    mail, _, _ = series
    reproduce = mail.split("To reproduce:", 1)[1]
    assert "without the text of their plan" in " ".join(reproduce.split())
    assert "stallbench run --plan" not in reproduce
