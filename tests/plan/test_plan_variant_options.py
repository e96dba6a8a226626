"""Per-variant workload options in plan files."""

from __future__ import annotations

import pytest

from stallbench.core.errors import UsageError
from stallbench.plan.planfile import load_plan

pytestmark = pytest.mark.pure

PLAN = """workload = "pgioperf"
[options]
readers = 2
data_size = "1M"
[[variants]]
name = "few"
[[variants]]
name = "many"
[variants.workload_options]
readers = {readers}
"""


def test_variant_options_override_the_plan_options(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.format(readers=8))
    plan = load_plan(path)
    assert plan.workload_options["readers"] == 2
    assert [v.workload_options for v in plan.variants] == [{}, {"readers": 8}]


def test_a_bad_variant_option_names_file_line_and_key(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.format(readers=-5))
    with pytest.raises(UsageError) as error:
        load_plan(path)
    assert str(error.value).startswith(f"{path}:10: variants[1].workload_options: --readers")


def test_a_wrongly_typed_option_names_the_flag(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text('workload = "pgioperf"\n[options]\nreaders = "many"\n')
    with pytest.raises(UsageError, match=r"plan.toml:3: .*--readers must be a whole number"):
        load_plan(path)
