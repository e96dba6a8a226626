"""A bundle's round trip (issue 46 item 3) on a real results tree (randread, two record sizes,
a run each): `export --format bundle --ops`, the archive moved elsewhere and the original tree
gone, and `compare --results b.tar.gz` prints the same report byte for byte (the JSON: the
same apart from the run folders' paths); without --ops the statistics are the same, said to
come from the summaries, and the size of the ops left out is stated. The archive holds what
the issue lists (plans as they ran, run.json files, summaries, kernel configs by their hash,
the report as text, email and HTML) and nothing else; `tar` itself lists it; `series` and
`reproduce` take it too (reproduce refuses nothing here but its NEW folder)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import run_stallbench

pytestmark = [pytest.mark.oracle, pytest.mark.root]

PLAN = """workload = "randread"
duration = "1s"
iterations = 1
monitors = ["counters", "psi"]
results = "{results}"
[workload_options]
file_size = "8M"
[[variants]]
name = "rs4k"
workload_options = {{ record_size = "4K" }}
[[variants]]
name = "rs64k"
workload_options = {{ record_size = "64K" }}
"""


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("bundle")
    plan = base / "plan.toml"
    plan.write_text(PLAN.format(results=base / "results"))
    run_stallbench("-q", "run", "--plan", str(plan), "--no-progress", check=True, timeout=300)
    results = base / "results"
    out = {"results": results}
    for name, extra in (("with_ops", ["--ops"]), ("without_ops", [])):
        archive = base / f"{name}.tar.gz"
        proc = run_stallbench("export", str(results), "--format", "bundle", "--output",
                              str(archive), *extra)
        assert proc.returncode == 0, proc.stderr
        out[name] = archive
        out[name + "_line"] = proc.stdout
    reports = {fmt: run_stallbench("compare", "rs4k", "rs64k", "--results", str(results),
                                   "--format", fmt).stdout for fmt in ("text", "json")}
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    for name in ("with_ops", "without_ops"):
        out[name] = Path(shutil.move(out[name], elsewhere / out[name].name))
    shutil.move(results, base / "gone")       # the original tree is not where it was
    out["gone"] = base / "gone"
    out["reports"] = reports
    return out


def test_compare_of_the_bundle_is_the_compare_of_the_tree(trees):
    text = run_stallbench("compare", "rs4k", "rs64k", "--results", str(trees["with_ops"]))
    assert text.returncode == 0, text.stderr
    assert text.stdout == trees["reports"]["text"]
    data = run_stallbench("compare", "rs4k", "rs64k", "--results", str(trees["with_ops"]),
                          "--format", "json")
    then, now = json.loads(trees["reports"]["json"]), json.loads(data.stdout)
    paths = []
    for old, new in zip(then["variants"], now["variants"], strict=True):
        for a, b in zip(old["runs"], new["runs"], strict=True):
            assert Path(a["path"]).parts[-3:] == Path(b["path"]).parts[-3:]
            paths.append(b["path"])
            a["path"] = b["path"] = "RUN"
    assert now == then
    assert all("stallbench-bundle-" in p for p in paths)
    assert not any(Path(p).exists() for p in paths)     # the folder went with the command


def test_the_bundle_extracted_by_tar_elsewhere_compares_the_same(trees, tmp_path):
    subprocess.run(["tar", "xzf", str(trees["with_ops"]), "-C", str(tmp_path)], check=True)
    proc = run_stallbench("compare", "rs4k", "rs64k", "--results", str(tmp_path / "results"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == trees["reports"]["text"]


def test_without_ops_the_numbers_stand_and_the_report_says_so(trees):
    assert "ops.parquet left out (" in trees["without_ops_line"]
    data = json.loads(run_stallbench("compare", "rs4k", "rs64k", "--results",
                                     str(trees["without_ops"]), "--format", "json").stdout)
    then = json.loads(trees["reports"]["json"])
    for op, entry in then["ops"].items():
        for label, stats in entry["variants"].items():
            got = data["ops"][op]["variants"][label]
            for key in ("samples", "rate", "p50_ns", "p99_ns", "max_ns", "mean_ns"):
                assert got[key] == stats[key], (op, label, key)
    assert any("ops.parquet are not here" in note for note in data["notes"])


def test_the_archive_holds_what_the_issue_lists(trees):
    listing = subprocess.run(["tar", "tzf", str(trees["without_ops"])], capture_output=True,
                             text=True, check=True).stdout.split()
    gone = trees["gone"]
    runs = sorted(p.parent.relative_to(gone) for p in gone.glob("*/*/*/run.json"))
    assert len(runs) == 2
    with tarfile.open(trees["without_ops"]) as tar:
        manifest = json.load(tar.extractfile("stallbench-bundle.json"))
        for run in runs:
            recorded = (gone / run / "run.json").read_bytes()
            assert tar.extractfile(f"results/{run}/run.json").read() == recorded
            assert f"results/{run}/summary.parquet" in listing
            assert f"results/{run}/ops.parquet" not in listing
            meta = json.loads(recorded)
            plan = tar.extractfile(f"plans/{meta['plan']['hash']}.toml").read().decode()
            assert plan == meta["plan"]["text"]
            digest = meta["kernel"].get("config_sha256")
            if digest:
                config = tar.extractfile(f"kernels/{digest}.config").read()
                assert hashlib.sha256(config).hexdigest() == digest
        for suffix in (".txt", ".email.txt", ".html"):
            assert f"reports/randread{suffix}" in listing
        email = tar.extractfile("reports/randread.email.txt").read().decode()
        assert email.startswith("Subject: ") and max(map(len, email.splitlines())) <= 72
    ops = sum((gone / run / "ops.parquet").stat().st_size for run in runs)
    assert manifest["ops_bytes"] == ops and manifest["ops_included"] is False
    assert manifest["stallbench_version"] and manifest["runs"] == 2
    assert all(name.startswith(("results/", "plans/", "kernels/", "reports/",
                                "stallbench-bundle.json")) for name in listing)
    with_ops = subprocess.run(["tar", "tzf", str(trees["with_ops"])], capture_output=True,
                              text=True, check=True).stdout.split()
    assert sum(name.endswith("/ops.parquet") for name in with_ops) == 2


def test_series_and_reproduce_take_the_bundle(trees, tmp_path):
    proc = run_stallbench("series", "rs4k", "rs64k", "--results", str(trees["without_ops"]))
    # opened, its runs read, then judged: two record sizes are no series of one shape
    assert proc.returncode == 2 and "record_size is 4096 in rs4k" in proc.stderr, proc.stderr
    proc = run_stallbench("reproduce", str(trees["without_ops"]), "--results",
                          str(trees["gone"]))
    assert proc.returncode == 2 and "already holds runs of rs4k, rs64k" in proc.stderr
