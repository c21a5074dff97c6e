"""Memory tracking on every backend: the tracker agrees with the
pool, leaks are found by cell and line, the panel shows what stats() says,
and out-of-memory errors name what holds the memory."""
from __future__ import annotations

import gc

import re

import numpy as np
import pytest

import workbench as wb
from workbench.memory.tracker import tracker

from helpers import using_backend


def _pool_used(backend) -> int:
    return backend.pool_stats()["used_bytes"]


def test_in_use_equals_pool_count_after_random_allocations_and_frees(backend, tracking):
    rng = np.random.default_rng(4)
    gc.collect()  # arrays of earlier tests must not be collected (and counted) in the middle
    live_before = len(tracking.live)
    alive = []
    for step in range(300):
        if alive and rng.random() < 0.45:
            alive.pop(int(rng.integers(len(alive))))
        else:
            n = int(rng.integers(1, 200_000))
            dtype = rng.choice([np.uint8, np.float32, np.float64])
            alive.append(wb.allocate((n,), dtype))
        if step % 50 == 0:
            assert tracking.in_use == _pool_used(backend), f"step {step}"
    assert tracking.in_use == _pool_used(backend)
    assert wb.memory.stats().in_use == _pool_used(backend)
    assert len(tracking.live) - live_before == len(alive)
    alive.clear()
    assert tracking.in_use == _pool_used(backend)
    assert len(tracking.live) == live_before


def test_stats_tell_cached_from_in_use(backend, tracking):
    wb.memory.empty_cache()   # what stays cached now is split off live blocks
    before = wb.memory.stats()
    # larger than every free piece of a partly used block that earlier tests may leave
    # cached (a block split by a live array stays reserved: the pool cannot return part of
    # one), so it is a block of its own that empty_cache can return
    doubles = max(1 << 23, (before.cached >> 3) + (1 << 17))
    a = wb.to_device(np.random.default_rng(0).random(doubles))
    during = wb.memory.stats()
    assert during.in_use - before.in_use >= a.nbytes
    assert during.peak >= during.in_use
    assert during.reserved == during.in_use + during.cached
    del a
    after = wb.memory.stats()
    assert after.in_use == before.in_use
    assert after.cached >= 1 << 19, "a freed block stays cached in the pool"
    assert after.device_total and after.device_free <= after.device_total
    text = repr(after)
    assert "in use" in text and "cached" in text and "empty_cache" in text
    assert "<table>" in after._repr_html_()
    assert after.to_pandas()["in_use"] == after.in_use
    emptied = wb.memory.empty_cache()
    assert emptied.cached <= before.cached and emptied.in_use == after.in_use
    assert emptied.reserved <= after.reserved - (1 << 19)


def test_tracking_off_records_nothing(backend, tracking):
    wb.memory.tracking(False)
    assert wb.memory.tracking() is False
    count = len(tracking.live)
    kept = wb.allocate((4096,), np.float32)
    assert len(tracking.live) == count
    assert wb.memory.stats().tracking is False and wb.memory.stats().live_allocations is None
    wb.memory.tracking(True)   # back on: what is in use now counts as untracked
    assert tracking.in_use == _pool_used(backend)
    del kept
    assert tracking.in_use == _pool_used(backend)


def test_live_groups_by_allocating_line_largest_first(backend, tracking):
    def make_small():
        return wb.allocate((1000,), np.float32)

    small = [make_small() for _ in range(4)]
    big = wb.allocate((1 << 18,), np.float32)      # the big line
    table = wb.memory.live()
    assert list(table.columns) == ["line", "code", "bytes", "count", "cells", "held_by", "stack", "kind"]
    assert set(table["kind"]) == {"device"}
    assert list(table["bytes"]) == sorted(table["bytes"], reverse=True)
    big_row = table[table["code"].str.contains("the big line", regex=False)].iloc[0]
    assert big_row["bytes"] >= big.nbytes and big_row["count"] == 1
    assert big_row["held_by"] == "big"
    assert big_row["line"].startswith("test_memory.py:")
    small_row = table[table["code"].str.contains("return wb.allocate((1000,)", regex=False)].iloc[0]
    assert small_row["count"] == 4 and "small[...] (4 items)" in small_row["held_by"]
    assert "make_small()" in small_row["line"]
    assert "test_live_groups_by_allocating_line_largest_first()" in small_row["stack"]


