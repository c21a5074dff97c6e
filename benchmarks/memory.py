"""Cost of memory tracking per allocation + free: tracking off, an empty
listener (the backend's allocation reporting alone: on the GPU the allocator
the workbench puts around CuPy's pool), and tracking on, for small
allocations in a tight loop; then the tracker's record path alone.

    python benchmarks/memory.py            # the active backend (GPU when there is one)
    python benchmarks/memory.py --n 200000 --size 256

Target: tracking adds at most 2 µs per allocation + free on the GPU (the
"on" column, where the tracker only records; "count later" is what turning
those records into counts, live allocations and timeline costs afterwards,
when something is read, per allocation + free).
On the simulator the figures are printed too, labelled simulated: they
measure the simulator's allocator, not a GPU's.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import pin_to_two_cpus, print_table  # noqa: E402

TARGET_US = 2.0


def _loop_alloc_free(backend, n: int, count: int) -> float:
    """Seconds for ``n`` allocations of ``count`` float32, each dropped at once."""
    allocate, dtype = backend.allocate, np.dtype(np.float32)
    shape = (count,)
    start = time.perf_counter()
    for _ in range(n):
        allocate(shape, dtype)
    backend.synchronize()
    return time.perf_counter() - start


def _loop_keep_then_free(backend, n: int, count: int) -> float:
    """Seconds for ``n`` allocations kept alive together, then all freed."""
    allocate, dtype = backend.allocate, np.dtype(np.float32)
    shape = (count,)
    start = time.perf_counter()
    kept = [allocate(shape, dtype) for _ in range(n)]
    del kept
    backend.synchronize()
    return time.perf_counter() - start


def _timed_us(loop, backend, n: int, count: int) -> float:
    gc.collect()
    gc.disable()
    try:
        return loop(backend, n, count) / n * 1e6
    finally:
        gc.enable()


def run(n: int, size: int, repeat: int) -> list[dict]:
    """Median µs per allocation (with its free) in each mode; the modes take
    turns within every repeat so that drift of the machine hits them alike."""
    import workbench as wb
    from workbench.memory.tracker import tracker

    backend = wb.backend()
    count = max(size // 4, 1)
    rows = []
    for pattern, loop in (("alloc + free at once", _loop_alloc_free),
                          ("keep all, then free", _loop_keep_then_free)):
        loop(backend, min(n, 1000), count)   # warm the pool and the caches
        times: dict[str, list[float]] = {"off": [], "hook": [], "on": [], "count": []}
        recorded = 0
        for _ in range(repeat):
            wb.memory.tracking(False)
            times["off"].append(_timed_us(loop, backend, n, count))
            remove = backend.add_allocation_listener(lambda p, s: None, lambda p, s: None)
            try:
                times["hook"].append(_timed_us(loop, backend, n, count))
            finally:
                remove()
            wb.memory.tracking(True)
            start = tracker().n_allocs
            times["on"].append(_timed_us(loop, backend, n, count))
            began = time.perf_counter()
            recorded = tracker().n_allocs - start          # counts what the loop recorded
            times["count"].append((time.perf_counter() - began) / n * 1e6)
            wb.memory.tracking(False)
        off, hook, on, later = (statistics.median(times[k]) for k in ("off", "hook", "on", "count"))
        # the median of each round's own difference: the machine's drift between
        # rounds (tens of percent on a shared host) cancels within a round
        added = statistics.median(b - a for a, b in zip(times["off"], times["on"]))
        rows.append({"pattern": pattern, "off_us": off, "hook_us": hook, "on_us": on,
                     "count_us": later, "added_us": added,
                     "ratio": on / off if off else float("nan"), "recorded": recorded})
    return rows


class _Listening:
    """Stands in for a backend: keeps the tracker's callbacks to call directly."""
    name = "direct calls"

    def __init__(self):
        self.callbacks = None

    def pool_stats(self):
        return {"used_bytes": 0}

    def pool_reserved_bytes(self):
        return 1 << 30

    def add_allocation_listener(self, on_alloc, on_free):
        self.callbacks = (on_alloc, on_free)
        return lambda: None


