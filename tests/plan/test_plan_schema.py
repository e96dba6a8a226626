"""The shipped plan schema says what the plan reader accepts (issue 23 item 15): a plan that
`stallbench run` refuses for a key fails validation against src/stallbench/schemas/
plan.schema.json too (an editor shows the misspelling), and plans the reader takes validate."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stallbench import schemas
from stallbench.plan.planfile import load_plan

pytestmark = pytest.mark.pure

jsonschema = pytest.importorskip("jsonschema")
tomllib = pytest.importorskip("tomllib")

V = '[[variants]]\nname = "x"\n'

# (plan text, what the reader's one line says)
REFUSED = {
    "misspelt option": ('workload = "randread"\n[options]\nthreds = 2\n' + V,
                        "unknown key 'threds' in [options] (did you mean 'threads'?)"),
    "misspelt dashed option": ('workload = "randread"\n' + V + '[variants.workload_options]\n'
                               'record-sise = "8K"\n', "unknown key 'record-sise'"),
    "another workload's option": ('workload = "pgioperf"\n[workload_options]\nthreads = 2\n' + V,
                                  "unknown key 'threads' in [workload_options]"),
    "misspelt boot key": ('workload = "randread"\n' + V + 'boot = { kexec = "/boot/vmlinuz", '
                          'release = "6.1.0-1-amd64", inintrd = "/boot/initrd.img" }\n',
                          "variants[0].boot.inintrd: unknown key"),
    "misspelt io_max key": ('workload = "randread"\n' + V + 'io_max = { rbps = "4M", rbsp = 5 }\n',
                            "'rbsp' is not one of rbps"),
    "both option tables": ('workload = "randread"\n[options]\nthreads = 2\n[workload_options]\n'
                           'seed = 3\n' + V, "give either [workload_options] or [options]"),
    "metrics without auto": ('workload = "randread"\nmetrics = ["read:p99"]\n' + V,
                             'only with iterations = "auto"'),
}

ACCEPTED = {
    "options both spellings": 'workload = "randread"\n[options]\nrecord-size = "8K"\n'
                              'file_size = "4M"\n' + V + '[variants.workload_options]\n'
                              'threads = 2\n',
    "pgioperf options": 'workload = "pgioperf"\n[workload_options]\nreaders = 2\n' + V,
    "kexec boot": 'workload = "randread"\n' + V + 'boot = { kexec = "/boot/vmlinuz", initrd = '
                  '"/boot/initrd.img", release = "6.1.0-1-amd64" }\n',
    "io_max table": 'workload = "randread"\n' + V + 'io_max = { rbps = "4M", wiops = 100 }\n',
    "auto iterations": 'workload = "randread"\niterations = "auto"\nmax_iterations = 4\n'
                       'metrics = ["read:p99"]\n' + V,
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_the_reader_refuses_the_schema_refuses(tmp_path, case):
    text, needle = REFUSED[case]
    path = tmp_path / "plan.toml"
    path.write_text(text)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(tomllib.loads(text), schemas.load("plan"))
    out = subprocess.run([sys.executable, "-m", "stallbench", "run", "--plan", str(path),
                          "--results", str(tmp_path / "r")], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_what_the_reader_accepts_the_schema_accepts(tmp_path, case):
    path = tmp_path / "plan.toml"
    path.write_text(ACCEPTED[case])
    load_plan(path)
    jsonschema.validate(tomllib.loads(ACCEPTED[case]), schemas.load("plan"))
