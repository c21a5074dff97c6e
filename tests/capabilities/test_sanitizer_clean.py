"""No false positives: every kernel of the kernel library, and every kernel the
shipped notebooks launch, is clean under all four tools on the simulator."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.backends.sanitizing import TOOLS
from workbench.kernels import library
from workbench.kernels.baselines import device_args
from workbench.runtime.session import session

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


def _notebooks_with_kernels() -> list[Path]:
    out = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        if any(c.lstrip().startswith("%%cuda") or "wb.compile(" in c for c in code):
            out.append(path)
    return out


class _CheckEveryKernel:
    """A launch hook for every kernel compiled while a notebook runs: its
    first launches are checked with every tool (on copies), then made."""

    def __init__(self):
        self.findings = []
        self.checked: dict = {}

    def hook(self, kernel, args, options, launch):
        if (self.checked.get(kernel, 0) < CHECKED_LAUNCHES and not options["cooperative"]
                and options["stream"] is None and session().timing_log.capture is None):
            self.checked[kernel] = self.checked.get(kernel, 0) + 1
            kernel.set_launch_hook(None)  # (wb.sanitize launches it too)
            try:
                for tool in TOOLS:
                    report = wb.sanitize(kernel, *args, grid=options["grid"],
                                         block=options["block"],
                                         shared_mem=options["shared_mem"], n=options["n"],
                                         tool=tool)
                    self.findings += report.findings
            finally:
                kernel.set_launch_hook(self.hook)
        return launch()

    def watch(self) -> None:
        for m in list(wb.modules.values()):
            kernels = list(m.kernels.values())
            for template in m.templates.values():
                kernels += list(template.instances.values())
            for k in kernels:
                if k._hook is None and k.backend.simulated:
                    k.set_launch_hook(self.hook)


@pytest.mark.slow
@pytest.mark.parametrize("notebook", _notebooks_with_kernels(), ids=lambda p: p.stem)
def test_notebook_kernels_are_clean(shell, simulator, notebook, monkeypatch):
    monkeypatch.chdir(notebook.parent)
    check = _CheckEveryKernel()
    cells = json.loads(notebook.read_text())["cells"]
    ran = 0
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        tags = cell.get("metadata", {}).get("tags", [])
        source = "".join(cell["source"])
        result = shell.run_cell(source)
        if not result.success and "raises-exception" not in tags:
            pytest.fail(f"{notebook.name}: a cell failed: {result.error_in_exec!r}\n{source}")
        ran += 1
        check.watch()
    assert ran
    assert not check.findings, [f.headline() for f in check.findings]
