"""Plan files: what load_plan accepts, and exactly where it says a plan is wrong."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stallbench.core.errors import UsageError
from stallbench.core.units import parse_duration, parse_size
from stallbench.plan.plan import Plan
from stallbench.plan.planfile import load_plan

pytestmark = pytest.mark.pure

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(UsageError) as info:
        load_plan(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message
    return message


GOOD = """\
workload = "randread"
duration = "1500ms"
iterations = 3
monitors = "psi,diskstats"
results = "out"

[options]
file-size = "64M"

[[variants]]
name = "base"

[[variants]]
name = "small"
fs = "ext4"
fs_size = "256M"
mkfs_opts = "-O ^has_journal"
mount_opts = "noatime,data=writeback"
memory = "128M"
drop_caches = false
keep_image = true

[variants.sysctls]
vm.dirty_ratio = 5
"vm.dirty_background_bytes" = "16777216"
"""


def test_a_full_plan_is_read(tmp_path):
    plan = load_plan(write(tmp_path, GOOD))
    assert plan.workload == "randread"
    assert plan.workload_options == {"file_size": "64M"}
    assert plan.duration_s == 1.5 and plan.iterations == 3
    assert plan.monitors == ["psi", "diskstats"]
    assert plan.results == Path("out")
    base, small = plan.variants
    assert base.name == "base" and base.fs is None and base.drop_caches
    assert small.fs == "ext4" and small.fs_size == 256 << 20 and small.memory == 128 << 20
    assert small.mkfs_opts == "-O ^has_journal" and small.keep_image and not small.drop_caches
    assert small.sysctls == {"vm.dirty_ratio": "5", "vm.dirty_background_bytes": "16777216"}


@pytest.mark.parametrize("old, new, expected", [
    ('memory = "128M"', 'memory = "12Q"',
     "plan.toml:19: variants[1].memory: '12Q' is not a size"),
    ('memory = "128M"', "memory = -5",
     "plan.toml:19: variants[1].memory: must be greater than zero"),
    ('memory = "128M"', 'memory = "99999999P"', "plan.toml:19: variants[1].memory: "),
    ('memory = "128M"', 'memroy = "128M"', "plan.toml:19: variants[1].memroy: unknown key"),
    ('fs = "ext4"', 'fs = "zfs"', "plan.toml:15: variants[1].fs: 'zfs' is not a supported"),
    ('fs = "ext4"', "fs = 4", "plan.toml:15: variants[1].fs: 4 is not a supported"),
    ('name = "small"', 'name = "base"', "plan.toml:14: variants[1].name: variant name 'base' "
     "is used twice"),
    ('name = "small"', 'name = "a/b"', "plan.toml:14: variants[1].name: variant name 'a/b' is "
     "not allowed"),
    ('name = "small"', 'name = "x\\u0007"', "plan.toml:14: variants[1].name"),
    ("iterations = 3", 'iterations = "3"', "plan.toml:3: iterations: expected a whole number"),
    ("iterations = 3", "iterations = 100000000000", "plan.toml:3: iterations: must be between"),
    ('duration = "1500ms"', 'duration = "forever"', "plan.toml:2: duration: 'forever' is not"),
    ('duration = "1500ms"', "duration = nan", "plan.toml:2: duration: must be greater"),
    ('results = "out"', 'results = "../../etc"', "plan.toml:5: results: '../../etc' contains"),
    ('monitors = "psi,diskstats"', 'monitors = "psi,nope"', "plan.toml:4: monitors: unknown "
     "monitor 'nope'"),
    ("drop_caches = false", 'drop_caches = "no"', "plan.toml:20: variants[1].drop_caches: "
     "expected true or false"),
    ("vm.dirty_ratio = 5", "vm.dirty_ratio = true", "plan.toml:24: variants[1].sysctls: "
     "vm.dirty_ratio needs a string or number"),
    ("vm.dirty_ratio = 5", '"../../x" = 5', "plan.toml:24: variants[1].sysctls: '../../x' is "
     "not a sysctl name"),
    ('mkfs_opts = "-O ^has_journal"', 'mkfs_opts = "/dev/vda"', "plan.toml:17: "
     "variants[1].mkfs_opts: '/dev/vda' looks like a device"),
    ('workload = "randread"', 'workload = "nosuch"', "plan.toml:1: workload: unknown workload"),
    ('file-size = "64M"', 'file-size = "huge"', "plan.toml:8: options: --file-size: 'huge'"),
    ('name = "base"', 'name = "base"\ndir = "/tmp/../proc"', "plan.toml:12: variants[0].dir: "
     "'/tmp/../proc' contains '..'"),
    ('name = "base"', 'name = "base"\nfs_size = "1G"', "plan.toml:12: variants[0].fs_size: only "
     "makes sense with fs"),
])
def test_errors_name_file_line_and_key(tmp_path, old, new, expected):
    assert old in GOOD
    message = error_of(tmp_path, GOOD.replace(old, new, 1))
    assert message.startswith(str(tmp_path / expected)), message


def test_structural_errors(tmp_path):
    assert "invalid TOML" in error_of(tmp_path, "workload = \n")
    assert ":2: invalid TOML" in error_of(tmp_path, 'workload = "randread"\nx = = 1\n')
    assert "no 'workload' key" in error_of(tmp_path, "duration = 5\n")
    assert "unknown key" in error_of(tmp_path, 'workload = "randread"\nvariant = 1\n')
    assert "expected [[variants]]" in error_of(tmp_path, 'workload = "randread"\nvariants = 1\n')
    assert "not both" in error_of(tmp_path,
                                  'workload = "randread"\n[options]\n[workload_options]\n')
    assert "needs a name" in error_of(tmp_path, 'workload = "randread"\n[[variants]]\nfs="ext4"\n')
    assert "invalid TOML" in error_of(tmp_path, "x = " + "[" * 5000 + "]" * 5000)
    (tmp_path / "big.toml").write_text("#" * (2 << 20))
    with pytest.raises(UsageError, match="larger than"):
        load_plan(tmp_path / "big.toml")
    (tmp_path / "bin.toml").write_bytes(b"workload = \"\xff\"")
    with pytest.raises(UsageError, match="not UTF-8"):
        load_plan(tmp_path / "bin.toml")
    with pytest.raises(UsageError, match="cannot read"):
        load_plan(tmp_path / "missing.toml")
    with pytest.raises(UsageError, match="cannot read"):
        load_plan(tmp_path)


def test_a_plan_without_variants_gets_one_named_after_the_kernel(tmp_path):
    import os

    plan = load_plan(write(tmp_path, 'workload = "randread"\n'))
    assert [v.name for v in plan.variants] == [os.uname().release]


def test_sysctls_as_a_list_of_assignments(tmp_path):
    plan = load_plan(write(tmp_path, 'workload = "randread"\n[[variants]]\nname = "a"\n'
                                     'sysctls = ["vm.dirty_ratio=5", "vm.swappiness = 10"]\n'))
    assert plan.variants[0].sysctls == {"vm.dirty_ratio": "5", "vm.swappiness": "10"}


@pytest.mark.parametrize("name", ["ext3-vs-ext4", "low-memory-randread", "dirty-ratio"])
def test_examples_load(name):
    plan = load_plan(EXAMPLES / f"{name}.toml")
    assert len(plan.variants) == 2
    assert plan.duration_s <= 30


def test_example_ext3_vs_ext4_is_seed_004_scaled():
    plan = load_plan(EXAMPLES / "ext3-vs-ext4.toml")
    assert plan.workload == "pgioperf"
    assert {v.fs for v in plan.variants} == {"ext3", "ext4"}
    assert all(v.memory == 256 << 20 for v in plan.variants)


# -- property tests: whatever the input, a Plan or one UsageError, never anything else ----------

_VALUES = st.recursive(
    st.none().map(lambda _: '""') | st.integers(-(2 ** 70), 2 ** 70).map(str)
    | st.floats(allow_nan=True).map(lambda f: repr(f).replace("inf", "inf").replace("nan", "nan"))
    | st.booleans().map(lambda b: str(b).lower())
    | st.text(string.printable, max_size=12).map(lambda s: '"' + s.replace("\\", "\\\\")
                                                    .replace('"', '\\"').replace("\n", "\\n")
                                                    .replace("\r", "\\r") + '"'),
    lambda inner: st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
    max_leaves=6,
)
_KEYS = st.sampled_from(["workload", "duration", "iterations", "monitors", "results", "name",
                         "dir", "fs", "fs_size", "mkfs_opts", "mount_opts", "work_dir",
                         "keep_image", "memory", "system_memory", "scheduler", "drop_caches",
                         "sysctls", "options", "bogus", '"vm.dirty_ratio"', "file_size"])
_LINES = st.one_of(
    st.tuples(_KEYS, _VALUES).map(lambda kv: f"{kv[0]} = {kv[1]}"),
    st.sampled_from(["[[variants]]", "[options]", "[workload_options]", "[variants.sysctls]",
                     "[variants]", 'workload = "randread"', 'workload = "pgioperf"', "", "# c"]),
    st.text(max_size=20),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.lists(_LINES, max_size=12))
def test_load_plan_gives_a_plan_or_a_usage_error(tmp_path, lines):
    path = tmp_path / "p.toml"
    path.write_bytes("\n".join(lines).encode("utf-8", "replace"))
    try:
        plan = load_plan(path)
    except UsageError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(path))
        return
    assert isinstance(plan, Plan) and plan.variants


@given(st.one_of(st.text(max_size=20), st.integers(), st.floats(), st.booleans()))
def test_parse_size_gives_bytes_or_a_usage_error(value):
    try:
        result = parse_size(value)
    except UsageError:
        return
    assert isinstance(result, int) and 0 < result <= 1 << 60


@given(st.one_of(st.text(max_size=20), st.integers(), st.floats(), st.booleans()))
def test_parse_duration_gives_seconds_or_a_usage_error(value):
    try:
        result = parse_duration(value)
    except UsageError:
        return
    assert isinstance(result, float) and 0 < result <= 366 * 86400


@given(st.from_regex(r"\A[0-9]{1,6}(\.[0-9]{1,3})?[kKmMgG]?\Z"))
def test_parse_size_matches_hand_computation(text):
    number = float(text.rstrip("kKmMgG"))
    power = {"": 0, "k": 1, "m": 2, "g": 3}[text[-1].lower() if text[-1].isalpha() else ""]
    expected = int(number * 1024 ** power)
    if expected <= 0:
        with pytest.raises(UsageError):
            parse_size(text)
    else:
        assert parse_size(text) == expected


def test_the_results_directory_defaults_to_stallbench_results(tmp_path, monkeypatch):
    monkeypatch.setenv("STALLBENCH_RESULTS", str(tmp_path / "elsewhere"))
    assert load_plan(write(tmp_path, 'workload = "randread"\n')).results == tmp_path / "elsewhere"
    assert Plan(workload="randread", workload_options={}, variants=[]).results == \
        tmp_path / "elsewhere"
    monkeypatch.delenv("STALLBENCH_RESULTS")
    assert Plan(workload="randread", workload_options={}, variants=[]).results == Path("results")