def test_leak_in_a_cell_is_reported_with_cell_and_line(shell, backend, tracking):
    # arrays of earlier tests (in the shared shell's namespace) must not be freed,
    # and counted, inside the measured cell
    shell.run_cell("%reset -f", store_history=True)
    shell.run_cell("import numpy as np\nimport workbench as wb", store_history=True)
    gc.collect()
    leaky_cell = shell.execution_count
    result = shell.run_cell(
        "x = np.random.default_rng(1).random(50_000)\n"
        "tmp = wb.to_device(x); del tmp\n"
        "hidden = {'kept': [wb.to_device(x) for _ in range(3)]}\n",
        store_history=True)
    assert result.success, result.error_in_exec
    leaks = wb.memory.leaks(since=leaky_cell)
    assert list(leaks.columns) == ["cell", "line", "code", "bytes", "count", "held_by"]
    assert len(leaks) == 1, leaks
    row = leaks.iloc[0]
    assert row["cell"] == leaky_cell
    assert row["line"] == f"In [{leaky_cell}] line 3"
    assert "hidden = {'kept'" in row["code"]
    assert row["count"] == 3 and row["bytes"] >= 3 * 50_000 * 8
    assert "hidden" in row["held_by"]

    usage = wb.memory.per_cell()
    cell = usage[leaky_cell]
    assert cell.allocations == 4 and cell.frees >= 1
    assert cell.alive == row["bytes"]
    assert cell.allocated - cell.freed == cell.alive
    assert cell.net == cell.alive
    assert f"{leaky_cell}" in repr(usage)
    assert len(wb.memory.leaks(since=leaky_cell + 1)) == 0
    shell.run_cell("del hidden", store_history=True)
    assert len(wb.memory.leaks(since=leaky_cell)) == 0
    assert usage.to_pandas().set_index("cell").loc[leaky_cell, "allocations"] == 4


def test_gpu_mem_magic(shell, backend, tracking):
    shell.run_cell("import workbench as wb\nimport numpy as np", store_history=True)
    shell.run_cell("kept = wb.allocate((10_000,), np.float32)", store_history=True)
    cell = shell.execution_count - 1
    result = shell.run_cell("%gpu_mem", store_history=True)
    assert result.success, result.error_in_exec
    usage = result.result
    assert usage[cell].allocated >= 40_000 and usage[cell].alive >= 40_000
    result = shell.run_cell("%gpu_mem --limit 64MiB", store_history=True)
    assert result.success, result.error_in_exec
    assert wb.memory.stats().limit == 64 << 20
    shell.run_cell("%gpu_mem --limit none", store_history=True)
    assert wb.memory.stats().limit is None
    result = shell.run_cell("%gpu_mem --off", store_history=True)
    assert result.success and wb.memory.tracking() is False
    result = shell.run_cell("%gpu_mem --on --live", store_history=True)
    assert result.success and wb.memory.tracking() is True
    assert not shell.run_cell("%gpu_mem --limit lots").success


def test_timeline_and_plot(shell, backend, tracking):
    shell.run_cell("import workbench as wb\nimport numpy as np", store_history=True)
    shell.run_cell("a = wb.allocate((1 << 16,), np.float64)\nb = wb.allocate((100,), np.uint8)\ndel b",
                   store_history=True)
    cell = shell.execution_count - 1
    events = wb.memory.timeline()
    assert list(events.columns) == ["time", "in_use", "reserved", "event", "size", "cell"]
    assert events["time"].is_monotonic_increasing
    mine = events[events["cell"] == cell]
    assert list(mine["event"]) == [f"cell {cell} start", "alloc", "alloc", "free", f"cell {cell} end"]
    allocs = mine[mine["event"] == "alloc"]
    assert allocs["size"].iloc[0] >= 8 << 16
    steps = mine["in_use"].diff().iloc[1:4].tolist()
    assert steps == [allocs["size"].iloc[0], allocs["size"].iloc[1], -allocs["size"].iloc[1]]
    assert (mine["reserved"] >= mine["in_use"]).all()
    assert events["in_use"].iloc[-1] == tracking.in_use
    fig = wb.memory.plot()
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()][:2] == ["in use", "reserved (in use + cached)"]
    assert f"[{cell}]" in [t.get_text() for t in ax.texts]


