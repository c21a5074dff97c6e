"""The package's metadata and layering promises."""
import os
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _conda_names():
    text = (ROOT / "environment.yml").read_text()
    deps = text[text.index("dependencies:"):]
    names = set()
    for line in deps.splitlines():
        m = re.match(r"\s*-\s+([A-Za-z][\w.\-]*)\s*([<>=!~].*)?$", line)
        if m and m.group(1) not in ("pip", "python", "-e"):
            names.add(m.group(1).lower())
    return names


# conda-forge names for PyPI packages that differ
_CONDA_NAME = {"cupy-cuda13x": "cupy", "cupy-cuda12x": "cupy"}


def test_distribution_and_extras():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["name"] == "cuda-workbench"
    assert meta["requires-python"] == ">=3.10"
    extras = meta["optional-dependencies"]
    assert [_name(r) for r in extras["cuda12"]] == ["cupy-cuda12x"]
    assert [_name(r) for r in extras["cuda13"]] == ["cupy-cuda13x"]
    assert "pytest" in {_name(r) for r in extras["test"]}


def test_environment_yml_lists_the_same_dependencies():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in meta["dependencies"]}
    for extra in ("test", "cuda13"):
        wanted |= {_name(r) for r in meta["optional-dependencies"][extra]}
    wanted = {_CONDA_NAME.get(n, n) for n in wanted}
    listed = _conda_names()
    assert wanted - listed == set(), f"missing from environment.yml: {sorted(wanted - listed)}"
    assert listed - wanted == set(), f"in environment.yml but not pyproject.toml: {sorted(listed - wanted)}"


@pytest.mark.parametrize("module", ["workbench", "workbench.core.compiler", "workbench.core.kernel",
                                    "workbench.core.arrays", "workbench.compat", "workbench.backends", "workbench.runtime.timing",
                                    "workbench.memory.tracker", "workbench.memory.oom",
                                    "workbench.benchmarking.timer", "workbench.benchmarking.sweep",
                                    "workbench.hardware.properties", "workbench.hardware.occupancy",
                                    "workbench.backends.simulator.backend"])
def test_core_imports_no_notebook_libraries(module):
    code = (f"import sys, {module}\n"
            "import workbench.runtime.session as s; s.backend()\n"
            "bad = [m for m in ('IPython', 'ipywidgets', 'matplotlib') if m in sys.modules]\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"{module} imported {out.stdout.strip()}"


def test_import_does_no_work():
    code = ("import sys, workbench\n"
            "import workbench.runtime.session as s\n"
            "print(s.active_backend_or_none() is None, 'cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "False"], out.stderr


def test_licence_authors_and_urls():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "BSD-3-Clause" and meta["license-files"] == ["LICENSE"]
    licence = (ROOT / "LICENSE").read_text()
    assert licence.startswith("BSD 3-Clause License") and "the cuda-workbench authors" in licence
    assert meta["authors"] == [{"name": "the cuda-workbench authors"}]
    assert "example.invalid" not in (ROOT / "pyproject.toml").read_text()


def test_the_lab_extra_gives_a_notebook_environment():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {_name(r) for r in extras["lab"]} == {"jupyterlab", "ipykernel"}


def test_the_wheel_ships_every_tutorial_and_document():
    # one force-include entry per file (a folder would ship whatever lies in it)
    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
        "targets"]["wheel"]["force-include"]
    wanted = {f"notebooks/{p.name}": f"workbench/shipped/notebooks/{p.name}"
              for p in (ROOT / "notebooks").glob("*.ipynb")}
    wanted |= {f"docs/{p.name}": f"workbench/shipped/docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert shipped == wanted


def test_tutorials_copies_the_notebooks_and_documents_and_keeps_changes(tmp_path):
    import workbench as wb
    target = tmp_path / "mine"
    first = wb.tutorials(target)
    names = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert sorted(p.name for p in target.glob("*.ipynb")) == names
    assert sorted(p.name for p in (target / "docs").glob("*.md")) == \
        sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert len(first.copied) == len(names) + len(list((ROOT / "docs").glob("*.md")))
    assert (target / names[0]).read_bytes() == (ROOT / "notebooks" / names[0]).read_bytes()
    assert f"jupyter lab {target}" in repr(first) and "<li>" in first._repr_html_()
    edited = target / names[0]
    edited.write_text("my own notes")
    again = wb.tutorials(target)
    assert again.copied == [] and edited in again.kept and edited.read_text() == "my own notes"
    assert again.to_pandas()["copied"].sum() == 0
    assert wb.tutorials(target, overwrite=True).copied and edited.read_text() != "my own notes"
    (tmp_path / "file").write_text("")
    with pytest.raises(wb.WorkbenchError, match="is a file, not a folder"):
        wb.tutorials(tmp_path / "file")


def test_the_command_line_copies_the_tutorials(tmp_path):
    out = subprocess.run([sys.executable, "-m", "workbench", "tutorials", str(tmp_path / "t")],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert "files copied to" in out.stdout and (tmp_path / "t" / "01-first-kernel.ipynb").exists()