def _record_loop(on_alloc, on_free, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        ptr = 4096 + 512 * i
        on_alloc(ptr, 512)
        on_free(ptr, 512)
    return time.perf_counter() - start


def record_path(n: int, repeat: int) -> dict:
    """µs per allocation + free of the tracker's callbacks called directly
    (no backend), net of the same loop calling empty callbacks; and of
    counting those records afterwards."""
    from workbench.memory.tracker import Tracker

    def empty(ptr, size):
        return None
    base, hot, later = [], [], []
    for _ in range(repeat):
        t, stand_in = Tracker(), _Listening()
        t.start(stand_in)
        on_alloc, on_free = stand_in.callbacks
        gc.collect()
        gc.disable()
        try:
            base.append(_record_loop(empty, empty, n) / n * 1e6)
            hot.append(_record_loop(on_alloc, on_free, n) / n * 1e6)
            began = time.perf_counter()
            recorded = t.n_allocs
            later.append((time.perf_counter() - began) / n * 1e6)
        finally:
            gc.enable()
        assert recorded == n, recorded
        t.stop()
    b = statistics.median(base)
    return {"record_us": statistics.median(hot) - b, "count_us": statistics.median(later)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="allocations per timed loop")
    parser.add_argument("--size", type=int, default=256, help="bytes per allocation")
    parser.add_argument("--repeat", type=int, default=9, help="timed loops per mode (median)")
    args = parser.parse_args()

    pinned = pin_to_two_cpus()  # (before CUDA starts its threads)
    import workbench as wb
    from workbench.memory import tracker as tracker_module
    # "on" times the recording alone: the tracker counts its raw events every
    # COUNT_EVERY of them, which a loop must not reach (counting is its own column)
    tracker_module.COUNT_EVERY = max(tracker_module.COUNT_EVERY, 4 * args.n)
    backend = wb.backend()
    simulated = bool(backend.simulated)
    label = " [SIMULATED: CPU simulator's allocator, not a GPU]" if simulated else ""
    print(f"memory tracking cost on {backend.describe()}{label}")
    print(f"{args.n} allocations of {args.size} B per loop, median of {args.repeat} loops; on {pinned}")
    rows = run(args.n, args.size, args.repeat)
    table = []
    for r in rows:
        verdict = "PASS" if r["added_us"] <= TARGET_US else "over"
        table.append([r["pattern"], f"{r['off_us']:.3f}", f"{r['hook_us']:.3f}",
                      f"{r['on_us']:.3f}", f"{r['added_us']:.3f}", f"{r['count_us']:.3f}",
                      f"{r['ratio']:.2f}",
                      f"tracking adds <= {TARGET_US} µs: {verdict}" + (" (simulated)" if simulated else "")])
    print_table("µs per allocation + free", ["pattern", "off", "empty listener", "on", "added",
                                              "count later", "on/off", "target"], table)
    if not simulated:
        try:
            from workbench.backends.gpu import allocations
            print(f"the allocator around the pool: {allocations.implementation()}")
        except ImportError:   # a GPU backend other than CuPy's
            pass
    for r in rows:
        if r["recorded"] != args.n:
            print(f"  WARNING ({r['pattern']}): tracking recorded {r['recorded']} of {args.n} allocations")
    rec = record_path(args.n, args.repeat)
    print_table("the tracker's Python record path alone (callbacks called directly;"
                " on the GPU the C allocator records instead where it is built)",
                ["what", "µs per alloc + free"],
                [["record (on_alloc + on_free)", f"{rec['record_us']:.3f}"],
                 ["count later (when read)", f"{rec['count_us']:.3f}"]])
    print("\noff: no listener; empty listener: the backend's allocation reporting alone "
          "(listeners that do nothing);\non: wb.memory tracking, which only records; "
          "added = on - off (the median of the rounds' own differences); count later: counting the records afterwards\n"
          "(live allocations, per-cell counts, peak, timeline), paid when something is read.")


if __name__ == "__main__":
    main()
