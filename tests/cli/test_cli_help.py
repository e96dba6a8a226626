"""--help texts say what the commands really do (issue 15 item 15)."""

from __future__ import annotations

import numpy as np
import pytest
from compare_fixtures import lognormal_ns, write_run

from stallbench.cli import main

pytestmark = pytest.mark.pure


def help_text(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return " ".join(capsys.readouterr().out.split())   # argparse wraps at the terminal width


def test_check_help_prints_a_single_percent_sign(capsys):
    text = help_text(capsys, "check")
    assert "95% interval" in text and "%%" not in text
    assert "e.g. 10%" in text


def test_show_help_names_the_environment_variable_it_honours(capsys, tmp_path, monkeypatch):
    assert "$STALLBENCH_RESULTS" in help_text(capsys, "show")
    rng = np.random.default_rng(1)
    write_run(tmp_path, "vanilla", {"read": lognormal_ns(rng, 200, 1e5)}, duration_s=1.0)
    monkeypatch.setenv("STALLBENCH_RESULTS", str(tmp_path))
    assert main(["show", "vanilla"]) == 0
    assert "variant vanilla" in capsys.readouterr().out


def test_demo_has_a_description(capsys):
    text = help_text(capsys, "demo")
    assert "pgioperf" in text and "memory cgroup" in text


def test_run_help_lists_every_monitor_the_schedulers_and_duration_units(capsys):
    text = help_text(capsys, "run", "randread")
    monitors = text.rsplit("--monitors MONITORS", 1)[1].split("--no-progress", 1)[0]
    for name in ("counters", "psi", "diskstats", "delay", "stacks", "trace", "trace-full"):
        assert name in monitors
    scheduler = text.rsplit("--scheduler", 1)[1]
    for name in ("none", "mq-deadline", "kyber", "bfq"):
        assert name in scheduler
    duration = text.rsplit("--duration DURATION", 1)[1].split("--iterations", 1)[0]
    assert "seconds per run" not in duration
    assert "500ms" in duration and "2m" in duration
