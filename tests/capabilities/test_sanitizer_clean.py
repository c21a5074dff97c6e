"""No false positives: every kernel of the kernel library, and every kernel the
shipped notebooks launch, is clean under all four tools on the simulator."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from workbench.backends.sanitizing import TOOLS
from workbench.kernels import library
from workbench.kernels.baselines import device_args

SPECS = library.specs()
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
#: Launches of one kernel checked (under every tool) per notebook.
CHECKED_LAUNCHES = 2


@pytest.mark.slow
@pytest.mark.parametrize("tool", TOOLS)
def test_kernel_library_is_clean(simulator, tool):
    found, launched = [], 0
    for name, spec in SPECS.items():
        for dtype in spec.dtypes:
            try:
                args, _ = spec.example(257, dtype, np.random.default_rng(0))
            except ValueError:
                continue
            with simulator.sanitize_launches(tool) as launches:
                spec.function(*device_args(args))
            launched += len(launches)
            found += [(name, dtype, f) for launch in launches for f in launch.findings]
    assert launched >= len(SPECS)
    assert not found, found[:3]


#: Notebooks whose kernels are wrong on purpose (the sanitizer's own finds and fixes a race).
PLANTED = ("12-sanitizer",)


def _notebooks_with_kernels() -> list[Path]:
    out = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        if path.stem in PLANTED:
            continue
        cells = json.loads(path.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        if any(c.lstrip().startswith("%%cuda") or "wb.compile(" in c for c in code):
            out.append(path)
    return out


#: Run first in the notebook's kernel: every kernel compiled from then on has
#: its first launches checked with every tool (on copies), then made.
_CHECKER = """
import workbench as _wb
from workbench.backends.sanitizing import TOOLS as _TOOLS
from workbench.runtime.session import session as _session


class _CheckEveryKernel:
    def __init__(self, launches):
        self.launches = launches
        self.findings = []
        self.checked = {}

    def hook(self, kernel, args, options, launch):
        if (self.checked.get(kernel.name, 0) < self.launches and not options["cooperative"]
                and options["stream"] is None and _session().timing_log.capture is None):
            self.checked[kernel.name] = self.checked.get(kernel.name, 0) + 1
            kernel.set_launch_hook(None)  # (wb.sanitize launches it too)
            try:
                for tool in _TOOLS:
                    report = _wb.sanitize(kernel, *args, grid=options["grid"],
                                          block=options["block"],
                                          shared_mem=options["shared_mem"], n=options["n"],
                                          tool=tool)
                    self.findings += [f.headline() for f in report.findings]
            finally:
                kernel.set_launch_hook(self.hook)
        return launch()

    def watch(self, *_):
        for m in list(_wb.modules.values()):
            kernels = list(m.kernels.values())
            for template in m.templates.values():
                kernels += list(template.instances.values())
            for k in kernels:
                if k._hook is None and k.backend.simulated:
                    k.set_launch_hook(self.hook)


_sanitizer_check = _CheckEveryKernel({launches})
get_ipython().events.register("post_run_cell", _sanitizer_check.watch)
"""
_REPORT = """
import json as _json
print("SANITIZER:" + _json.dumps({"findings": _sanitizer_check.findings,
                                 "checked": _sanitizer_check.checked}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("notebook", _notebooks_with_kernels(), ids=lambda p: p.stem)
def test_notebook_kernels_are_clean(notebook, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    root = str(NOTEBOOKS.parent)
    monkeypatch.setenv("WORKBENCH_BACKEND", "simulator")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p))
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(_CHECKER.replace("{launches}", str(CHECKED_LAUNCHES))))
    nb.cells.append(nbformat.v4.new_code_cell(_REPORT))
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    found = json.loads(text.split("SANITIZER:", 1)[1])
    assert not found["findings"], found
