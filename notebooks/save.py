"""Re-run the shipped notebooks on the simulator and save them as a new user
should first see them.

    python notebooks/save.py [NOTEBOOK ...]      (default: every notebook here)

Each notebook is executed (nbclient, ``WORKBENCH_BACKEND=simulator``), then
tidied: a widget's output keeps its static ``text/html`` snapshot and its
one-line ``text/plain`` but loses the widget view, and the notebook's saved
widget state is dropped. A copied notebook is untrusted and has no live
kernel, so the view could only show "Loading widget..." or the raw repr;
the snapshot reads the same in JupyterLab, exported HTML, GitHub and
nbviewer, and the files stay small. ``tests/notebook/test_notebooks_saved.py``
checks the result.
"""
from __future__ import annotations

import os
import pathlib
import sys

import nbformat
from nbclient import NotebookClient

HERE = pathlib.Path(__file__).resolve().parent
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def tidy(nb) -> None:
    """Drop widget views and saved widget state, in place."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data")
            if data and WIDGET_VIEW in data:
                del data[WIDGET_VIEW]
                output.get("metadata", {}).pop(WIDGET_VIEW, None)


def save(path: pathlib.Path) -> None:
    nb = nbformat.read(path, as_version=4)
    os.environ["WORKBENCH_BACKEND"] = "simulator"
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent),
                                                             os.environ.get("PYTHONPATH")]))
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(HERE)}}).execute()
    tidy(nb)
    nbformat.write(nb, path)
    print(f"{path.name}: {path.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    names = sys.argv[1:] or sorted(p.name for p in HERE.glob("[0-9][0-9]-*.ipynb"))
    for name in names:
        save(HERE / pathlib.Path(name).name)
