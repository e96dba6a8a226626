"""A misspelt workload option is refused, not run with its default (issue 15 item 7)."""

from __future__ import annotations

import pytest

from stallbench.core.errors import UsageError
from stallbench.plan.plan import Plan, VariantSettings
from stallbench.plan.planfile import load_plan
from stallbench.run.runner import run_plan
from stallbench.workloads import available_workloads, get_workload

pytestmark = pytest.mark.pure


def _plan(tmp_path, text: str):
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return path


def test_a_misspelt_option_in_a_plan_names_file_line_and_key(tmp_path):
    path = _plan(tmp_path, 'workload = "randread"\n\n[options]\nfile_size = "4M"\n'
                           'threds = 2\n\n[[variants]]\nname = "a"\n')
    with pytest.raises(UsageError) as info:
        load_plan(path)
    message = str(info.value)
    assert message.startswith(f"{path}:5: ")
    assert "'threds'" in message and "did you mean 'threads'" in message


def test_a_misspelt_variant_option_names_its_line(tmp_path):
    path = _plan(tmp_path, 'workload = "pgioperf"\n\n[[variants]]\nname = "a"\n\n'
                           '[[variants]]\nname = "b"\n[variants.workload_options]\n'
                           'readers = 2\nwal-sise = "8M"\n')
    with pytest.raises(UsageError) as info:
        load_plan(path)
    message = str(info.value)
    assert message.startswith(f"{path}:10: ") and "variants[1].workload_options" in message
    assert "did you mean 'wal_size'" in message


def test_a_misspelt_option_through_the_api_is_refused_before_anything_runs(tmp_path):
    plan = Plan(workload="randread", workload_options={"threds": 2, "file_size": "4M"},
                variants=[VariantSettings(name="a", dir=tmp_path)], duration_s=0.5,
                results=tmp_path / "results")
    with pytest.raises(UsageError, match="'threds' is not a randread option"):
        run_plan(plan, progress=False)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("name", available_workloads())
def test_every_workload_refuses_an_unknown_key_and_knows_its_flags(name):
    cls = get_workload(name)
    with pytest.raises(UsageError, match="'no_such_option' is not a"):
        cls.from_options({"no_such_option": 1})
    assert cls.option_names()     # every workload takes at least one option