def test_panel_state_holds_the_numbers_of_stats(backend, tracking):
    from workbench.widgets.memory_panel import MemoryPanel
    keep = wb.to_device(np.random.default_rng(2).random(1 << 15))
    panel = MemoryPanel(auto_refresh=False)
    try:
        state = panel.get_state()
        stats = wb.memory.stats()
        for name in ("in_use", "cached", "reserved", "peak", "free_blocks", "limit",
                     "device_free", "device_total", "fragmentation"):
            assert state[name] == getattr(stats, name), name
        assert state["backend_name"] == backend.name and state["tracking"] is True
        assert state["top_live"][0]["bytes"] == int(wb.memory.live()["bytes"].iloc[0])
        assert state["per_cell"] == [
            {k: (None if v is None or v != v else int(v)) for k, v in row.items()}
            for row in wb.memory.per_cell().to_pandas().to_dict("records")]
        more = wb.allocate((1 << 20,), np.uint8)
        panel.refresh()
        assert panel.get_state()["in_use"] == wb.memory.stats().in_use >= state["in_use"] + more.nbytes
        assert panel.refreshes == 2
    finally:
        panel.close()


def test_reports_are_plain_rows_and_the_panel_reads_them_without_pandas(backend, tracking,
                                                                        monkeypatch):
    from workbench.memory import reports, snapshot
    from workbench.memory.reports import LIVE_COLUMNS
    from workbench.widgets.memory_panel import MemoryPanel
    rng = np.random.default_rng(8)
    kept = [wb.to_device(rng.random(n)) for n in (1 << 12, 1 << 14, 1 << 13)]
    rows = wb.memory.live_rows()
    frame = wb.memory.live()
    assert list(frame.columns) == LIVE_COLUMNS and all(list(r) == LIVE_COLUMNS for r in rows)
    assert [r["bytes"] for r in rows] == frame["bytes"].tolist()
    assert [r["line"] for r in rows] == frame["line"].tolist()
    assert [r["bytes"] for r in rows] == sorted((r["bytes"] for r in rows), reverse=True)
    usage = wb.memory.per_cell(all_cells=True)
    assert usage.records() == [
        {k: (None if v is None or v != v else int(v)) for k, v in row.items()}
        for row in usage.to_pandas().to_dict("records")]

    def no_pandas():
        raise AssertionError("the memory panel must not build a DataFrame")
    monkeypatch.setattr(reports, "pandas", no_pandas)
    monkeypatch.setattr(snapshot, "pandas", no_pandas)
    panel = MemoryPanel(auto_refresh=False)
    try:
        panel.refresh()
        assert panel.top_live[0]["bytes"] == rows[0]["bytes"]
        assert panel.per_cell == wb.memory.per_cell().records()
    finally:
        panel.close()
    assert kept


def _bar_widths(panel) -> dict:
    """Percent width of each segment of the panel's memory bar, by its label."""
    bar = panel._bar.value.split("</div><div style='font-size")[0]
    return {label: float(width) for label, width in
            re.findall(r"title='(in use|cached|free) [^']*' style='width:([0-9.]+)%", bar)}


def test_panel_bar_never_exceeds_the_device(backend, tracking):
    from workbench.widgets.memory_panel import MemoryPanel
    rng = np.random.default_rng(5)
    kept = [wb.to_device(rng.random(int(n))) for n in rng.integers(1 << 14, 1 << 18, size=6)]
    del kept[::2]        # freed blocks stay cached in the pool
    gc.collect()
    panel = MemoryPanel(auto_refresh=False)
    try:
        stats = wb.memory.stats()
        assert stats.cached > 0
        # the pool's reserved bytes are not free on the device (as cudaMemGetInfo says)
        assert stats.device_free <= stats.device_total - stats.reserved
        widths = _bar_widths(panel)
        assert set(widths) == {"in use", "cached", "free"}
        assert sum(widths.values()) <= 100.0 + 1e-3
        assert widths["in use"] == pytest.approx(100 * stats.in_use / stats.device_total, abs=1e-3)
    finally:
        panel.close()


