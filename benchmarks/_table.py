"""Tiny helpers the benchmark scripts share: print rows as an aligned table,
time a host call."""
from __future__ import annotations

import os
import statistics
import time


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    cells = [[str(c) for c in header]] + [[f"{c:.3g}" if isinstance(c, float) else str(c) for c in r]
                                          for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    for k, r in enumerate(cells):
        print("  ".join(c.rjust(w) if k else c.ljust(w) for c, w in zip(r, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))


def per_call_us(fn, calls: int, repeats: int = 7) -> float:
    """Median over ``repeats`` of the mean host time per call, in µs (the
    device is synchronised between repeats)."""
    import workbench as wb  # lazy: print_table alone needs no workbench
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
        wb.synchronize()
    return statistics.median(samples)


def paired_per_call_us(first, second, calls: int, rounds: int = 9) -> tuple[float, float, float]:
    """``(first µs, second µs, median of second/first)``, the two measured in
    alternating rounds so that a machine getting faster or slower in between
    moves both (the ratio is the median of the rounds' ratios)."""
    a, b = [], []
    for _ in range(rounds):
        a.append(per_call_us(first, calls, repeats=1))
        b.append(per_call_us(second, calls, repeats=1))
    return statistics.median(a), statistics.median(b), statistics.median(y / x for x, y in zip(a, b))


def pin_to_two_cpus() -> str:
    """Keep the calling thread, and the threads and processes it starts later
    (they inherit it), on the same two CPUs: a VM's cores run at different
    speeds, by tens of percent, and side-by-side figures must compare runs on
    the same ones. Call it first, before CUDA starts its threads. Where fewer
    than two CPUs are allowed, or the system cannot pin, nothing changes."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
        if len(allowed) < 2:
            return "unpinned (one CPU)"
        cpus = allowed[-2:]
        os.sched_setaffinity(0, cpus)
    except (AttributeError, OSError):  # (not Linux: left where the system puts it)
        return "unpinned"
    return f"CPUs {', '.join(map(str, cpus))}"
