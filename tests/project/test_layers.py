"""The layer rules of docs/architecture.md, checked on the source: every `import` and
`from ... import` of the package (module level and inside functions) read with ast."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure

SRC = Path(__file__).resolve().parents[2] / "src" / "stallbench"
PURE_FORBIDDEN_MODULES = {"os", "pathlib", "subprocess", "shutil", "socket", "tempfile",
                          "pyarrow.parquet", "matplotlib", "rich", "sys"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of everything `path` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names = {f"{prefix}.{alias.name}" for alias in node.names}
            submodules = {name for name in names if name in MODULES}
            found.update(submodules)
            if names - submodules:   # a name of the package's own (its __init__), not a module
                found.add(prefix)
    return found


MODULES = {_module_name(p): p for p in SRC.rglob("*.py")}
GRAPH = {name: {m for m in _imports(path) if m in MODULES and m != name}
         for name, path in MODULES.items()}


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_analysis_and_core_import_nothing_else_of_the_package():
    for ground in ("stallbench.analysis", "stallbench.core"):
        for name, deps in GRAPH.items():
            if _under(name, ground):
                bad = [d for d in deps if not _under(d, ground)]
                assert not bad, f"{name} imports {bad}"


def test_analysis_reads_no_files_and_prints_nothing():
    for name, path in MODULES.items():
        if not _under(name, "stallbench.analysis"):
            continue
        tree = ast.parse(path.read_text())
        imported = _imports(path)
        assert not imported & PURE_FORBIDDEN_MODULES, (name, imported & PURE_FORBIDDEN_MODULES)
        calls = {node.func.id for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
        assert not calls & {"open", "print", "input"}, (name, calls & {"open", "print"})


def test_report_reads_no_runs_and_changes_nothing():
    forbidden = ("stallbench.env", "stallbench.monitors", "stallbench.workloads",
                 "stallbench.core.journal", "stallbench.run", "stallbench.results.oprecorder",
                 "stallbench.results.store", "stallbench.results.opsfile",
                 "stallbench.results.runselect", "stallbench.results.summaryfile",
                 "stallbench.cli")
    for name, deps in GRAPH.items():
        if _under(name, "stallbench.report"):
            bad = [d for d in deps if any(_under(d, f) for f in forbidden)]
            assert not bad, f"{name} imports {bad}"


def test_only_the_command_line_imports_cli():
    for name, deps in GRAPH.items():
        if _under(name, "stallbench.cli") or name in ("stallbench.__main__",
                                                        "stallbench.cli.docs"):
            continue
        bad = [d for d in deps if _under(d, "stallbench.cli")]
        assert not bad, f"{name} imports {bad}"


def test_workloads_know_nothing_of_monitors_or_environments():
    for name, deps in GRAPH.items():
        if _under(name, "stallbench.workloads"):
            bad = [d for d in deps if _under(d, "stallbench.monitors")
                   or _under(d, "stallbench.env")]
            assert not bad, f"{name} imports {bad}"


def test_no_import_circles_between_modules():
    # Tarjan's strongly connected components over module -> imported module (package
    # __init__ re-exports count as the package's own)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def edges(name: str) -> set[str]:
        return {d for d in GRAPH[name]
                if not (MODULES[d].name == "__init__.py" and _under(name, d))}

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for name in sorted(GRAPH):
        if name not in index:
            visit(name)
    assert circles == []


DOC = SRC.parent.parent / "docs" / "architecture.md"
FLOOR_HEADING = re.compile(r"^--- (\d+) (.+?) -+$")


def _documented_floors(text: str) -> dict[str, int]:
    """The diagram of docs/architecture.md, read: under each `--- N name ---` heading, every
    line that starts in the first column names a module (`__main__.py`, `run/guest.py`) or a
    package (`cli/`): its dotted name below stallbench -> N."""
    diagram = text.split("```")[1]
    floors: dict[str, int] = {}
    floor = None
    for line in diagram.splitlines():
        heading = FLOOR_HEADING.match(line)
        if heading:
            floor = int(heading.group(1))
        elif line[:1].strip() and floor is not None:
            path = line.split()[0].removesuffix("/").removesuffix(".py")
            floors[path.replace("/", ".")] = floor
    return floors


FLOORS = _documented_floors(DOC.read_text())


def _floor(module: str) -> int | None:
    """The floor of the longest documented name that is the module or a package above it."""
    parts = module.split(".")[1:] or ["__init__"]   # the package itself: its __init__.py
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in FLOORS:
            return FLOORS[name]
    return None


def test_the_document_draws_at_most_eight_floors_each_named_once():
    headings = [FLOOR_HEADING.match(line) for line in DOC.read_text().split("```")[1]
                .splitlines()]
    numbers = [int(h.group(1)) for h in headings if h]
    assert numbers == sorted(set(numbers), reverse=True) and len(numbers) <= 8, numbers
    documented = DOC.read_text().split("```")[1]
    names = [line.split()[0] for line in documented.splitlines()
             if line[:1].strip() and not FLOOR_HEADING.match(line)]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_a_module_is_on_its_package_floor():
    # a folder is one floor, so the tree is the diagram: no module drawn apart from its package
    apart = {name: (floor, FLOORS[name.split(".")[0]]) for name, floor in FLOORS.items()
             if "." in name and FLOORS.get(name.split(".")[0], floor) != floor}
    assert not apart, f"docs/architecture.md draws modules off their package's floor: {apart}"


def test_every_documented_name_is_a_module_or_package():
    missing = [name for name in FLOORS
               if not (SRC / f"{name.replace('.', '/')}.py").exists()
               and not (SRC / name.replace(".", "/")).is_dir()]
    assert not missing, f"docs/architecture.md names what src/stallbench does not hold: {missing}"


def test_every_module_has_a_floor_and_imports_none_above_it():
    for name, deps in GRAPH.items():
        floor = _floor(name)
        assert floor is not None, f"{name} is on no floor of docs/architecture.md"
        above = [d for d in deps if (_floor(d) or 0) > floor]
        assert not above, f"{name} (floor {floor}) imports {above}"


def _journaled_kinds() -> dict[str, str]:
    """Every kind of change the source journals, kind -> a module that does: the first
    argument of each `.push("kind", ...)` and each `journal_kind="kind"` (a keyword or a
    parameter's default, supervisor.start's)."""
    found: dict[str, str] = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            kinds = []
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "push" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                kinds.append(node.args[0].value)
            if isinstance(node, ast.keyword) and node.arg == "journal_kind" \
                    and isinstance(node.value, ast.Constant):
                kinds.append(node.value.value)
            if isinstance(node, ast.arguments):
                named = [*node.posonlyargs, *node.args, *node.kwonlyargs]
                defaults = [*[None] * (len(node.posonlyargs) + len(node.args)
                                       - len(node.defaults)), *node.defaults,
                            *node.kw_defaults]
                kinds += [d.value for a, d in zip(named, defaults, strict=True)
                          if a.arg == "journal_kind" and isinstance(d, ast.Constant)]
            found.update({kind: name for kind in kinds if isinstance(kind, str)})
    return found


def _registered_kinds(path: Path) -> set[str]:
    """The kinds a module registers with @register_undo("kind") (any spelling of the name)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                func = deco.func if isinstance(deco, ast.Call) else None
                name = func.attr if isinstance(func, ast.Attribute) else \
                    func.id if isinstance(func, ast.Name) else None
                if name == "register_undo" and isinstance(deco.args[0], ast.Constant):
                    found.add(deco.args[0].value)
    return found


