"""The package as a pip user gets it: the wheel built from this checkout,
installed with ``[lab]`` into a new virtual environment outside the source
tree, its tutorials copied out with ``python -m workbench tutorials`` and the
first one run headless to its end on the simulator; the wheel carries the
licence, the JupyterLab extension (enabled after the install), the
tutorials and the documents.

Slow (a build and an install: about a minute with pip's cache warm), and
run in CI all the same: it is the only test of what ``pip install`` gives.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: The lightest tutorial: one kernel, argument checks, a compile error, a template.
TUTORIAL = "01-first-kernel.ipynb"

RUN_NOTEBOOK = r'''
import sys
import nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
# cells tagged raises-exception may fail; any other error stops the run with CellExecutionError
NotebookClient(nb, timeout=600, kernel_name="python3",
               resources={"metadata": {"path": str(__import__("pathlib").Path(path).parent)}}).execute()
errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
          if o.get("output_type") == "error"]
print("ERRORS", len(errors))
print("BACKEND", nb.cells[1].outputs[0]["text"].splitlines()[0])
'''


def _run(command, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{command}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.mark.slow
def test_the_wheel_installs_with_lab_and_runs_a_tutorial(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
               WORKBENCH_BACKEND="simulator")
    env.pop("JUPYTER_PATH", None)

    # the wheel, built as pip builds it (the labextension with npm where it is not built yet)
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, ROOT],
         env=env, timeout=1200)
    wheel = next(dist.glob("cuda_workbench-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: BSD-3-Clause" in meta and "License-File: LICENSE" in meta
    assert "Provides-Extra: lab" in meta and "example.invalid" not in meta
    labext = [n for n in names if "/data/share/jupyter/labextensions/cuda-workbench/" in n]
    assert any(n.endswith("/package.json") for n in labext)
    assert any(n.endswith("/install.json") for n in labext)
    assert any(n.endswith(".js") and "/static/" in n for n in labext)
    for notebook in (ROOT / "notebooks").glob("*.ipynb"):
        assert f"workbench/shipped/notebooks/{notebook.name}" in names
    for document in (ROOT / "docs").glob("*.md"):
        assert f"workbench/shipped/docs/{document.name}" in names

    # a new environment outside the source tree, with JupyterLab and the kernel from [lab]
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], env=env, timeout=300)
    python = venv / "bin" / "python"
    _run([python, "-m", "pip", "install", "-q", f"{wheel}[lab]"], env=env, timeout=1200)
    where = _run([python, "-c", "import workbench; print(workbench.__file__)"], env=env,
                 cwd=tmp_path, timeout=120).stdout.strip()
    assert where.startswith(str(venv)), where
    listed = _run([venv / "bin" / "jupyter", "labextension", "list"], env=env, cwd=tmp_path,
                  timeout=300)
    line = next(ln for ln in (listed.stdout + listed.stderr).splitlines() if "cuda-workbench" in ln)
    assert "enabled" in line and "OK" in line, line

    # the tutorials, copied where the user wants them, and the first one run to its end
    copied = _run([python, "-m", "workbench", "tutorials", tmp_path / "tutorials"], env=env,
                  cwd=tmp_path, timeout=120)
    assert "files copied to" in copied.stdout
    assert (tmp_path / "tutorials" / "docs" / "simulator.md").exists()
    ran = _run([python, "-c", RUN_NOTEBOOK, tmp_path / "tutorials" / TUTORIAL], env=env,
               cwd=tmp_path, timeout=900)
    assert "BACKEND workbench: simulator backend" in ran.stdout
    errors = int(ran.stdout.split("ERRORS", 1)[1].split()[0])
    expected = sum("raises-exception" in c.get("metadata", {}).get("tags", [])
                   for c in json.loads((ROOT / "notebooks" / TUTORIAL).read_text())["cells"])
    assert errors == expected  # exactly the cells that show an error on purpose
