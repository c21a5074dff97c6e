"""GPU probe for issue 15 (run by gpu/ringlat.sh): why call()'s round trip
differs between rings and loops. One table, a row per setting: whole call()
(host clock around it) and its transport (the C exchange's own clock, request
out -> answer seen: RingStats' host figures of single calls), p50/p90/p99 µs.

Settings: the ring a user gets by default (call_warps 3: three warps watch
call()'s mailbox), and with call_warps 1 (the dispatcher alone, as before) and
4; a capacity of 65536; the same after
8M messages in 4k batches (the benchmark's throughput phase); one block (the
dispatcher's warp and 3 warps of workers: are the other 16k polling threads in
the way?); and a host that waits a fixed or a random time between calls (the
dispatcher looks about once per bus round trip, so a loop whose period locks
onto that rhythm can miss every look by the same margin: a p50 that moves with
the gap says so; the random gap gives the average over phases). Then
send() + recv() of batches of 1 to 64 with host_poll_window 1 and 32.

    python gpu/ringlat_calls.py [calls]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import workbench as wb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from rings import REQUEST, RESPONSE, SOURCE, throughput  # noqa: E402


def _spin_ns(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def measure(r, calls: int, gap_ns=0, rng=None) -> list[str]:
    """p50/p90/p99 of whole call() and of its transport, µs, ``calls`` calls
    after 2000 unmeasured; ``gap_ns``: the host's wait between calls (an int,
    or "random": uniform 0-4 µs)."""
    for _ in range(2000):
        r.call((1.0, 2.0, 0, 0))
    r.reset_stats()
    gaps = (rng.integers(0, 4000, calls) if gap_ns == "random"
            else np.full(calls, gap_ns, dtype=np.int64))
    wall = np.empty(calls)
    for i in range(calls):
        if gaps[i]:
            _spin_ns(int(gaps[i]))
        t0 = time.perf_counter_ns()
        r.call((1.0, 2.0, i, 0))
        wall[i] = time.perf_counter_ns() - t0
    host = r.stats().host_latency * 1e9  # (the C exchange's own: request out -> answer seen)
    q = (50, 90, 99)
    return ([f"{v * 1e-3:.2f}" for v in np.percentile(wall, q)]
            + [f"{v * 1e-3:.2f}" for v in np.percentile(host, q)])


def main() -> int:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    rng = np.random.default_rng(0)
    rows = []

    def ring(**options):
        return wb.ring(SOURCE, request=REQUEST, response=RESPONSE, **options)

    def gap_name(gap):
        return gap if gap == "random" else f"{gap} ns"

    with ring() as r:
        layout = f"{r.blocks}x{r.threads}, {r.capacity} slots, call_warps {r.call_warps}"
        for gap in (0, 500, 1000, 1500, 2000, 3000, "random"):
            rows.append([f"default ({layout})", gap_name(gap), *measure(r, calls, gap, rng)])
    for warps, gaps in ((1, (0, 1000, 2000, "random")), (4, (0, "random"))):
        try:
            r = ring(call_warps=warps)
        except wb.WorkbenchError as exc:  # (4 needs two blocks or more)
            rows.append([f"call_warps {warps}", "", str(exc)[:60], "", "", "", "", ""])
            continue
        with r:
            for gap in gaps:
                rows.append([f"call_warps {warps}", gap_name(gap), *measure(r, calls, gap, rng)])
    with ring(capacity=65536) as r:
        rows.append(["capacity 65536, fresh", "0 ns", *measure(r, calls)])
        throughput(r, 4096, 1 << 23, rng)
        rows.append(["capacity 65536, after 8M messages", "0 ns", *measure(r, calls)])
        rows.append(["capacity 65536, after 8M messages", "random",
                     *measure(r, calls, "random", rng)])
    with ring(blocks=1) as r:
        rows.append([f"one block ({r.blocks}x{r.threads})", "0 ns", *measure(r, calls)])
        rows.append([f"one block ({r.blocks}x{r.threads})", "random",
                     *measure(r, calls, "random", rng)])
    _print(f"call() round trips, µs, {calls} calls each ({wb.backend().device_properties().name})",
           ["ring", "gap", "call p50", "p90", "p99", "transport p50", "p90", "p99"], rows)
    # The queue's path for small batches (the benchmark's ratios against a launch per batch)
    rows = []
    for window in (1, 32):
        with ring(host_poll_window=window) as r:
            for k in (1, 4, 16, 64):
                rows.append([f"host_poll_window {window}", k, *batches(r, k, calls // 2, rng)])
    _print("send() + recv() of a batch, µs", ["ring", "batch", "p50", "p90", "p99"], rows)
    return 0


def batches(r, k: int, count: int, rng) -> list[str]:
    """p50/p90/p99 µs of send() + recv() of ``k`` messages, ``count`` times after 500."""
    msgs = np.zeros(k, dtype=REQUEST)
    msgs["a"], msgs["id"] = rng.standard_normal(k), np.arange(k)
    for _ in range(500):
        r.send(msgs)
        r.recv(k)
    wall = np.empty(count)
    for i in range(count):
        t0 = time.perf_counter_ns()
        r.send(msgs)
        got = r.recv(k)
        wall[i] = time.perf_counter_ns() - t0
    assert np.array_equal(got["id"], msgs["id"])
    return [f"{v * 1e-3:.2f}" for v in np.percentile(wall, (50, 90, 99))]


def _print(title: str, head: list[str], rows: list[list]) -> None:
    width = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    print(title)
    for row in [head, *rows]:
        print("  ".join(str(x).rjust(w) for x, w in zip(row, width)))


if __name__ == "__main__":
    raise SystemExit(main())