def test_every_journaled_kind_has_an_undo_that_cleanup_reaches():
    """run/undo.py names each kind's module; `stallbench cleanup` and the processes that
    journal import it, and through it (plain imports, which this file's graph sees) every
    module that registers an undo."""
    from stallbench.run.undo import UNDO_MODULES, undo_kinds

    journaled = _journaled_kinds()
    assert {"finalize_run", "kill", "sysctl", "pg_stop"} <= set(journaled), journaled
    missing = {kind: where for kind, where in journaled.items() if kind not in UNDO_MODULES}
    assert not missing, f"journaled kinds that run/undo.py names no undo for: {missing}"
    for kind, module in UNDO_MODULES.items():
        assert module.__name__ in GRAPH["stallbench.run.undo"] | {"stallbench.run.undo"}, kind
        assert kind in _registered_kinds(MODULES[module.__name__]), \
            f"{module.__name__} does not register_undo({kind!r})"
    every_registered = set().union(*(_registered_kinds(p) for p in MODULES.values()))
    assert every_registered == set(UNDO_MODULES), every_registered ^ set(UNDO_MODULES)
    assert set(undo_kinds()) == set(UNDO_MODULES)
    for user in ("stallbench.cli.cleanup", "stallbench.run.runner", "stallbench.run.vmhost",
                 "stallbench.bisect.gitkernels"):
        assert "stallbench.run.undo" in GRAPH[user], user
