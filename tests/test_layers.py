"""The layers of docs/architecture.md hold in the code.

import-linter reads every import of the package (at module level and inside
functions) and checks the contracts in pyproject.toml: a module imports only
from its own layer and the layers below it, and only the backends import CuPy.
The same import graph (grimp's, which import-linter uses) has no cycle between
files. The checks here also keep the document and the contract saying the
same, and forbid tests of a backend's name outside the backends.
"""
import ast
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

grimp = pytest.importorskip("grimp", reason="import-linter (a test extra) is not installed")

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "workbench"


def _contract(contract_id: str) -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return next(c for c in config["contracts"] if c["id"] == contract_id)


def _lint(cwd: pathlib.Path = ROOT) -> subprocess.CompletedProcess:
    """``lint-imports`` on the package under ``cwd`` (its pyproject.toml's contracts)."""
    lint = pathlib.Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(lint), "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_imports_follow_the_layers_and_cupy_stays_in_the_backends():
    result = _lint()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    # the same check on a copy of the package with one upward import added
    copy = tmp_path / "tree"
    shutil.copytree(PACKAGE, copy / "workbench",
                    ignore=shutil.ignore_patterns("__pycache__", "labextension", "*.so"))
    (copy / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    target = copy / "workbench" / "runtime" / "timing.py"
    target.write_text(target.read_text() + "\n\ndef _upward():\n    from ..benchmarking import engine\n")
    result = _lint(cwd=copy)
    assert result.returncode != 0
    assert "workbench.runtime is not allowed to import workbench.benchmarking" in result.stdout


def test_the_architecture_document_lists_the_layers_of_the_contract():
    text = (ROOT / "docs" / "architecture.md").read_text().split("```")[1]  # the drawing
    order = []
    for layer in _contract("layers")["layers"]:
        for module in re.split(r"[:|]", layer):
            name = module.strip().removeprefix("workbench.")
            position = text.find(f"workbench/{name}")
            assert position >= 0, f"docs/architecture.md does not name workbench/{name}"
            order.append((layer, position))
    # the document draws the layers top to bottom, as the contract lists them
    firsts = {}
    for layer, position in order:
        firsts.setdefault(layer, position)
    positions = [firsts[layer] for layer in _contract("layers")["layers"]]
    assert positions == sorted(positions), "the layers in docs/architecture.md are out of order"


def _name_tests(tree: ast.AST):
    """``x.name == "..."`` / ``!=`` comparisons with a string literal."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) \
                and node.left.attr == "name" and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops) \
                and any(isinstance(c, ast.Constant) and c.value in ("cupy", "simulator") for c in node.comparators):
            yield node.lineno


def test_only_the_backends_test_a_backend_by_name():
    found = []
    for path in PACKAGE.rglob("*.py"):
        if "backends" in path.relative_to(PACKAGE).parts:
            continue
        found += [f"{path.relative_to(ROOT)}:{line}" for line in _name_tests(ast.parse(path.read_text()))]
    assert found == [], f"use the Backend interface instead of its name: {found}"


def test_the_name_check_finds_a_name_test():
    assert list(_name_tests(ast.parse('if backend.name == "cupy": pass'))) == [1]



def _uncommented_imports_in_functions(source: str):
    """Line numbers of workbench imports inside functions with no comment
    (on the line, or the line above) saying why they are not at module level."""
    lines = source.splitlines()
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            ours = (isinstance(node, ast.ImportFrom)
                    and (node.level > 0 or (node.module or "").startswith("workbench"))) \
                or (isinstance(node, ast.Import) and any(a.name.startswith("workbench") for a in node.names))
            if ours and not any("#" in lines[i] for i in range(node.lineno - 2, node.end_lineno)
                                if i >= 0):
                yield node.lineno


def test_workbench_imports_inside_functions_say_why():
    found = set()
    for path in PACKAGE.rglob("*.py"):
        if "backends" in path.relative_to(PACKAGE).parts:  # (the backends' reorganisation covers them)
            continue
        found |= {f"{path.relative_to(ROOT)}:{line}"
                  for line in _uncommented_imports_in_functions(path.read_text())}
    assert found == set(), f"import at module level, or say why not in a comment: {sorted(found)}"


def test_the_import_check_finds_an_uncommented_import():
    source = ("def f():\n    from .core import kernel\n\n"
              "def g():\n    from .core import kernel  # lazy: a reason\n")
    assert list(_uncommented_imports_in_functions(source)) == [2]


# -- no import cycles between files ------------------------------------------------------------

def _import_graph():
    """Every import between workbench modules: at module level, inside functions and
    under ``TYPE_CHECKING`` (a cycle there is still two files that need each other)."""
    return grimp.build_graph("workbench", cache_dir=None)


def _imports(graph) -> dict:
    return {m: sorted(i for i in graph.find_modules_directly_imported_by(m)
                      if i.startswith("workbench")) for m in graph.modules}


def _cycles(graph) -> list[set]:
    """Each set of workbench modules that import one another, directly or through others."""
    imports = _imports(graph)
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    components = []
    for root in sorted(imports):  # Tarjan's strongly connected components, without recursion
        if root in index:
            continue
        work = [(root, iter(imports[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(imports[nxt])))
                    break
                if nxt in on_stack:
                    low[module] = min(low[module], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    component = set()
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.add(m)
                        if m == module:
                            break
                    if len(component) > 1:
                        components.append(component)
    return components


def _loop(imports: dict, component: set, start: str) -> list[str]:
    """The shortest loop from ``start`` back to it inside the component (breadth first)."""
    paths = {start: [start]}
    queue = [start]
    while queue:
        module = queue.pop(0)
        for nxt in imports[module]:
            if nxt == start:
                return paths[module] + [start]
            if nxt in component and nxt not in paths:
                paths[nxt] = paths[module] + [nxt]
                queue.append(nxt)
    raise AssertionError(f"no loop through {start}")


def _shown(graph, component: set, start: str | None = None) -> str:
    """The shortest loop in the component (through ``start`` if given), ``a:LINE ->
    b:LINE -> ... -> a`` (each import with the line that makes it), and how many
    more modules the component holds."""
    imports = _imports(graph)
    loop = min((_loop(imports, component, m) for m in ([start] if start else sorted(component))),
               key=len)
    steps = []
    for importer, imported in zip(loop, loop[1:]):
        lines = sorted(d["line_number"] for d in graph.get_import_details(importer=importer,
                                                                          imported=imported))
        steps.append(f"{importer}:{','.join(map(str, lines))}")
    more = f" (and {len(component) - len(loop) + 1} more modules in the circle)" \
        if len(component) > len(loop) - 1 else ""
    return " -> ".join(steps + [loop[-1]]) + more


@pytest.fixture(scope="module")
def import_graph():
    return _import_graph()


def test_no_import_cycles_between_files(import_graph):
    cycles = list(_cycles(import_graph))
    assert cycles == [], "import cycles between files:\n" + "\n".join(
        _shown(import_graph, c) for c in cycles)


def test_the_cycle_check_sees_in_function_imports_and_finds_a_cycle():
    graph = _import_graph()
    # load_ipython_extension imports the magics inside the function
    assert graph.direct_import_exists(importer="workbench", imported="workbench.ipython")
    # as if session.py imported the kernel module, which imports session.py
    assert graph.direct_import_exists(importer="workbench.core.kernel",
                                      imported="workbench.runtime.session")
    graph.add_import(importer="workbench.runtime.session", imported="workbench.core.kernel",
                     line_number=1, line_contents="from ..core import kernel")
    (cycle,) = [c for c in _cycles(graph) if {"workbench.runtime.session", "workbench.core.kernel"} <= c]
    assert _shown(graph, cycle, start="workbench.runtime.session").startswith(
        "workbench.runtime.session:1 -> workbench.core.kernel:")
