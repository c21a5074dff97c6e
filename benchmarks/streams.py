"""Streams, pinned memory and graphs against their targets.

Rows, measured side by side on the active backend:

* copy/compute overlap: chunks copied host-to-device from pinned memory and
  then processed by a compute-bound kernel tuned to take as long as the copy;
  one stream against 2 and 4 streams. Target >= 1.6x (H100).
* pinned against pageable host-to-device copies of 256 MiB: pinned >= 1.5x,
  and >= 80% of the link's measured peak (the best pinned copy of 64 MiB to
  1 GiB, 10 repeats each).
* 100 tiny kernels: host time per kernel of one graph launch against 100 calls.
  Target >= 3x lower.
* recording in the timeline: host time of a kernel call and of a copy with the
  timing log on against paused (the log stores the kind and stream fields
  with the rest of the record, no look-up). Target: no cost beyond the launch
  path's own two events.

Run: ``python benchmarks/streams.py`` (``--quick``: small sizes; on the
simulator the figures are CPU times and only show that the paths run).
"""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import per_call_us, print_table  # noqa: E402

import workbench as wb  # noqa: E402
from workbench.runtime.session import session  # noqa: E402

MIB = 1 << 20

SOURCE = r'''
extern "C" __global__ void burn(float* x, int n, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    for (int k = 0; k < iters; ++k) v = v * 0.999f + 0.001f;
    x[i] = v;
}
extern "C" __global__ void tiny(float* x, float a) {
    if (threadIdx.x == 0) x[0] += a;
}
'''


def _ms(fn) -> float:
    """Host wall time of ``fn()`` and a device synchronise, in ms."""
    wb.synchronize()
    start = time.perf_counter()
    fn()
    wb.synchronize()
    return (time.perf_counter() - start) * 1e3


def overlap_rows(m, chunk_bytes: int, chunks: int) -> list[list]:
    n = chunk_bytes // 4
    host = wb.pinned((chunks, n), np.float32)
    host[...] = 1.0
    dev = [wb.allocate((n,), np.float32) for _ in range(chunks)]
    burn = m["burn"]
    # tune the compute stage to the copy's length
    s = wb.Stream(name="tune")
    copy_ms = statistics.median(_ms(lambda: wb.copy(dev[0], host[0], stream=s)) for _ in range(5))
    iters = 64
    for _ in range(12):
        k_ms = statistics.median(_ms(lambda: burn(dev[0], n, iters, n=n, stream=s)) for _ in range(3))
        if k_ms >= copy_ms * 0.9:
            break
        iters = int(iters * max(1.3, min(8.0, copy_ms / max(k_ms, 1e-3))))
    rows = []
    base = None
    for count in (1, 2, 4):
        streams = [wb.Stream(name=f"pipe {i}") for i in range(count)]

        def pipeline():
            for c in range(chunks):
                st = streams[c % count]
                wb.copy(dev[c], host[c], stream=st)
                burn(dev[c], n, iters, n=n, stream=st)
        pipeline()
        t = statistics.median(_ms(pipeline) for _ in range(5))
        base = base or t
        rows.append([f"copy+compute, {chunks} x {chunk_bytes // MIB} MiB, {count} stream"
                     f"{'s' if count > 1 else ''}", t, f"{base / t:.2f}x",
                     ">= 1.6x" if count > 1 else f"copy {copy_ms:.2f} ms, kernel {k_ms:.2f} ms"])
    return rows


def pinned_rows(nbytes: int, peak_sizes) -> list[list]:
    b = wb.backend()
    n = nbytes // 4
    dev = wb.allocate((n,), np.float32)
    pageable = np.ones(n, np.float32)
    locked = wb.pinned((n,), np.float32)
    locked[...] = 1.0
    s = wb.Stream(name="h2d")

    def rate(dst, src, repeat=7):
        wb.copy(dst, src, stream=s, sync=True)
        samples = []
        for _ in range(repeat):
            e0, e1 = wb.Event().record(s), wb.Event()
            wb.copy(dst, src, stream=s)
            e1.record(s)
            samples.append(src.nbytes / (e0.elapsed_ms(e1) or float("nan")) / 1e6)
        return statistics.median(samples)

    with session().timing_log.paused():
        slow, fast = rate(dev, pageable), rate(dev, locked)
        peak = fast
        for size in peak_sizes:
            k = size // 4
            d2, h2 = wb.allocate((k,), np.float32), wb.pinned((k,), np.float32)
            peak = max(peak, max(rate(d2, h2, repeat=10) for _ in range(1)))
            del d2, h2
    del dev
    label = f"{nbytes // MIB} MiB H2D"
    return [[f"pageable {label}", slow, "GB/s", ""],
            [f"pinned {label}", fast, f"{fast / slow:.2f}x pageable", ">= 1.5x"],
            ["measured link peak (pinned, best size)", peak, f"{fast / peak:.0%} of peak",
             ">= 80%" + (" (simulator: a memcpy)" if b.simulated else "")]]


