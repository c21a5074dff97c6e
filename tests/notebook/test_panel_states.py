"""Panels say what their figures are: "live (HH:MM:SS)" while they refresh,
"stopped at HH:MM:SS" once stopped (with the rates of that moment, not "—"),
"snapshot of HH:MM:SS" in the HTML a saved or exported notebook shows; the
dashboard's kernel tab opens on the kernel launched last."""
from __future__ import annotations

import re

import numpy as np

import workbench as wb

CLOCK = r"\d\d:\d\d:\d\d"
TWO = r"""
extern "C" __global__ void first_k(float* x) { x[0] = 1.0f; }
extern "C" __global__ void second_k(float* x) { x[1] = 2.0f; }
"""


def text(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


def test_a_stopped_device_panel_says_when_and_shows_its_rates(simulator):
    panel = wb.DevicePanel(interval=0.2)
    try:
        assert re.search(rf"live \({CLOCK}\)", text(panel._live.value))
        panel.stop()
        shown = text(panel._live.value)
        assert re.search(rf"stopped at {CLOCK}", shown) and "live (" not in shown
        assert "—" not in shown  # busy and launches per second had two samples
        charts = text(panel._charts.value)
        assert "charts after" not in charts  # no promise of charts that will never come
    finally:
        panel.close()


def test_the_dashboard_stopped_by_the_next_cell_says_stopped(simulator):
    board = wb.dashboard(interval=1.0)
    try:
        board.stop()
        assert re.search(rf"stopped at {CLOCK}", text(board.device_panel._live.value))
    finally:
        board.close()


def test_snapshots_are_dated_and_never_say_live(simulator):
    board = wb.dashboard(interval=1.0)
    try:
        snap = text(board.snapshot())
    finally:
        board.close()
    assert re.search(rf"snapshot of {CLOCK}", snap)
    assert not re.search(rf"live \({CLOCK}\)", snap), snap
    for panel in (wb.MemoryPanel(auto_refresh=False), wb.DevicePanel(start=False)):
        try:
            snap = text(panel.snapshot())
            assert re.search(rf"snapshot of {CLOCK}", snap) and "live (" not in snap
        finally:
            panel.close()


def test_the_kernel_tab_opens_on_the_kernel_launched_last(simulator):
    module = wb.compile(TWO, name="panel_states_two")
    x = wb.to_device(np.zeros(2, np.float32))
    module["second_k"](x, grid=1, block=1)
    module["first_k"](x, grid=1, block=1)   # the last launch
    np.testing.assert_array_equal(wb.to_host(x), [1.0, 2.0])
    board = wb.dashboard()
    try:
        chooser = board.kernel_chooser
        assert chooser._choice.value == "first_k (panel_states_two)"
        assert chooser.panel is not None and "first_k" in chooser._snapshot_title()
    finally:
        board.close()


def test_a_stopped_ring_panel_says_when(simulator):
    source = ("struct Request { int a; }; struct Response { int b; };\n"
              "__device__ void handle(const Request& i, Response& o) { o.b = 2 * i.a; }")
    with wb.ring(source, request=np.dtype([("a", "i4")]), response=np.dtype([("b", "i4")]),
                 capacity=32, threads=64) as r:
        panel = wb.RingPanel(r, interval=0.05)
        try:
            assert r.call((21,))["b"] == 42
            assert re.search(rf"live \({CLOCK}\)", text(panel._body.value))
            panel.stop()
            shown = text(panel._body.value)
            assert re.search(rf"stopped at {CLOCK}", shown) and "live (" not in shown
            assert re.search(r"messages answered\s+1\b", shown)  # the figures of that moment
            assert re.search(rf"snapshot of {CLOCK}", text(panel.snapshot()))
        finally:
            panel.close()


def test_the_status_bar_gives_no_memory_figure_when_in_use_is_not_known():
    from workbench.ipython.status import memory_label
    gib = 1 << 30
    assert memory_label(None, None, 80 * gib) == ""       # not "in use 0 / 80 GiB"
    assert memory_label(None, 4 * gib, 80 * gib) == ""
    assert memory_label(3 * gib, 0, 80 * gib) == "in use 3 / 80 GiB"
    assert memory_label(3 * gib, 59 * gib, None) == ""
