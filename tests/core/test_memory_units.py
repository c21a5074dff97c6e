"""Pure helpers of workbench.memory: sizes, source lines, no GUI imports."""
from __future__ import annotations

import subprocess
import sys

import pytest

from workbench.memory import sources
from workbench.present.units import format_bytes, parse_size


@pytest.mark.parametrize("text, expected", [
    (4096, 4096), ("4096", 4096), ("512MiB", 512 << 20), ("2 GB", 2 * 10**9),
    ("1.5GiB", 3 << 29), ("64k", 64_000), ("1e6", 10**6)])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


def test_parse_size_takes_numpy_integers():
    import numpy as np
    assert parse_size(np.int64(4096)) == 4096 and type(parse_size(np.int64(1))) is int


@pytest.mark.parametrize("bad", ["lots", "12 parsecs", -1, "", True, "2.5", 2.5, "0.5B"])
def test_parse_size_rejects_with_a_hint(bad):
    with pytest.raises(ValueError, match="e.g. 4096, '512MiB'"):
        parse_size(bad)


def test_format_bytes():
    assert format_bytes(0) == "0 B"
    assert format_bytes(1023) == "1023 B"
    assert format_bytes(1536) == "1.50 KiB"
    assert format_bytes(3 << 30) == "3.00 GiB"
    assert format_bytes(-2048) == "-2.00 KiB"
    assert format_bytes(None) == "N/A"
    assert format_bytes(float("nan")) == "N/A"


def _allocating_line():
    return sources.capture(skip=1)


def test_capture_keeps_user_lines_and_skips_the_library():
    frames = _allocating_line()
    sites = sources.resolve(frames)
    assert sites[0].function == "_allocating_line"
    assert sites[0].text == "return sources.capture(skip=1)"
    assert sites[1].function == "test_capture_keeps_user_lines_and_skips_the_library"
    assert sites[1].location.startswith("test_memory_units.py:")
    assert all("_pytest" not in s.filename and "pluggy" not in s.filename for s in sites)


def test_frame_kinds():
    import numpy
    import workbench
    assert sources.frame_kind(workbench.__file__) == sources.LIBRARY
    assert sources.frame_kind(numpy.__file__) == sources.LIBRARY
    assert sources.frame_kind(pytest.__file__) == sources.DRIVER
    assert sources.frame_kind(__file__) == sources.USER
    assert sources.frame_kind("<ipython-input-3-0123abcd>") == sources.USER
    assert sources.cell_of_file("<ipython-input-3-0123abcd>") == 3


@pytest.mark.parametrize("path", [
    "/opt/venv/lib/python3.11/site-packages/pandas/core/frame.py",
    "/usr/lib/python3/dist-packages/scipy/linalg/_basic.py",
    "/home/u/.local/lib/python3.11/site-packages/torch/functional.py",
    "/opt/venv/lib/python3.11/site-packages/some_module.py",
])
def test_every_installed_package_is_library_code(path):
    assert sources.frame_kind(path) == sources.LIBRARY


def test_installed_driver_packages_stop_the_walk_and_notebook_cells_stay_user_code():
    assert sources.frame_kind("/usr/lib/python3/dist-packages/IPython/core/interactiveshell.py") \
        == sources.DRIVER
    cell_file = "/opt/venv/lib/python3.11/site-packages/nbrunner/cells/cell-7.py"
    sources.set_cell_resolver(lambda name: 7 if name == cell_file else None)
    try:
        assert sources.frame_kind(cell_file) == sources.USER
    finally:
        sources.set_cell_resolver(None)


def test_memory_core_imports_no_gui():
    code = ("import sys, workbench as wb\n"
            "wb.backend('simulator')\n"
            "wb.memory.tracking(True)\n"
            "a = wb.allocate((1000,), 'f4')\n"
            "s = wb.memory.stats(); wb.memory.live(); wb.memory.leaks(); wb.memory.timeline()\n"
            "assert s.in_use >= 4000, s\n"
            "bad = [m for m in ('IPython', 'ipywidgets', 'matplotlib') if m in sys.modules]\n"
            "assert not bad, bad\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
