"""Where the timing log's device times come from: CUPTI's kernel records on a
GPU where CUPTI is found, events elsewhere.

The first tests give the log records the way CUPTI delivers them (sorted by
correlation id within a flush, a kernel's record only once it finished,
kernels the workbench did not launch among them, now and then one lost) and
check that every logged launch gets its own kernel's time. The GPU test runs
real kernels under real CUPTI.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import workbench as wb
from workbench.runtime.timing import TimingLog

from helpers import new_timings


class Records:
    """Kernel records as CUPTI hands them over: ``finish`` makes a launched
    kernel's record available; ``take`` returns those in correlation order."""

    def __init__(self):
        self.correlation = 0
        self.launched = {}
        self.finished = []
        self.paused = False

    def launch(self, symbol: str, ms: float) -> int:
        self.correlation += 1
        if not self.paused:
            self.launched[self.correlation] = (symbol, ms)
        return self.correlation

    def finish(self, *correlations, drop=()):
        for c in correlations:
            symbol, ms = self.launched.pop(c)
            if c not in drop:
                self.finished.append((c, symbol, 1_000_000, 1_000_000 + int(ms * 1e6)))

    def take(self, forced=True):
        got, self.finished = sorted(self.finished), []
        return got

    def pause(self):
        self.paused = True

    def resume(self):
        self.paused = False


class RecordsBackend:
    name = "records"

    def __init__(self):
        self.records = Records()

    def kernel_activity(self):
        return self.records

    def synchronize(self):
        self.records.finish(*list(self.records.launched))


class Cell:
    cell = 3


def launch(log, b, name, ms, symbol=None):
    """One logged launch of a kernel that will run ``ms``; its correlation id."""
    out = []
    log.timed_launch(b, name, (1,), (32,), 0, None,
                     lambda *a: out.append(b.records.launch(symbol or name, ms)), None, "cuda",
                     symbol)
    return out[0]


def times(log):
    return [(r[0], r[8]) for r in log.records]


def test_records_reach_their_launches_in_order_past_other_kernels():
    log, b = TimingLog(Cell()), RecordsBackend()
    a = launch(log, b, "scale", 0.5, "_Z5scalePfi")
    other = b.records.launch("cupy_copy", 9.0)  # a kernel the workbench did not launch
    c = launch(log, b, "scale", 0.25, "_Z5scalePfi")
    b.records.finish(a, other, c)
    log.resolve_all()
    assert times(log) == [("scale", 0.5), ("scale", 0.25)]
    assert log.source == "CUPTI activity records"


def test_a_record_that_comes_early_waits_for_its_launch():
    log, b = TimingLog(Cell()), RecordsBackend()
    first = launch(log, b, "slow", 2.0)   # still running on one stream ...
    second = launch(log, b, "fast", 0.1)  # ... while this one, on another, is done
    b.records.finish(second)
    assert log.resolve_finished(b) == 0   # the first launch has no time yet: nothing read
    b.records.finish(first)
    assert log.resolve_finished(b) == 2
    assert times(log) == [("slow", 2.0), ("fast", 0.1)]


def test_a_lost_record_costs_only_its_own_launch():
    log, b = TimingLog(Cell()), RecordsBackend()
    ids = [launch(log, b, name, ms) for name, ms in (("a", 1.0), ("b", 2.0), ("c", 3.0))]
    b.records.finish(*ids, drop={ids[1]})
    log.resolve_all()
    got = times(log)
    assert got[0] == ("a", 1.0) and got[2] == ("c", 3.0)
    assert got[1][0] == "b" and math.isnan(got[1][1])


def test_numba_and_triton_kernels_match_by_a_part_of_the_symbol():
    log, b = TimingLog(Cell()), RecordsBackend()
    log.timed_launch(b, "touch", (1,), None, 0, None,
                     lambda *a: b.records.launch("_ZN8__main__9touch_241B96c8tJTC", 0.75), None,
                     "numba")
    log.resolve_all()
    assert times(log) == [("touch", 0.75)]