def graph_rows(m, kernels: int, calls: int) -> list[list]:
    x = wb.allocate((32,), np.float32)
    tiny = m["tiny"]
    s = wb.Stream(name="graph bench")
    with wb.graph("tiny x100") as g:
        for _ in range(kernels):
            tiny(x, 1.0, grid=1, block=32)
    g.launch(stream=s, sync=True)
    log = session().timing_log

    def calls_fn():
        for _ in range(kernels):
            tiny(x, 1.0, grid=1, block=32, stream=s)

    direct = per_call_us(calls_fn, calls) / kernels
    with log.paused():
        direct_paused = per_call_us(calls_fn, calls) / kernels
    graph = per_call_us(lambda: g.launch(stream=s), calls) / kernels
    return [[f"{kernels} tiny kernels, {kernels} calls (per kernel)", direct, "µs host", ""],
            [f"  the same, timing log paused", direct_paused, "µs host", ""],
            [f"{kernels} tiny kernels, one graph launch (per kernel)", graph,
             f"{direct / graph:.1f}x lower", ">= 3x"]]


def recording_rows(m, calls: int) -> list[list]:
    x = wb.allocate((32,), np.float32)
    y = wb.allocate((32,), np.float32)
    tiny = m["tiny"]
    log = session().timing_log
    s = wb.Stream(name="record bench")
    on = per_call_us(lambda: tiny(x, 1.0, grid=1, block=32, stream=s), calls)
    with log.paused():
        off = per_call_us(lambda: tiny(x, 1.0, grid=1, block=32, stream=s), calls)
    copy_on = per_call_us(lambda: wb.copy(y, x, stream=s), calls)
    with log.paused():
        copy_off = per_call_us(lambda: wb.copy(y, x, stream=s), calls)
    b = wb.backend()
    ev = b.create_event()
    event_us = per_call_us(lambda: b.record_event(ev, s.raw), calls)
    wb.timings()
    return [[f"kernel call, logged (timed by {log.source})", on, "µs host", ""],
            ["kernel call, log paused", off, f"+{on - off:.2f} µs logged",
             f"<= 2 event records ({2 * event_us:.2f} µs) + a list"],
            ["copy D2D 128 B, logged", copy_on, "µs host", ""],
            ["copy D2D 128 B, log paused", copy_off, f"+{copy_on - copy_off:.2f} µs logged", "same as a kernel"]]


def main() -> None:
    quick = "--quick" in sys.argv or wb.backend().simulated
    b = wb.backend()
    m = wb.compile(SOURCE, name="streams_bench")
    print(f"backend: {b.describe()}")
    rows = overlap_rows(m, (4 if quick else 64) * MIB, 4 if quick else 8)
    print_table("Copy/compute overlap (host ms per pipeline)", ["what", "ms", "speed-up", "target"], rows)
    big = (16 if quick else 256) * MIB
    rows = pinned_rows(big, [] if quick else [64 * MIB, 512 * MIB, 1024 * MIB])
    print_table("Pinned vs pageable host-to-device", ["what", "GB/s", "", "target"], rows)
    rows = graph_rows(m, 100, 5 if quick else 50)
    print_table("Graph launch vs calls", ["what", "µs", "", "target"], rows)
    rows = recording_rows(m, 200 if quick else 20000)
    print_table("Recording in the timing log / timeline", ["what", "µs", "", "target"], rows)
    if b.device_count() > 1:
        print(wb.peer_matrix())
        print(wb.peer_bandwidth(nbytes=(4 if quick else 256) * MIB))
    else:
        print("\none device: no peer matrix (two GPUs needed)")
    print(wb.host_bandwidth(nbytes=(16 if quick else 256) * MIB))


if __name__ == "__main__":
    main()
