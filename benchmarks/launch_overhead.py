"""Per-launch host overhead of a wb.Kernel call against a raw CuPy launch.

Targets: a wb.Kernel call, timed, costs at most 1.2x a raw
``cupy.RawKernel`` call of the same empty kernel (1.05x with the log paused),
and the cached argument checks cost under 1 µs. Launches are timed by CUPTI's
activity records where ``cupti-python`` works, else by two events; with
CUPTI, the table also times the same call with events. The table also breaks the wb call into its parts,
and reports what reading the timing log later costs per launch.
Run: ``python benchmarks/launch_overhead.py``.
"""
from __future__ import annotations

import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import per_call_us, print_table  # noqa: E402

import workbench as wb  # noqa: E402

SOURCE = r'''
extern "C" __global__ void empty(float a, const float* x, float* y, int n) { }
'''


def main() -> None:
    b = wb.backend()
    calls = 20_000 if not b.simulated else 300
    kernel = wb.compile(SOURCE)["empty"]
    x = wb.to_device(np.ones(256, np.float32))
    y = wb.to_device(np.ones(256, np.float32))
    args = (1.5, x, y, 256)
    for _ in range(200):
        kernel(*args, grid=1, block=32)
    wb.timings()

    import workbench.runtime.session as session_module
    log = session_module.session().timing_log
    wb_us = per_call_us(lambda: kernel(*args, grid=1, block=32), calls)
    launches = 7 * calls  # per_call_us's repeats
    start = time.perf_counter()
    wb.timings()
    resolve_us = (time.perf_counter() - start) / max(launches, 1) * 1e6

    with log.paused():
        untimed_us = per_call_us(lambda: kernel(*args, grid=1, block=32), calls)
    source = log.source
    events_us = None
    if source != "events":
        with log.timed_by_events():
            events_us = per_call_us(lambda: kernel(*args, grid=1, block=32), calls)

    stream = b.current_stream()
    converted = kernel.convert_args(args)
    rows = [
        ["wb.Kernel call", wb_us, f"checked, launched, timed by {source}"],
        ["wb.Kernel call, timing log paused", untimed_us, "checked and launched"],
        ["  argument checks (convert_args)", per_call_us(lambda: kernel.convert_args(args), calls), "target < 1 µs"],
        ["  current stream", per_call_us(b.current_stream, calls), ""],
        ["  launcher alone", per_call_us(
            lambda: kernel._launcher((1, 1, 1), (32, 1, 1), list(converted), 0, stream), calls), ""],
    ]
    if events_us is not None:
        rows.insert(1, ["wb.Kernel call, timed by events instead", events_us,
                        "2 events recorded per launch"])
    ev = b.create_event()
    rows.append(["  one event record", per_call_us(lambda: b.record_event(ev, stream), calls), ""])
    rows.append(["reading the log later (per launch)", resolve_us, "wb.timings()"])
    if b.name == "cupy":
        import cupy
        raw = cupy.RawKernel(SOURCE, "empty")
        raw_args = (np.float32(1.5), x, y, np.int32(256))
        raw((1,), (32,), raw_args)
        with log.paused():  # (and so without CUPTI's records, which cost every launch)
            raw_us = per_call_us(lambda: raw((1,), (32,), raw_args), calls)
        rows.insert(0, ["raw cupy.RawKernel call", raw_us, ""])
        rows.append(["ratio wb / raw", wb_us / raw_us, "target <= 1.2"])
        rows.append(["ratio wb (log paused) / raw", untimed_us / raw_us, "target <= 1.05"])
    title = f"Launch overhead on {b.describe()}" + (" (simulated: CPU wall-clock)" if b.simulated else "")
    print_table(title, ["what", "µs per call", "note"], rows)


if __name__ == "__main__":
    main()
