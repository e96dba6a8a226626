"""run.json as a typed RunMeta: real run.json files (a run and an import recorded here, and a
file written by stallbench 0.1.0 on this machine kind) survive read + write unchanged, keys
this version does not know are kept, a damaged run.json is one line and exit 2, and what
RunMeta writes is what schemas/run.schema.json describes."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from conftest import run_stallbench
from stallbench import schemas
from stallbench.cli import main
from stallbench.core.errors import RunDataError
from stallbench.importers import import_log
from stallbench.results.recovery import recover_run
from stallbench.results.runmeta import (
    RUN_FILE,
    MonitorStatus,
    RunMeta,
    Status,
    read_meta,
    write_meta,
)
from stallbench.results.store import load_run

pytestmark = pytest.mark.pure

OLD_RUN = Path(__file__).parents[1] / "data" / "run-0.1.0.json"     # a real 0.1.0 randread run


def _round_trip(run_json: Path, tmp_path: Path) -> RunMeta:
    """Read with RunMeta, write back with the store's writer: same bytes as the file read."""
    meta = read_meta(run_json)
    copy = tmp_path / "copy" / RUN_FILE
    copy.parent.mkdir(exist_ok=True)
    write_meta(copy, meta)
    assert copy.read_bytes() == run_json.read_bytes()
    assert list(meta.to_json()) == list(json.loads(run_json.read_text()))   # the key order too
    return meta


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A real short run with the default monitors and an import, in one results directory."""
    results = tmp_path_factory.mktemp("runmeta") / "results"
    work = results.parent / "work"
    work.mkdir()
    run_stallbench("run", "randread", "--variant", "a", "--results", str(results),
                   "--dir", str(work), "--file-size", "8M", "--duration", "1", "--warmup", "0",
                   "--no-progress", check=True)
    log = results.parent / "pgioperf.log"
    log.write_text("commit[100]: avg: 1.5 msec; max: 20.0 msec time: 1000.0\n"
                   "read[101]: avg: 2.0 msec; max: 30.0 msec time: 1001.5\n")
    import_log("mmtests-pgioperf", log, "imp", results)
    return results


def test_a_recorded_run_and_an_import_round_trip(recorded, tmp_path):
    run = _round_trip(recorded / "a" / "randread" / "1" / RUN_FILE, tmp_path)
    assert run.status is Status.COMPLETE and run.samples["read"] > 0
    assert run.warmup_s == 0.0 and run.ops_declared == ["read"] and not run.extra
    assert set(run.monitors) and all(m["status"] in set(MonitorStatus) for m in
                                     run.monitors.values())
    imported = _round_trip(recorded / "imp" / "mmtests-pgioperf" / "1" / RUN_FILE, tmp_path)
    assert imported.imported is True and imported.interval_sampled is True
    assert imported.samples == {"commit": 1, "read": 1} and not imported.extra


def test_a_file_written_by_0_1_0_round_trips(tmp_path):
    meta = _round_trip(OLD_RUN, tmp_path)
    assert meta.stallbench_version == "0.1.0" and meta.iteration == 3
    assert meta.kernel["release"] and meta.duration_s > 0 and not meta.extra


def test_unknown_keys_survive_cleanup_of_a_killed_run(tmp_path):
    """An old file with a key this version does not know, left "running" by a killed run:
    `stallbench cleanup`'s rewrite marks it failed and keeps every other key and value."""
    data = json.loads(OLD_RUN.read_text())
    old = {}
    for key, value in data.items():       # the unknown key in the middle, as a newer writer might
        old[key] = "running" if key == "status" else value
        if key == "host":
            old["future_key"] = {"nested": [1, 2.5, None], "text": "kept"}
    run_dir = tmp_path / "v" / "randread" / "1"
    run_dir.mkdir(parents=True)
    (run_dir / RUN_FILE).write_text(json.dumps(old, indent=2) + "\n")
    assert recover_run(run_dir, None) == 0
    after = json.loads((run_dir / RUN_FILE).read_text())
    assert list(after) == list(old)
    changed = {k for k in old if after[k] != old[k]}
    assert changed == {"status", "reason", "end_utc"} and after["status"] == "failed"
    assert after["future_key"] == old["future_key"]
    assert load_run(run_dir).meta.extra == {"future_key": old["future_key"]}


@pytest.mark.parametrize("text, message", [
    ("{\"schema_version\": 1, \"variant\": ", "malformed JSON"),
    ("[1, 2]", "malformed (not a JSON object)"),
    ("<samples a list>", "malformed (samples is an array, expected an object)"),
    ("<status bogus>", "malformed (status 'bogus' is none of running, complete"),
    ("<no workload>", "malformed (no workload)"),
    ("<schema 99>", "written by a newer stallbench (schema 99"),
])
def test_a_damaged_run_json_is_one_line_and_exit_2(tmp_path, capsys, text, message):
    data = json.loads(OLD_RUN.read_text())
    if text == "<samples a list>":
        data["samples"] = [1]
    elif text == "<status bogus>":
        data["status"] = "bogus"
    elif text == "<no workload>":
        del data["workload"]
    elif text == "<schema 99>":
        data["schema_version"] = 99
    run_dir = tmp_path / "v" / "randread" / "1"
    run_dir.mkdir(parents=True)
    (run_dir / RUN_FILE).write_text(text if not text.startswith("<") else json.dumps(data))
    assert main(["show", str(run_dir)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and message in lines[0] and str(run_dir) in lines[0], lines
    with pytest.raises(RunDataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_run(run_dir)


def test_the_command_line_says_one_line_too(tmp_path):
    run_dir = tmp_path / "v" / "randread" / "1"
    run_dir.mkdir(parents=True)
    (run_dir / RUN_FILE).write_text('{"schema_version": 1, "samples": ')
    out = run_stallbench("show", str(run_dir))
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1 and "malformed JSON" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_schema_validates_what_runmeta_writes(recorded, tmp_path):
    schema = schemas.load("run")
    old_dir = tmp_path / "old" / "randread" / "1"
    old_dir.mkdir(parents=True)
    shutil.copy(OLD_RUN, old_dir / RUN_FILE)
    paths = [recorded / "a" / "randread" / "1", recorded / "imp" / "mmtests-pgioperf" / "1",
             old_dir]
    for path in paths:
        jsonschema.validate(load_run(path).meta.to_json(), schema)
    # the record and the schema name the same keys, statuses and monitor statuses
    fields = {f.name for f in dataclasses.fields(RunMeta)} - {"extra"}
    assert fields == set(schema["properties"])
    assert set(schema["required"]) <= fields
    assert schema["properties"]["status"]["enum"] == [s.value for s in Status]
    monitor = schema["properties"]["monitors"]["additionalProperties"]
    assert monitor["properties"]["status"]["enum"] == [s.value for s in MonitorStatus]
    bad = {**load_run(paths[0]).meta.to_json(), "status": "done"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_typed_fields_agree_with_the_file(recorded):
    meta = load_run(recorded / "a" / "randread" / "1").meta
    data = json.loads((recorded / "a" / "randread" / "1" / RUN_FILE).read_text())
    for key, value in data.items():
        assert getattr(meta, key) == value, key
    assert meta.histogram_derived is None and meta.fleet is None     # absent keys
    meta.status = "failed"                                          # coerced to the enum
    assert meta.status is Status.FAILED and meta.to_json()["status"] == "failed"