def test_paused_launches_make_no_records_and_no_entries():
    log, b = TimingLog(Cell()), RecordsBackend()
    launch(log, b, "k", 1.0)  # the log knows its source from its first launch
    with log.paused():
        assert b.records.paused
        for _ in range(3):
            launch(log, b, "k", 5.0)
    assert not b.records.paused
    launch(log, b, "k", 2.0)
    log.resolve_all()
    assert times(log) == [("k", 1.0), ("k", 2.0)]


SPIN = r"""
extern "C" __global__ void spin(long long ns) {
    long long t0; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) { long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
               if (t - t0 > ns) break; }
}
template <typename T> __global__ void fill(T* x, T v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = v;
}
"""


@pytest.mark.gpu
def test_cupti_times_every_launch_on_the_gpu(gpu):
    from workbench.backends.gpu import cupti
    if cupti.kernel_activity() is None:
        pytest.skip(f"CUPTI cannot time launches here: {cupti.unavailable_reason()}")
    assert "CUPTI" in wb.backend().describe()
    module = wb.compile(SPIN, instantiate=["fill<float>"])
    spin, fill = module["spin"], module["fill<float>"]
    x = wb.xp.zeros(1000, dtype=np.float32)
    with new_timings() as added:
        for us in (20, 40, 80):
            spin(np.int64(us * 1000), grid=1, block=1)
            (x * 2).sum()  # CuPy's own kernels in between: not in the log
            fill(x, np.float32(us), 1000, n=1000)
    df = added.frame
    assert len(df) == 6 and list(df["kernel"])[0::2] == ["spin"] * 3
    np.testing.assert_allclose(df["ms"].to_numpy()[0::2], [0.02, 0.04, 0.08], rtol=0.15)
    assert (df["ms"].to_numpy()[1::2] > 0).all()  # the template's mangled symbol matched too
    assert float(wb.to_host(x)[0]) == 80.0


@pytest.mark.gpu
def test_event_timed_launches_through_the_c_launcher_keep_their_lengths(gpu):
    """Events recorded around the launch by the C launcher's one call (or by
    Python where it is not built) time kernels of 1x, 2x and 4x the work."""
    from workbench.runtime.session import session
    module = wb.compile(SPIN, instantiate=["fill<float>"])
    spin = module["spin"]
    with session().timing_log.timed_by_events():
        with new_timings() as added:
            # (a first launch loads the module, and after the host has waited for the GPU, an
            # event's first kernel starts late: warm-ups queued right before the measured ones)
            for us in (1, 1, 1, 200, 2000, 400, 200):
                spin(np.int64(us * 1000), grid=1, block=1)
        df = added.frame.iloc[3:]
    assert list(df["kernel"]) == ["spin"] * 4
    ms = df["ms"].to_numpy()
    np.testing.assert_allclose(ms, [0.2, 2.0, 0.4, 0.2], rtol=0.1)
    assert ms[1] / ms[0] == pytest.approx(10, rel=0.2) and ms[2] / ms[3] == pytest.approx(2, rel=0.2)


def test_cupti_timed_launches_get_a_place_on_the_timeline():
    from workbench.runtime import records
    log, b = TimingLog(Cell()), RecordsBackend()
    ids = [launch(log, b, "k", 1.0), launch(log, b, "k", 2.0)]
    b.records.finish(*ids)
    log.resolve_all()
    first, second = log.records
    # no cupti.get_timestamp() here: the first record's launch time stands in for its start
    assert first[records.T0] == pytest.approx(first[records.WALL] * 1e3)
    assert second[records.T0] == pytest.approx(first[records.T0])
    assert first[records.KIND] == "kernel" and first[records.DEVICE] == 0


