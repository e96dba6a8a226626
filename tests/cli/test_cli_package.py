"""What a `pip install` of the wheel gives (issue 23 item 14): `stallbench completion bash|zsh`
prints the scripts shipped in the package, and the man page lands under the installation's
share/, where man finds it. Built for real: the wheel from a copy of this source tree with the
build backend already here, installed offline into a fresh virtual environment without the
package's dependencies (the command line needs none of them to start)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from stallbench.cli import build_parser
from stallbench.cli.docs import bash, fish, man, zsh

pytestmark = pytest.mark.pure


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MANPATH")}
    return {**env, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    pytest.importorskip("setuptools")
    tmp = tmp_path_factory.mktemp("wheel")
    tree = tmp / "tree"
    shutil.copytree(ROOT / "src", tree / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tree / name)
    env = _clean_env()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(tmp / "wheels"), str(tree)],
                   check=True, env=env, capture_output=True, timeout=300)
    wheel, = (tmp / "wheels").glob("stallbench-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   env=env, timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"),
                    "install", "-q", "--no-deps", str(wheel)], check=True, env=env,
                   capture_output=True, timeout=300)
    return venv


def _sb(venv: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin/stallbench"), *args], capture_output=True,
                          text=True, timeout=60, env=_clean_env(), cwd=venv.parent)


def test_the_installed_package_prints_its_completion_scripts(installed) -> None:
    where = subprocess.run([str(installed / "bin/python"), "-c",
                            "import stallbench; print(stallbench.__file__)"],
                           capture_output=True, text=True, env=_clean_env(), check=True)
    assert Path(where.stdout.strip()).is_relative_to(installed)     # not this source tree
    parser = build_parser()
    for shell, generate in (("bash", bash), ("zsh", zsh), ("fish", fish)):
        out = _sb(installed, "completion", shell)
        assert out.returncode == 0, out.stderr
        assert out.stdout == generate(parser), shell
    assert (installed / "share/fish/vendor_completions.d/stallbench.fish").read_text() == \
        fish(parser)
    bad = _sb(installed, "completion", "tcsh")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "invalid choice: 'tcsh'" in bad.stderr
    # bash completes with the printed script, the new command included
    script = (f"source <({installed}/bin/stallbench completion bash)\n"
              "COMP_WORDS=(stallbench comp); COMP_CWORD=1; _stallbench\n"
              "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                          env=_clean_env())
    assert done.stdout.split() == ["compare", "completion"], done.stderr


def test_the_installed_package_has_its_man_page_where_man_looks(installed) -> None:
    page = installed / "share/man/man1/stallbench.1"
    assert page.read_text() == man(build_parser())
    if shutil.which("man") is None:
        pytest.skip("man (man-db) not installed")
    found = subprocess.run(["man", "-w", "stallbench"], capture_output=True, text=True,
                           timeout=60, env=_clean_env(PATH=f"{installed}/bin:/usr/bin:/bin"))
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()) == page


def test_the_wheel_says_its_license_authors_and_classifiers(installed) -> None:
    from importlib.metadata import PathDistribution

    (info,) = (installed / "lib").glob("python*/site-packages/stallbench-*.dist-info")
    meta = PathDistribution(info).metadata
    assert meta["License-Expression"] == "MIT" and meta.get_all("License-File") == ["LICENSE"]
    assert (info / "licenses" / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()
    assert meta["Author"] and "Operating System :: POSIX :: Linux" in meta.get_all("Classifier")


def test_every_package_the_source_imports_is_declared() -> None:
    """A module the installed stallbench imports must come from a distribution pyproject.toml
    names (a dependency, or an extra for the code that needs it), not from whatever else this
    machine has (fleet/deploy.py once used packaging, and pip's vendored copy without it)."""
    import ast
    import tomllib
    from importlib.metadata import packages_distributions

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {Requirement(r).name.lower() for r in project["dependencies"]}
    declared |= {Requirement(r).name.lower() for extra in project["optional-dependencies"]
                 .values() for r in extra}
    providers = packages_distributions()
    missing = {}
    for path in (ROOT / "src" / "stallbench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and not node.level \
                and node.module else []
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == "stallbench":
                    continue
                dists = {d.lower() for d in providers.get(top, [])}
                if not dists & declared:
                    missing.setdefault(top, str(path.relative_to(ROOT)))
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"
