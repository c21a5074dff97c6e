"""How the tracker records: the callbacks only append, counting happens when
anything is read, and the figures are those of counting one by one (peak
between two reads included). On the GPU: the allocator that reports to it
leaves CuPy's pool, its limit and its errors as they were, and is gone when
tracking is off."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import workbench as wb
from workbench.memory import tracker as tracker_module
from workbench.memory.tracker import tracker


def _pool_used(backend) -> int:
    return backend.pool_stats()["used_bytes"]


def test_peak_between_two_reads_is_kept(backend, tracking):
    gc.collect()
    wb.memory.reset_peak()
    base = tracking.in_use
    big = wb.allocate((1 << 20,), np.uint8)
    size = tracking.live[backend.device_pointer(big)][0]   # as the pool counts it (rounded up)
    del big
    small = wb.allocate((1000,), np.uint8)       # nothing read between these and the peak
    assert tracking.peak >= base + size            # the big one was counted though already gone
    assert wb.memory.stats().peak == tracking.peak >= tracking.in_use
    del small


@pytest.fixture
def small_batches(monkeypatch):
    """Raw events counted every 7 by the recording side itself (read when
    tracking starts: this fixture comes before ``tracking``)."""
    monkeypatch.setattr(tracker_module, "COUNT_EVERY", 7)


def test_counts_stay_exact_when_the_raw_events_are_counted_in_small_batches(
        small_batches, backend, tracking):
    rng = np.random.default_rng(11)
    gc.collect()   # arrays of earlier tests must not be freed in the middle
    before, since = tracking.n_allocs, len(tracking.events())
    alive, made = [], 0
    for _ in range(200):
        if alive and rng.random() < 0.4:
            alive.pop(int(rng.integers(len(alive))))
        else:
            alive.append(wb.allocate((int(rng.integers(1, 50_000)),), np.uint8))
            made += 1
    assert tracking.n_allocs - before == made
    assert tracking.in_use == _pool_used(backend)
    events = tracking.events()[since - 1:]
    assert all(b[0] >= a[0] for a, b in zip(events, events[1:]))       # time never goes back
    for a, b in zip(events, events[1:]):                              # in_use moves by each size
        if b[3] in ("alloc", "free"):
            assert b[1] - a[1] == (b[4] if b[3] == "alloc" else -b[4])
    assert tracking.peak >= max(e[1] for e in events)
    del alive[:]
    assert tracking.in_use == _pool_used(backend)


def test_a_burst_of_events_is_counted_once_asked(backend, tracking):
    gc.collect()
    before_allocs, before_in_use = tracking.n_allocs, tracking.in_use
    for _ in range(3000):
        wb.allocate((256,), np.float32)
    kept = [wb.allocate((64,), np.float32) for _ in range(10)]
    assert tracking.n_allocs - before_allocs == 3010
    assert tracking.in_use - before_in_use == sum(tracking.live[backend.device_pointer(a)][0]
                                                  for a in kept)
    usage = wb.memory.per_cell(all_cells=True)
    assert sum(r.allocations for r in usage.rows) >= 3010


@pytest.fixture
def on_gpu(gpu):
    """The GPU backend active for the test, and tracking off and the previous
    backend back after it."""
    yield
    wb.memory.tracking(False)


@pytest.mark.gpu
def test_cupy_allocator_is_ours_only_while_tracking_and_the_previous_comes_back(on_gpu):
    import cupy
    before = cupy.cuda.get_allocator()
    pool = cupy.get_default_memory_pool()
    gc.collect()   # garbage of earlier tests must not be freed (and counted) in the middle
    try:
        early = cupy.arange(1 << 18, dtype=cupy.float32)      # from before tracking: the pool's own
        wb.memory.tracking(True)
        assert cupy.cuda.get_allocator() is not before
        assert tracker().untracked_bytes >= early.nbytes
        mine = cupy.arange(1 << 18, dtype=cupy.float32)       # through our allocator
        assert tracker().in_use == pool.used_bytes()
        assert pool.total_bytes() >= pool.used_bytes()
        used_with_both = pool.used_bytes()
        del early                                             # freed with no allocator told
        assert tracker().in_use == pool.used_bytes() == used_with_both - (1 << 20)
        assert "untracked freed" in [e[3] for e in tracker().events()]
        wb.memory.tracking(False)
        assert cupy.cuda.get_allocator() is before            # exactly the one from before
        assert float(mine[-1]) == (1 << 18) - 1               # the data outlived the switch
        del mine                                              # freed through ours, after tracking
        assert pool.used_bytes() == used_with_both - (2 << 20)
    finally:
        wb.memory.tracking(False)


@pytest.mark.gpu
def test_an_allocator_put_over_ours_while_tracking_does_not_recurse_when_tracking_resumes(on_gpu):
    """A user's allocator that wraps the one it found (ours, while tracking)
    stays after tracking stops; tracking again must not wrap it (it calls
    ours: allocations would recurse without end), and theirs comes back after."""
    import cupy
    before = cupy.cuda.get_allocator()
    calls = []
    try:
        wb.memory.tracking(True)
        found = cupy.cuda.get_allocator()

        def theirs(size):
            calls.append(size)
            return found(size)
        cupy.cuda.set_allocator(theirs)
        wb.memory.tracking(False)
        assert cupy.cuda.get_allocator() is theirs
        wb.memory.tracking(True)
        x = cupy.arange(1000, dtype=cupy.float32)          # no RecursionError
        assert float(x.sum()) == 999 * 1000 / 2
        assert tracker().in_use == cupy.get_default_memory_pool().used_bytes()
        wb.memory.tracking(False)
        assert cupy.cuda.get_allocator() is theirs
        y = cupy.ones(10)                                     # theirs, then ours, then the pool
        assert calls and float(y.sum()) == 10
        del x, y
    finally:
        wb.memory.tracking(False)
        cupy.cuda.set_allocator(before)


@pytest.mark.gpu
def test_cupy_arrays_in_garbage_cycles_go_back_to_the_pool(on_gpu):
    import cupy
    pool = cupy.get_default_memory_pool()
    wb.memory.tracking(True)
    try:
        gc.collect()
        used = pool.used_bytes()

        class Holder:
            pass
        gc.disable()       # the cycles stay until collected below
        try:
            for _ in range(3):
                holder = Holder()
                holder.array, holder.me = cupy.ones(1 << 20, cupy.uint8), holder
                holder.view = holder.array[1:]
                del holder
            assert pool.used_bytes() == used + (3 << 20)
        finally:
            gc.enable()
        gc.collect()       # the collector clears the cycles: the frees are heard, the blocks back
        assert pool.used_bytes() == used == tracker().in_use
    finally:
        wb.memory.tracking(False)


@pytest.mark.gpu
def test_cupy_out_of_memory_is_cupys_error_and_leaves_no_trace(on_gpu):
    import cupy
    pool = cupy.get_default_memory_pool()
    wb.memory.tracking(True)
    try:
        pool.free_all_blocks()
        pool.set_limit(size=pool.total_bytes() + (16 << 20))
        # more than the free pieces of blocks split by live arrays (the pool cannot return
        # those): CuPy must ask the driver for it, and its limit refuses
        request = max(64 << 20, pool.free_bytes() + (64 << 20))
        live_before, in_use_before = len(tracker().live), tracker().in_use
        with pytest.raises(cupy.cuda.memory.OutOfMemoryError):
            cupy.empty(request, dtype=cupy.uint8)
        assert (len(tracker().live), tracker().in_use) == (live_before, in_use_before)
        assert tracker().in_use == pool.used_bytes()
        with pytest.raises(wb.OutOfMemoryError, match="asked for "):
            wb.allocate((request,), np.uint8)
        fits = cupy.empty(8 << 20, dtype=cupy.uint8)          # still allocates after the error
        assert tracker().in_use == pool.used_bytes()
        del fits
    finally:
        pool.set_limit(size=0)
        wb.memory.tracking(False)


@pytest.mark.gpu
def test_tracking_inside_using_allocator_is_refused_with_a_way_out(on_gpu):
    import cupy
    try:
        with cupy.cuda.using_allocator(cupy.get_default_memory_pool().malloc):
            with pytest.raises(wb.WorkbenchError, match="outside it"):
                wb.memory.tracking(True)
        assert wb.memory.tracking() is False
        wb.memory.tracking(True)                               # outside: fine
        assert wb.memory.tracking() is True
    finally:
        wb.memory.tracking(False)
