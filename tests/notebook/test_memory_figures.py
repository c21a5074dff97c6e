"""One truth about device memory: the status bar (``frontend_status()``), the
memory panel, the device panel and ``wb.memory.stats()`` give the same
figures in the same words ("in use", "cached", "reserved"), before and after
``del big`` and after emptying the cache."""
from __future__ import annotations

import re

import numpy as np
import pytest

import workbench as wb

GIB = 2 ** 30


def figures():
    """What each of the four says now: {who: (in use, cached)} in bytes."""
    stats = wb.memory.stats()
    status = wb.frontend_status()
    panel = wb.MemoryPanel(auto_refresh=False)
    device = wb.DevicePanel(start=False)
    try:
        device.refresh()
        row = device.activity  # (the simulator's own figures; a GPU's are NVML's)
        seen = {"stats": (stats.in_use, stats.cached),
                "status bar": (status["in_use_bytes"], status["cached_bytes"]),
                "memory panel": (panel.in_use, panel.cached)}
        if row:
            seen["device panel"] = (row.get("in_use"), row.get("cached"))
        return seen, status["label"], panel
    finally:
        device.close()


def label_gib(label: str, word: str) -> float:
    """The GiB the status bar's label gives after ``word`` (0 when it leaves it out)."""
    m = re.search(rf"{word} ([0-9.]+)", label)
    return float(m.group(1)) if m else 0.0


def test_status_bar_panels_and_stats_agree_after_del_and_empty_cache(backend, tracking):
    wb.memory.empty_cache()
    # what stays cached now is in blocks split by arrays earlier tests keep alive
    stays = wb.memory.stats().cached
    small = wb.to_device(np.random.default_rng(0).random(1 << 20, np.float32))  # 4 MiB
    big = wb.allocate(GIB, np.uint8)
    seen, label, panel = figures()
    assert len(set(seen.values())) == 1, seen
    in_use, cached = seen["stats"]
    assert in_use >= GIB + small.nbytes
    assert label_gib(label, "in use") == pytest.approx(in_use / GIB, abs=0.05), label
    assert label.endswith(" GiB"), label
    if backend.simulated:
        assert "device panel" in seen
        assert label.startswith("simulator · in use "), label
    total = f"{wb.memory.stats().device_total / GIB:.1f}".removesuffix(".0")
    assert label.endswith(f" / {total} GiB"), label
    panel.close()

    del big  # the pool keeps the block: in use drops, cached grows, nothing "lost"
    seen, label, panel = figures()
    assert len(set(seen.values())) == 1, seen
    after_in_use, after_cached = seen["stats"]
    assert after_in_use == in_use - GIB
    assert after_cached >= GIB
    assert label_gib(label, "in use") == pytest.approx(after_in_use / GIB, abs=0.05)
    assert label_gib(label, "cached") == pytest.approx(after_cached / GIB, abs=0.05)
    assert "in use" in panel._bar.value and "cached" in panel._bar.value

    panel.empty_cache()  # the panel's "Empty cache" button
    seen, label, panel2 = figures()
    assert len(set(seen.values())) == 1, seen
    assert seen["stats"][1] < stays + 50 * 2 ** 20  # the cache is given back
    assert (panel.in_use, panel.cached) == seen["stats"]  # the panel redrew with it
    if stays < GIB // 10:
        assert "cached" not in label, label  # nothing worth a tenth of a GiB is cached
    else:  # (a block split by an array an earlier test keeps: the pool cannot return it)
        assert label_gib(label, "cached") == pytest.approx(seen["stats"][1] / GIB, abs=0.05), label
    panel.close()
    panel2.close()
    np.testing.assert_array_equal(wb.to_host(small), np.random.default_rng(0).random(1 << 20, np.float32))


def test_the_device_panel_uses_the_memory_words(simulator):
    panel = wb.DevicePanel(start=False)
    try:
        panel.refresh()
        text = panel._live.value
    finally:
        panel.close()
    assert ">In use<" in text and ">Cached<" in text
    assert "Arena" not in text and "arena" not in text
