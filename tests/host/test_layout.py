"""The import graph has no cycle, counting imports inside functions (an import moved into a
function to dodge a cycle is still a cycle); the layering itself is import-linter's contract
in pyproject.toml, which `./noxw -s tests` checks with lint-imports."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("envbench", "bench")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the project modules it imports, anywhere in its body."""
    files = {_module_name(p, root): p for package in PACKAGES
             for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from pkg import module` names a module; `from module import name` does not.
                targets = [node.module] + ["%s.%s" % (node.module, a.name) for a in node.names]
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_back_through_others():
    graph = import_graph()
    assert len(graph) > 60  # every module was read
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path):
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "envbench" / "a.py").write_text("from envbench import b\n")
    (tmp_path / "envbench" / "b.py").write_text("def f():\n    from envbench.c import x\n")
    (tmp_path / "envbench" / "c.py").write_text("import envbench.a\nx = 1\n")
    (tmp_path / "envbench" / "d.py").write_text("from envbench import a\n")
    found = cycles(import_graph(tmp_path))
    assert found == [["envbench.a", "envbench.b", "envbench.c"]]


def test_no_module_name_is_on_both_sides():
    """bench/ runs in the images, envbench/ on the host: a data.py on each side read as one
    (a traceback, a grep, an import written from memory) is the wrong one half the time.
    Package files (__init__, __main__) are the exception that every package has."""
    names = {package: {p.name for p in (ROOT / package).rglob("*.py")
                       if p.name not in ("__init__.py", "__main__.py")}
             for package in PACKAGES}
    assert names["bench"] and names["envbench"]
    assert names["bench"] & names["envbench"] == set()


MAX_FUNCTION_LINES = 80


def test_no_function_is_longer_than_a_screen():
    """A function past 80 lines does several things; split it where its comments would
    have put headings (report/pages.py's build_context became one builder per section)."""
    long = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append("%s:%d %s (%d lines)" % (path.relative_to(ROOT),
                                                             node.lineno, node.name, lines))
    assert long == []


def _private_uses(path: Path) -> list[str]:
    """The project's private names (one leading underscore) this module takes from another:
    imported by name, or read as module._name."""
    tree = ast.parse(path.read_text(), str(path))
    modules: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[0] in PACKAGES:
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append("from %s import %s" % (node.module, alias.name))
                modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules.update(alias.asname or alias.name.split(".")[0] for alias in node.names
                           if alias.name.split(".")[0] in PACKAGES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in modules and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            found.append("%s.%s (line %d)" % (node.value.id, node.attr, node.lineno))
    return found


def test_no_module_reads_another_modules_private_names(tmp_path):
    """A private name is its module's own business: another stage that needs it needs a
    public one (slurm/run.py once imported the Docker path's privates)."""
    used = {str(path.relative_to(ROOT)): _private_uses(path) for package in PACKAGES
            for path in sorted((ROOT / package).rglob("*.py"))}
    assert {path: uses for path, uses in used.items() if uses} == {}
    # The scan sees what it looks for.
    probe = tmp_path / "probe.py"
    probe.write_text("from envbench.cells import runlock as r, _x\nr._held()\nr.__name__\n")
    assert _private_uses(probe) == ["from envbench.cells import _x", "r._held (line 2)"]


# Facts the Docker, Slurm and cloud paths once each wrote down for themselves (#49).
ONCE = {
    "LOG_TAIL_LINES": "envbench/cells/takein.py",
    "NO_RESULT": "envbench/cells/takein.py",
    "LOG_CAP": "envbench/cells/takein.py",
    "MIN_REPEATS": "envbench/inference/verdicts.py",
    "PIDS_LIMIT": "envbench/engine/spec.py",
    "WORKDIR": "envbench/engine/spec.py",
}


def test_each_shared_fact_is_assigned_in_one_module():
    assigned: dict[str, list[str]] = {name: [] for name in ONCE}
    sentence: list[str] = []
    visible: list[str] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            tree = ast.parse(path.read_text(), where)
            assigned_here = {target.id for node in tree.body if isinstance(node, ast.Assign)
                             for target in node.targets if isinstance(target, ast.Name)}
            for name in assigned_here & set(assigned):  # module constants, not a class's
                assigned[name].append(where)
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        # environment["NVIDIA_VISIBLE_DEVICES"] = ...: the one that hides
                        # the GPUs from a CPU cell, whatever runs it.
                        if isinstance(target, ast.Subscript) and isinstance(
                                target.slice, ast.Constant) and \
                                target.slice.value == "NVIDIA_VISIBLE_DEVICES":
                            visible.append(where)
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                        "without writing a valid result" in node.value:
                    sentence.append(where)
    assert assigned == {name: [where] for name, where in ONCE.items()}
    assert sentence == ["envbench/cells/takein.py"]
    assert visible == ["envbench/engine/spec.py"]


def test_a_cells_record_is_completed_and_saved_by_the_take_in_alone():
    """Docker, Slurm and a kept result each once completed and saved a cell's record their
    own way (#49): now an executor says how the cell ended and takein makes the record. A
    failed record the host writes before anything runs (records.failed) is the other way."""
    callers: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(path.read_text(), where)):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and isinstance(node.func.value, ast.Name) \
                        and node.func.value.id == "records" \
                        and node.func.attr in ("annotate", "save"):
                    callers.setdefault(node.func.attr, []).append(where)
    assert callers == {"annotate": ["envbench/cells/takein.py"],
                       "save": ["envbench/cells/takein.py"]}
