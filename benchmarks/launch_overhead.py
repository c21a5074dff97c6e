"""Per-launch host overhead of a wb.Kernel call against a raw CuPy launch.

Targets: a wb.Kernel call, timed, costs at most 1.2x a raw
``cupy.RawKernel`` call of the same empty kernel (1.05x with the log paused),
and the cached argument checks cost under 1 µs. The raw call that the targets
compare with runs in a process of its own that never loads CUPTI (CUPTI, once
started, slows every CUDA call of its process a little, paused or not); the
same raw call in this process is shown too. Both processes run on the same
two CPUs. Launches are timed by CUPTI's
activity records where CUPTI is found, else by two events (recorded around the
launch by the same C call where the C launcher is built). The table times both
sources where both exist, what reading the log later costs per launch with
each, what the calls right after a read cost, and breaks the call into its
parts.
Run: ``python benchmarks/launch_overhead.py``.
"""
from __future__ import annotations

import contextlib
import select
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import per_call_us, pin_to_two_cpus, print_table  # noqa: E402

import workbench as wb  # noqa: E402

SOURCE = r'''
extern "C" __global__ void empty(float a, const float* x, float* y, int n) { }
'''
ROUNDS = 15
AFTER_READ = 1000


#: The same raw CuPy loop in a process of its own that never loads CUPTI: the
#: baseline a user's own CuPy code runs at. (In the benchmark's process, CUPTI
#: stays subscribed while paused, and that alone slows every CUDA call a little.)
RAW_ELSEWHERE = r'''
import sys, time, numpy as np, cupy
kernel = cupy.RawKernel(sys.argv[1], "empty_raw")
calls = int(sys.argv[2])
x = cupy.ones(256, np.float32)
args = (np.float32(1.5), x, x, np.int32(256))
for _ in range(200):
    kernel((1,), (32,), args)
cupy.cuda.runtime.deviceSynchronize()
for _ in sys.stdin:
    start = time.perf_counter()
    for _ in range(calls):
        kernel((1,), (32,), args)
    us = (time.perf_counter() - start) / calls * 1e6
    cupy.cuda.runtime.deviceSynchronize()
    print(us, flush=True)
'''


