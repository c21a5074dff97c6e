"""What the panels show where no widget can (untrusted or exported
notebooks, GitHub, nbviewer), and the panels' own wording and units."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.benchmarking import history

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


@pytest.fixture
def saxpy(backend):
    return wb.compile(SAXPY, name="saxpy")["saxpy"]


def _bundle(widget) -> dict:
    return widget._repr_mimebundle_()


def test_every_panel_carries_a_readable_snapshot(saxpy):
    history.clear()
    panels = {"device": wb.DevicePanel(start=False), "memory": wb.MemoryPanel(auto_refresh=False),
              "kernel": wb.KernelPanel(saxpy), "benchmark": wb.BenchmarkPanel(),
              "dashboard": wb.dashboard(kernel=saxpy)}
    try:
        for name, panel in panels.items():
            bundle = _bundle(panel)
            assert WIDGET_VIEW in bundle, name             # the live view where it can draw
            plain, snapshot = bundle["text/plain"], bundle["text/html"]
            assert "children=(" not in plain and len(plain) < 200, name
            assert "wb-snapshot" in snapshot and "<script" not in snapshot, name
            assert "None" not in snapshot and "<img" not in snapshot, name
        assert "Worker threads" in _bundle(panels["device"])["text/html"] or \
            not wb.backend().simulated
        assert "Occupancy" in _bundle(panels["kernel"])["text/html"] or \
            "occupancy" in _bundle(panels["kernel"])["text/html"]
        board = _bundle(panels["dashboard"])["text/html"]
        for tab in ("Device", "Memory", "Kernel", "Benchmarks"):
            assert f"<summary>{tab}</summary>" in board
    finally:
        for panel in panels.values():
            panel.close()


def test_kernel_chooser_names_a_kernel_once(saxpy):
    board = wb.dashboard(kernel=saxpy)
    try:
        options = board.kernel_chooser._choice.options
        assert "saxpy" in options and not any(o.startswith("saxpy: saxpy") for o in options)
    finally:
        board.close()


def test_benchmark_panel_shows_no_image_before_a_sweep_and_says_when_one_failed(backend):
    history.clear()
    panel = wb.BenchmarkPanel(min_interval=0)
    try:
        assert panel._image not in panel.children          # no broken-image icon
        assert "no sweep yet" in panel._title.value

        def failing(size):
            raise RuntimeError("the kernel is broken")
        with pytest.raises(RuntimeError):
            wb.sweep(failing, sizes=[1, 2, 3, 4], progress=False)
        assert panel.error.startswith("RuntimeError: the kernel is broken")
        assert "stopped after 0 of 4 points" in panel._title.value
        assert "finished" not in panel._title.value
        assert panel._image not in panel.children

        x = backend.to_device(np.ones(1024, np.float32))
        wb.sweep(lambda size: x[:size] * 2, sizes=[256, 1024], bytes=lambda size: 8 * size,
                 ceilings=False, repeat=2, warmup_time=0, progress=False)
        table = panel._table.value
        assert panel._image in panel.children
        assert "median (" in table and "GB/s" in table                     # units
        assert "None" not in table and "nan" not in table.lower()
        assert "<th style='text-align:right'>GB/s</th>" in table          # headers over their numbers
    finally:
        panel.close()


def test_sweep_says_how_bytes_is_called(backend):
    with pytest.raises(TypeError, match=r"bytes= is called with the point's parameters as "
                                        r"keywords, bytes\(size=\.\.\.\); write it as lambda size"):
        wb.sweep(lambda size: None, sizes=[1, 2], bytes=lambda s: 4 * s, progress=False)


def test_memory_panel_wording(backend):
    panel = wb.MemoryPanel(auto_refresh=False)
    try:
        title = panel._title.value
        assert "simulator simulated" not in title and "simulated device" not in title
        bar = panel._bar.value
        if (panel.cached or 0) < (1 << 20):
            assert "fragmentation" not in bar       # a figure of a few bytes says nothing
        assert "nothing recorded yet" not in panel._cells.value + panel._live.value
    finally:
        panel.close()


def test_status_bar_label_is_in_gib(backend):
    status = wb.frontend_status()
    assert status["label"].endswith(" GiB") and "GB" not in status["label"].replace("GiB", "")
    total = float(status["label"].split("/")[-1].split()[0])
    assert total == pytest.approx(status["total_bytes"] / 2 ** 30, abs=0.05)
