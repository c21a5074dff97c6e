"""The shipped notebooks as a new user first sees them: opened before
running (untrusted, no widget state), on GitHub or nbviewer, or exported to
HTML. Every stored output must read as text or HTML: no widget-tree repr
(``Dashboard(children=(DevicePanel(children=(...``), no widget view that
cannot draw without a kernel, no frozen progress bar; and the files stay
small. ``notebooks/save.py`` re-runs and saves them this way."""
from __future__ import annotations

import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: The most a shipped notebook may weigh: the largest today (05, two
#: roofline and speedup plots and a highlighted source) is ~350 KiB.
MAX_BYTES = 400 * 1024
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: The cell tags nbval reads (``nbval/plugin.py``): a notebook's test directives
#: live there, out of the code a reader sees.
NBVAL_TAGS = {"nbval-ignore-output", "nbval-check-output", "nbval-skip", "raises-exception"}
#: What a stored output must not show: this machine's folders.
LOCAL_PATH = re.compile(r"(/work/|/tmp/|/home/|/Users/|site-packages)")


def _outputs(path):
    nb = json.loads(path.read_text())
    for index, cell in enumerate(nb["cells"]):
        for output in cell.get("outputs", []):
            yield index, output


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_saved_outputs_read_without_a_kernel(path):
    nb = json.loads(path.read_text())
    assert "widgets" not in nb["metadata"], "saved widget state: run notebooks/save.py"
    for index, output in _outputs(path):
        data = output.get("data", {})
        where = f"{path.name} cell {index}"
        assert WIDGET_VIEW not in data, f"{where}: a widget view (run notebooks/save.py)"
        plain = _text(data.get("text/plain", "")) + _text(output.get("text", ""))
        assert "children=(" not in plain, f"{where}: a widget's raw repr: {plain[:80]}"
        assert "%|" not in plain, f"{where}: a frozen progress bar: {plain[:80]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_test_directives_are_cell_tags_not_comments(path):
    nb = json.loads(path.read_text())
    tagged = 0
    for index, cell in enumerate(nb["cells"]):
        where = f"{path.name} cell {index}"
        source = _text(cell["source"])
        assert "NBVAL" not in source, f"{where}: an nbval directive in the text; make it a cell tag"
        assert "nbval" not in source.lower() or cell["cell_type"] == "code", \
            f"{where}: the prose talks about the test harness"
        tags = cell.get("metadata", {}).get("tags", [])
        odd = [t for t in tags if (t.startswith("nbval") or "exception" in t) and t not in NBVAL_TAGS]
        assert not odd, f"{where}: tags nbval does not read: {odd}"
        tagged += bool(set(tags) & NBVAL_TAGS)
    assert tagged, f"{path.name}: no cell tagged (its setup cell's output, at least, depends on the machine)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_saved_outputs_show_no_local_paths(path):
    for index, output in _outputs(path):
        text = (_text(output.get("text", "")) + _text(output.get("data", {}).get("text/plain", ""))
                + "\n".join(output.get("traceback", [])))
        found = LOCAL_PATH.search(text)
        assert not found, f"{path.name} cell {index}: a local path in a stored output: {text[max(0, found.start() - 60):found.end() + 40]!r}"


def test_the_notebooks_found_are_those_the_readme_names():
    # (the checks above run once per notebook found: with none found, none would run)
    named = set(re.findall(r"`(\d\d-[a-z0-9-]+)`", (ROOT / "README.md").read_text()))
    assert named and {p.stem for p in NOTEBOOKS} == named


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_saved_notebooks_stay_small(path):
    size = path.stat().st_size
    assert size <= MAX_BYTES, f"{path.name} is {size / 1024:.0f} KiB (limit {MAX_BYTES // 1024} KiB)"


def test_panels_are_saved_as_their_snapshots():
    """The notebooks that show panels keep a readable snapshot of each."""
    snapshots = {p.name: sum("wb-snapshot" in _text(o.get("data", {}).get("text/html", ""))
                             for _, o in _outputs(p)) for p in NOTEBOOKS}
    assert snapshots.get("02-devices-and-occupancy.ipynb") == 3   # device, kernel, dashboard
    assert snapshots.get("03-memory.ipynb") == 1
    assert snapshots.get("04-benchmarking.ipynb") == 1
