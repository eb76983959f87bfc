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