def test_panel_refreshes_after_each_cell(shell, backend, tracking):
    shell.run_cell("import workbench as wb\nimport numpy as np\npanel = wb.MemoryPanel()",
                   store_history=True)
    panel = shell.user_ns["panel"]
    before = panel.refreshes
    shell.run_cell("grown = wb.allocate((1 << 20,), np.uint8)", store_history=True)
    assert panel.refreshes == before + 1
    assert panel.in_use == wb.memory.stats().in_use
    panel.close()
    shell.run_cell("pass", store_history=True)
    assert panel.refreshes == before + 1


@pytest.fixture
def small_device(backend, tracking):
    """Device memory that an allocation of 64 MiB cannot fit beside an 8 MiB
    array (but could alone): a small virtual
    device on the simulator, a pool limit on the GPU."""
    if backend.simulated:
        with using_backend("simulator", memory_bytes=70 << 20) as small:
            assert tracker().backend is small       # tracking followed the new backend
            yield small
    else:
        wb.memory.empty_cache()
        # what is in use counts against the limit (what stays cached in a block split by a
        # live array is handed out again, not counted)
        wb.memory.set_limit(bytes=wb.memory.stats().in_use + (48 << 20))
        yield backend
        wb.memory.set_limit()


def test_out_of_memory_names_the_holder(small_device):
    rng = np.random.default_rng(3)
    holder_of_memory = wb.to_device(rng.random(1 << 20))   # 8 MiB, the holder
    with pytest.raises(wb.OutOfMemoryError) as caught:
        wb.allocate((64 << 20,), np.uint8)
    message = str(caught.value)
    assert caught.value.requested == 64 << 20
    assert "asked for 64.00 MiB (67,108,864 bytes)" in message
    assert "in use" in message and "cached in the pool" in message
    holders = message.split("Largest holders, by the line that allocated them:\n")[1]
    first = holders.splitlines()[0]                               # the largest holder
    assert "8.00 MiB" in first and "holder_of_memory = wb.to_device" in first
    assert first.rstrip().endswith("held by holder_of_memory")
    assert re.search(r"del [\w, ]*\bholder_of_memory\b", message), message   # what to do
    assert "lower the size" in message
    if not small_device.simulated:   # the GPU's device is made small by a pool limit
        assert "raise the pool limit" in message
    assert holder_of_memory.nbytes == 8 << 20


@pytest.mark.parametrize("value, expected", [
    ("64MiB", (64 << 20, None)), ("4096", (4096, None)), ("1", (1, None)), ("1e6", (10**6, None)),
    ("50%", (None, 0.5)), ("100%", (None, 1.0)), ("0.5", (None, 0.5)), (".25", (None, 0.25)),
    ("none", (None, None)), ("0", (None, None))])
def test_limit_values_are_sizes_or_shares_of_the_device(value, expected):
    from workbench.ipython.memory_magic import _size_or_fraction
    assert _size_or_fraction(value) == expected


@pytest.mark.parametrize("value, reason", [
    ("1.0", "fraction of the device, between 0 and 1"),
    ("2.5", "fraction of the device, between 0 and 1"),
    ("2.5B", "not a whole number of bytes"),
    ("lots%", "'lots' is not a number"),
    ("150%", "at most 100"),
    ("0%", "above 0"),
    ("-5", "cannot be negative"),
    ("-50%", "cannot be negative"),
    ("lots", "cannot read 'lots' as a size"),
])
def test_bad_limit_values_say_why_and_how_to_write_one(value, reason):
    from IPython.core.error import UsageError
    from workbench.ipython.memory_magic import _size_or_fraction
    from workbench.present.units import SIZE_HINT
    with pytest.raises(UsageError) as caught:
        _size_or_fraction(value)
    message = str(caught.value)
    assert reason in message and SIZE_HINT in message and "'50%'" in message


