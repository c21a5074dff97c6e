"""The layers of docs/architecture.md hold in the code.

import-linter reads every import of the package (at module level and inside
functions) and checks the contracts in pyproject.toml: a module imports only
from its own layer and the layers below it, and only the backends import CuPy.
The checks here also keep the document and the contract saying the same, and
forbid tests of a backend's name outside the backends.
"""
import ast
import pathlib
import shutil
import subprocess
import sys
import tomllib

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
    target.write_text(target.read_text() + "\n\ndef _upward():\n    from ..core import kernel\n")
    result = _lint(cwd=copy)
    assert result.returncode != 0
    assert "workbench.runtime is not allowed to import workbench.core" in result.stdout


def test_the_architecture_document_lists_the_layers_of_the_contract():
    text = (ROOT / "docs" / "architecture.md").read_text().split("```")[1]  # the drawing
    order = []
    for layer in _contract("layers")["layers"]:
        for module in layer.split(":"):
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
