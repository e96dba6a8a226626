"""The layer rules of docs/architecture.md, checked on the source: every `import` and
`from ... import` of the package (module level and inside functions) read with ast."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "stallbench"
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
            found.add(prefix)
            found.update(f"{prefix}.{alias.name}" for alias in node.names)
    return found


MODULES = {_module_name(p): p for p in SRC.rglob("*.py")}
GRAPH = {name: {m for m in _imports(path) if m in MODULES and m != name}
         for name, path in MODULES.items()}


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_analysis_imports_only_analysis_and_the_base():
    allowed = ("stallbench.analysis", "stallbench.errors", "stallbench.units")
    for name, deps in GRAPH.items():
        if _under(name, "stallbench.analysis"):
            bad = [d for d in deps if not any(_under(d, a) for a in allowed)]
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
                 "stallbench.journal", "stallbench.runner", "stallbench.record",
                 "stallbench.store", "stallbench.opsfile", "stallbench.runselect",
                 "stallbench.summaryfile", "stallbench.cli")
    for name, deps in GRAPH.items():
        if _under(name, "stallbench.report"):
            bad = [d for d in deps if any(_under(d, f) for f in forbidden)]
            assert not bad, f"{name} imports {bad}"


def test_only_the_command_line_imports_cli():
    for name, deps in GRAPH.items():
        if _under(name, "stallbench.cli") or name in ("stallbench.__main__",
                                                        "stallbench.clidocs"):
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


# the floors of docs/architecture.md's diagram (a module or package -> its floor)
FLOORS = {
    6: ["cli", "clidocs", "demo", "__main__", "vm.guest"],
    5: ["report", "exporters"],
    4: ["runner", "duet", "untildecided", "bisect", "fleet", "compare", "vm.host", "plan"],
    3: ["env", "workloads", "monitors", "importers", "vm"],
    2: ["store", "opsfile", "rundirs", "runselect", "summaryfile", "record", "metadata",
        "journal", "recovery", "context", "tracefs", "logformats", "progress",
        "variant", "options", "fleet.planhosts", "noiseprofiles"],
    1: ["analysis"],
    0: ["runmeta", "hostfacts", "jsonfile", "machineload", "signals", "syscalls", "units", "errors",
        "verbosity", "schemas"],
}
_FLOOR_OF = {name: floor for floor, names in FLOORS.items() for name in names}


def _floor(module: str) -> int | None:
    parts = module.split(".")[1:]
    if len(parts) > 1 and ".".join(parts[:2]) in _FLOOR_OF:
        return _FLOOR_OF[".".join(parts[:2])]
    return _FLOOR_OF.get(parts[0]) if parts else None


def test_every_module_has_a_floor_and_imports_none_above_it():
    for name, deps in GRAPH.items():
        if name == "stallbench":          # the package's face: lazy re-exports
            continue
        floor = _floor(name)
        assert floor is not None, f"{name} is on no floor of docs/architecture.md"
        above = [d for d in deps if d != "stallbench" and (_floor(d) or 0) > floor]
        assert not above, f"{name} (floor {floor}) imports {above}"