class _RawElsewhere:
    """Rounds of raw CuPy launches in a child process without CUPTI, run when
    asked; a child that fails or hangs only costs its rows."""

    TIMEOUT_S = 120

    def __init__(self, calls: int):
        self._child = subprocess.Popen(
            [sys.executable, "-c", RAW_ELSEWHERE, SOURCE.replace("empty", "empty_raw"), str(calls)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def round_us(self) -> float | None:
        if self._child.poll() is not None:
            return None
        try:
            self._child.stdin.write("go\n")
            self._child.stdin.flush()
            ready, _, _ = select.select([self._child.stdout], [], [], self.TIMEOUT_S)
            return float(self._child.stdout.readline()) if ready else self.close()
        except (OSError, ValueError):  # the child failed (its error is on stderr)
            return self.close()

    def close(self) -> None:
        try:
            self._child.stdin.close()
            self._child.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self._child.kill()
            self._child.wait()


def _taken_in_c(kernel) -> int:
    """Calls of ``kernel`` the whole-call C path took (0 where there is none)."""
    return kernel._fast.taken if kernel._fast is not None else 0


def _read_us(log, launches: int) -> float:
    """µs per launch that reading the times of ``launches`` new launches takes
    (what ``wb.timings()`` does before it builds its table); the log is
    emptied after, so that every round reads the same number."""
    start = time.perf_counter()
    log.resolve_all()
    seconds = time.perf_counter() - start
    log.clear()
    return seconds / max(launches, 1) * 1e6


def main() -> None:
    pinned = pin_to_two_cpus()  # (before CUDA starts its threads: they inherit it)
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
    call = lambda: kernel(*args, grid=1, block=32)  # noqa: E731
    source = log.source
    # the timing sources to compare: the active one and, where CUPTI is, events too
    modes = {source: contextlib.nullcontext}
    if source != "events":
        modes["events"] = log.timed_by_events
    modes["log paused"] = log.paused
    raw = None
    if b.name == "cupy":
        import cupy
        # (another name: CUPTI's records of the raw launches must match no wb launch)
        kernel_raw = cupy.RawKernel(SOURCE.replace("empty", "empty_raw"), "empty_raw")
        raw_args = (np.float32(1.5), x, y, np.int32(256))
        kernel_raw((1,), (32,), raw_args)
        raw = lambda: kernel_raw((1,), (32,), raw_args)  # noqa: E731
    # Alternating rounds, so that the host getting faster or slower between
    # rows (it does, by tens of percent) moves all of them alike; ratios are
    # the medians of the rounds' ratios. The raw call runs with the log paused,
    # so without CUPTI's records, which cost every launch.
    rounds: dict = {m: [] for m in modes}
    reads: dict = {m: [] for m in modes}
    after_read: dict = {m: [] for m in modes}
    rounds["raw"] = []
    in_c: dict = {}  # mode -> the share of its calls the whole-call C path took
    rounds["raw elsewhere"] = []
    elsewhere = _RawElsewhere(calls) if raw is not None else None
    rounds["raw, CUPTI recording"] = []
    for _ in range(ROUNDS if not b.simulated else 1):
        if elsewhere is not None:
            us = elsewhere.round_us()
            if us is not None:
                rounds["raw elsewhere"].append(us)
        if raw is not None:
            with log.paused():
                rounds["raw"].append(per_call_us(raw, calls, repeats=1))
            if source != "events":  # CUPTI's own cost: it records the raw launches too
                rounds["raw, CUPTI recording"].append(per_call_us(raw, calls, repeats=1))
                b.synchronize()
                log._activity.take()  # (their records, read and dropped here, not in a wb round)
        for mode, context in modes.items():
            with context():
                taken = _taken_in_c(kernel)
                rounds[mode].append(per_call_us(call, calls, repeats=1))
                in_c[mode] = (_taken_in_c(kernel) - taken) / calls
                reads[mode].append(_read_us(log, calls))
                if mode != "log paused":  # what the launches right after a read pay (CUPTI's new buffers)
                    after_read[mode].append(per_call_us(call, AFTER_READ, repeats=1))
                    _read_us(log, AFTER_READ)

    if elsewhere is not None:
        elsewhere.close()
    med = {m: statistics.median(v) for m, v in rounds.items() if v}
    rows = []
    if raw is not None:
        if "raw elsewhere" in med:
            rows.append(["raw cupy.RawKernel call, in a process without CUPTI", med["raw elsewhere"],
                         f"the baseline; median of {ROUNDS} rounds"])
        rows.append(["raw cupy.RawKernel call, here (CUPTI paused)", med["raw"], f"median of {ROUNDS} rounds"])
        if "raw, CUPTI recording" in med:
            rows.append(["raw cupy.RawKernel call, CUPTI recording kernels", med["raw, CUPTI recording"],
                         "what CUPTI itself adds to any launch"])
    for mode in modes:
        what = ("checked and launched" if mode == "log paused" else
                f"checked, launched, timed by {mode}") + (
                    f"; {in_c[mode]:.0%} of calls wholly in C" if kernel._fast is not None else "")
        rows.append([f"wb.Kernel call, {mode}" if mode == "log paused" else f"wb.Kernel call, {mode}",
                     med[mode], what])
    for mode in modes:
        if mode != "log paused":
            rows.append([f"  reading the log later, per launch ({mode})", statistics.median(reads[mode]),
                         "the times read (before wb.timings() builds its table)"])
            rows.append([f"  the first {AFTER_READ} calls after a read of the log ({mode})",
                         statistics.median(after_read[mode]), "per call; a read must not slow what follows"])
    stream = b.current_stream()
    converted = kernel._check_call(args)  # what a call hands its launcher
    rows += [
        ["  argument checks, as a call makes them", per_call_us(lambda: kernel._check_call(args), calls),
         "target < 1 µs"],
        ["  argument checks to exact C types (convert_args)",
         per_call_us(lambda: kernel.convert_args(args), calls), ""],
        ["  current stream", per_call_us(b.current_stream, calls), ""],
    ]
    with log.paused():
        rows.append(["  launcher alone", per_call_us(
            lambda: kernel._launcher((1, 1, 1), (32, 1, 1), converted, 0, stream), calls),
            b.launch_path()])
    if raw is not None:
        # the target rows: against raw CuPy in a process without CUPTI where that ran
        base = "raw elsewhere" if len(rounds["raw elsewhere"]) == len(rounds["raw"]) else "raw"
        for mode in modes:
            target = 1.05 if mode == "log paused" else 1.2
            each = [w / r for w, r in zip(rounds[mode], rounds[base])]
            ratio = statistics.median(each)
            rows.append([f"ratio wb ({mode}) / raw" + (" without CUPTI" if base != "raw" else ""), ratio,
                         f"target <= {target}: {'PASS' if ratio <= target else 'over'} "
                         f"(rounds {min(each):.2f} to {max(each):.2f})"])
        if base != "raw":
            for mode in (source, "log paused"):
                ratio = statistics.median(w / r for w, r in zip(rounds[mode], rounds["raw"]))
                rows.append([f"ratio wb ({mode}) / raw here", ratio, "for comparison (CUPTI's cost on both)"])
        if "raw, CUPTI recording" in med:
            ratio = statistics.median(w / r for w, r in zip(rounds[source], rounds["raw, CUPTI recording"]))
            rows.append([f"ratio wb ({source}) / raw with CUPTI recording", ratio,
                         "the workbench's own part of a timed launch"])
    title = (f"Launch overhead on {b.describe()}" + (" (simulated: CPU wall-clock)" if b.simulated else "")
             + f"; on {pinned}")
    print_table(title, ["what", "µs per call", "note"], rows)


if __name__ == "__main__":
    main()