def test_gpu_mem_limit_errors_reach_the_user(shell, backend, tracking, capsys):
    for value in ("2.5", "lots%", "-5"):
        result = shell.run_cell(f"%gpu_mem --limit {value}")
        assert not result.success
        assert "512MiB" in str(result.error_in_exec)
    assert wb.memory.stats().limit is None   # nothing was changed by a refused value


def test_callbacks_from_many_threads_keep_the_counts_exact(backend, tracking):
    import threading
    rng = np.random.default_rng(6)
    sizes = [[int(n) for n in rng.integers(1, 50_000, size=200)] for _ in range(4)]
    gc.collect()  # arrays of earlier tests must not be collected between the two counts read
    before_allocs = tracking.n_allocs
    start = threading.Barrier(len(sizes))
    kept = [[] for _ in sizes]

    def work(mine, out):
        start.wait()
        for i, n in enumerate(mine):
            a = wb.allocate((n,), np.uint8)
            if i % 3:
                out.append(a)     # two in three stay alive, the rest are freed at once

    threads = [threading.Thread(target=work, args=(mine, out)) for mine, out in zip(sizes, kept)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    # every thread is seen (on the GPU: CuPy's allocator is process-wide)
    assert tracking.n_allocs - before_allocs == sum(len(m) for m in sizes)
    assert tracking.in_use == _pool_used(backend)
    kept.clear()
    gc.collect()
    assert tracking.in_use == _pool_used(backend)


def test_a_free_still_being_reported_does_not_take_the_count_of_a_new_allocation(
        private_simulator):
    """Thread B frees a block and, before the tracker hears of it, the main
    thread allocates: the new allocation must not be handed B's address (the
    tracker would then hear of it first and take B's late free for its own)."""
    import threading
    backend = private_simulator(memory_bytes=64 << 20)
    reporting, go_on = threading.Event(), threading.Event()

    def pause_b(ptr, size):   # runs before the tracker's listener, on thread B only
        if threading.current_thread().name == "B":
            reporting.set()
            assert go_on.wait(10)
    remove = backend.add_allocation_listener(lambda ptr, size: None, pause_b)
    wb.memory.tracking(True)
    try:
        held = [wb.allocate((30_000,), np.uint8)]   # the first block of a fresh device
        freeing = threading.Thread(target=held.clear, name="B")
        freeing.start()
        assert reporting.wait(10)                  # B's free is being reported now
        a = wb.allocate((10_000,), np.uint8)       # fits where B's block was
        go_on.set()
        freeing.join(10)
        assert tracker().in_use == _pool_used(backend) == a.nbytes
        assert [r.ptr for r in tracker().allocations()] == [a.__array_interface__["data"][0]]
    finally:
        go_on.set()
        wb.memory.tracking(False)
        remove()


def test_bad_arguments_say_what_to_write(backend):
    with pytest.raises(ValueError, match="512MiB"):
        wb.memory.set_limit(bytes="lots")
    with pytest.raises(ValueError, match="not both"):
        wb.memory.set_limit(bytes=1 << 20, fraction=0.5)
    with pytest.raises(ValueError, match="from 0 to 1"):
        wb.memory.set_limit(fraction=2)
    with pytest.raises(ValueError, match="execution count"):
        wb.memory.leaks(since="yesterday")
    with pytest.raises(TypeError, match="True or False"):
        wb.memory.tracking("yes")


@pytest.mark.gpu
def test_cupy_limit_by_fraction_and_direct_cupy_arrays_are_tracked():
    import cupy
    with using_backend("cupy"):
        wb.memory.tracking(True)
        try:
            stats = wb.memory.set_limit(fraction=0.5)
            assert stats.limit == pytest.approx(stats.device_total * 0.5, rel=0.01)
            before = tracker().in_use
            direct = cupy.arange(1 << 20, dtype=cupy.float32)        # not through wb: still tracked
            assert tracker().in_use - before == 4 << 20
            live = wb.memory.live()
            row = live[live["code"].str.contains("direct = cupy.arange", regex=False)].iloc[0]
            assert row["bytes"] == 4 << 20 and row["held_by"] == "direct"
            assert wb.memory.stats().pinned_free_blocks is not None
            del direct
        finally:
            wb.memory.set_limit()
            wb.memory.tracking(False)
