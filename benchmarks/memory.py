"""Cost of memory tracking per allocation: tracking off, an empty listener
(the allocator hook alone), and tracking on, for small allocations in a
tight loop.

    python benchmarks/memory.py            # the active backend (GPU when there is one)
    python benchmarks/memory.py --n 200000 --size 256

Target: tracking adds at most 2 µs per allocation on the GPU.
On the simulator the figures are printed too, labelled simulated: they
measure the simulator's allocator, not a GPU's.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time

import numpy as np

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
        times: dict[str, list[float]] = {"off": [], "hook": [], "on": []}
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
            recorded = tracker().n_allocs - start
            wb.memory.tracking(False)
        off, hook, on = (statistics.median(times[k]) for k in ("off", "hook", "on"))
        rows.append({"pattern": pattern, "off_us": off, "hook_us": hook, "on_us": on,
                     "added_us": on - off, "ratio": on / off if off else float("nan"),
                     "recorded": recorded})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="allocations per timed loop")
    parser.add_argument("--size", type=int, default=256, help="bytes per allocation")
    parser.add_argument("--repeat", type=int, default=5, help="timed loops per mode (median)")
    args = parser.parse_args()

    import workbench as wb
    backend = wb.backend()
    label = " [SIMULATED: CPU simulator's allocator, not a GPU]" if backend.simulated else ""
    print(f"memory tracking cost on {backend.describe()}{label}")
    print(f"{args.n} allocations of {args.size} B per loop, median of {args.repeat} loops\n")
    rows = run(args.n, args.size, args.repeat)
    header = (f"{'pattern':<22} {'off µs':>8} {'hook µs':>8} {'on µs':>8} "
              f"{'added µs':>9} {'on/off':>7}  target")
    print(header)
    print("-" * len(header))
    for r in rows:
        verdict = "ok" if r["added_us"] <= TARGET_US else "OVER"
        print(f"{r['pattern']:<22} {r['off_us']:>8.3f} {r['hook_us']:>8.3f} {r['on_us']:>8.3f} "
              f"{r['added_us']:>9.3f} {r['ratio']:>7.2f}  <= {TARGET_US} µs: {verdict}")
        if r["recorded"] != args.n:
            print(f"  WARNING: tracking recorded {r['recorded']} of {args.n} allocations")
    print("\noff: no listener; hook: an empty listener (the allocator's hook alone); "
          "on: wb.memory tracking\nadded = on - off, per allocation including its free.")


if __name__ == "__main__":
    main()