class EventsRecordsBackend(RecordsBackend):
    """The records double with events too (the log times a graph launch with
    them): every event is done, and each pair measures ``EVENT_MS``."""

    EVENT_MS = 0.125

    def current_device(self):
        return 0

    def stream_device(self, stream):
        return 0

    def is_default_stream(self, stream):
        return True

    def create_event(self):
        return object()

    def destroy_event(self, event):
        pass

    def record_event(self, event, stream=None):
        pass

    def event_done(self, event):
        return True

    def event_synchronize(self, event):
        pass

    def elapsed_ms(self, start, end):
        return self.EVENT_MS

    def timeline_offset_ms(self, anchor, event):
        return 0.0

    def create_stream(self, priority=None, non_blocking=False):
        return object()

    def set_device(self, index):
        pass


def test_a_graph_launch_between_launches_takes_none_of_their_records():
    log, b = TimingLog(Cell()), EventsRecordsBackend()
    first = launch(log, b, "k", 1.0)
    log.timed_op(b, "graph", "g (4 nodes)", None, None,
                 lambda: [b.records.launch("k", 9.0) for _ in range(4)])  # the graph's own k's
    second = launch(log, b, "k", 2.0)
    b.records.finish(first, second)
    log.resolve_all()
    assert times(log) == [("k", 1.0), ("g (4 nodes)", b.EVENT_MS), ("k", 2.0)]
    assert not b.records.paused


def test_cuptis_clock_is_paired_with_the_hosts_when_read():
    import time as _time
    from workbench.runtime import records
    log, b = TimingLog(Cell()), RecordsBackend()
    b.records.timestamp_ns = lambda: 51_000_000     # CUPTI's clock now: 50 ms after the start
    first = launch(log, b, "k", 1.0)
    b.records.finish(first)
    now = _time.time() * 1e3
    log.resolve_all()
    rec = log.records[0]
    assert rec[records.T0] == pytest.approx(now - 50.0, abs=20.0)


@pytest.mark.gpu
def test_repeated_calls_launch_log_and_check_alike(gpu):
    """Once a kernel's launch configuration and argument checks are cached
    (after its first call), repeated calls must still give the right results,
    log every launch with a device time (none while paused) and refuse wrong
    arguments before anything runs."""
    from workbench.runtime.session import session
    k = wb.compile(r'''
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}''')["axpy"]
    rng = np.random.default_rng(3)
    n = 5000
    xh, yh = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x, y = wb.to_device(xh), wb.to_device(yh)
    expected = yh.astype(np.float64)
    with new_timings() as added:
        for a in (0.5, -1.25, 3.0, 0.5):
            k(a, x, y, n, grid=(n + 255) // 256, block=256)
            expected = a * xh.astype(np.float64) + expected
        np.testing.assert_allclose(wb.to_host(y), expected, rtol=1e-5, atol=1e-5)
    df = added.frame
    df = df[df["kind"] == "kernel"]  # (the copy back to the host is logged too)
    assert list(df["kernel"]) == ["axpy"] * 4 and (df["ms"] > 0).all()
    with new_timings() as while_paused:
        with session().timing_log.paused():
            k(2.0, x, y, n, grid=(n + 255) // 256, block=256)
        expected = 2.0 * xh.astype(np.float64) + expected
        np.testing.assert_allclose(wb.to_host(y), expected, rtol=1e-5, atol=1e-5)
    assert (while_paused.frame["kind"] == "kernel").sum() == 0  # paused: launched, not logged
    with pytest.raises(wb.KernelArgumentError, match="float32"):
        k(1.0, x, wb.to_device(yh.astype(np.float64)), n, grid=(n + 255) // 256, block=256)
    with pytest.raises(wb.KernelArgumentError, match="does not fit"):
        k(1.0, x, y, 2**40, grid=(n + 255) // 256, block=256)
    np.testing.assert_allclose(wb.to_host(y), expected, rtol=1e-5, atol=1e-5)  # nothing ran
