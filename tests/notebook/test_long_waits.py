"""A simulator launch that runs for seconds says so while it runs (the
waiting side reports, about once a second after the first two), and says how
it ended; a short one shows nothing."""
from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest

import workbench as wb
from workbench.present import waiting
from workbench.widgets.progress import WaitLine

TIMED = r"""
#ifdef __WBSIM__
__device__ unsigned long long now_ns() { return __globaltimer(); }
#else
__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif
extern "C" __global__ void sleep_for(float* x, long long ns) {
    const unsigned long long t0 = now_ns();
    while (now_ns() - t0 < (unsigned long long)ns) { }
    x[0] += 1.0f;  // (one thread: the simulator runs a block's threads in turn)
}
"""


class Recorder:
    """A reporter that keeps what it was told."""
    made: list = []

    def __init__(self, what):
        self.what, self.updates, self.closed = what, [], None
        Recorder.made.append(self)

    def update(self, elapsed):
        self.updates.append(elapsed)

    def close(self, elapsed, outcome):
        self.closed = (elapsed, outcome)


@pytest.fixture
def recorder():
    Recorder.made = []
    previous = waiting.reporter()
    waiting.set_reporter(Recorder)
    yield Recorder
    waiting.set_reporter(previous)


@pytest.fixture
def sleeper(simulator):
    return wb.compile(TIMED, name="long_waits")["sleep_for"]


def test_a_launch_of_seconds_reports_while_it_runs(sleeper, recorder):
    x = wb.to_device(np.zeros(1, np.float32))
    sleeper(x, 3_300_000_000, grid=1, block=1)
    assert len(recorder.made) == 1
    shown = recorder.made[0]
    assert shown.what == "kernel sleep_for"
    assert shown.updates[0] >= waiting.AFTER_S
    elapsed, outcome = shown.closed
    assert outcome == "done" and elapsed >= 3.2  # (the worker starts just before the wait does)
    # about once a second from 2 s on: at 2 s and 3 s (later ones on a busy machine)
    assert 2 <= len(shown.updates) <= int(elapsed) - 1
    assert all(b - a >= 0.9 for a, b in zip(shown.updates, shown.updates[1:]))
    np.testing.assert_array_equal(wb.to_host(x), np.ones(1, np.float32))


def test_a_short_launch_shows_nothing(sleeper, recorder):
    x = wb.to_device(np.zeros(1, np.float32))
    for _ in range(3):
        sleeper(x, 1000, grid=1, block=1)
    assert recorder.made == []
    np.testing.assert_array_equal(wb.to_host(x), np.full(1, 3, np.float32))


def test_a_short_launch_makes_no_wait_even_with_a_reporter(sleeper, recorder, monkeypatch):
    """The launch path stays lean: a reply within AFTER_S makes no Wait and reads no reporter."""
    from workbench.backends.simulator import worker
    made = []

    class Counted(waiting.Wait):
        __slots__ = ()

        def __init__(self, *args):
            made.append(args)
            super().__init__(*args)
    monkeypatch.setattr(worker, "Wait", Counted)
    x = wb.to_device(np.zeros(1, np.float32))
    for _ in range(3):
        sleeper(x, 1000, grid=1, block=1)
    assert made == []
    sleeper(x, 2_300_000_000, grid=1, block=1)  # past AFTER_S: one Wait, one report line
    assert len(made) == 1 and len(recorder.made) == 1
    assert recorder.made[0].what == "kernel sleep_for"
    np.testing.assert_array_equal(wb.to_host(x), np.full(1, 4, np.float32))


def test_a_launch_reads_the_clock_only_in_the_workers_wait(sleeper, monkeypatch):
    """The launch itself keeps no time of its own (the worker's wait for the
    reply has the one clock reading an interrupted launch's message needs)."""
    import types
    from workbench.backends.simulator import kernels
    read = []
    clock = types.SimpleNamespace(monotonic=lambda: read.append(1) or 0.0,
                                  perf_counter=kernels.time.perf_counter)
    x = wb.to_device(np.zeros(1, np.float32))
    sleeper(x, 1000, grid=1, block=1)  # (compiled and loaded: the launches below only launch)
    monkeypatch.setattr(kernels, "time", clock)
    for _ in range(3):
        sleeper(x, 1000, grid=1, block=1)
    assert read == []
    np.testing.assert_array_equal(wb.to_host(x), np.full(1, 4, np.float32))


def test_ctrl_c_outside_the_workers_request_is_not_said_to_end_the_worker(
        sleeper, monkeypatch):
    """An interrupt while the launch is prepared (no request under way) is a
    plain KeyboardInterrupt: the worker runs on, and the next launch uses it."""
    from workbench.backends.simulator import kernels

    def interrupted(*args):
        raise KeyboardInterrupt
    x = wb.to_device(np.zeros(1, np.float32))
    sleeper(x, 1000, grid=1, block=1)
    (running,) = [w for w in wb.backend()._workers.values() if w.alive]
    pid = running._proc.pid
    monkeypatch.setattr(kernels, "request_prefix", interrupted)
    with pytest.raises(KeyboardInterrupt) as caught:
        sleeper(x, 1000, grid=2, block=1)  # (a configuration not launched before)
    assert type(caught.value) is KeyboardInterrupt  # not the workbench's "worker ended" line
    monkeypatch.undo()
    assert running.alive and running._proc.pid == pid
    sleeper(x, 1000, grid=1, block=1)
    assert running._proc.pid == pid
    np.testing.assert_array_equal(wb.to_host(x), np.full(1, 2, np.float32))


def test_an_interrupted_launch_closes_its_report_as_stopped(sleeper, recorder):
    x = wb.to_device(np.zeros(1, np.float32))
    timer = threading.Timer(2.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt, match=r"sleep_for<<<1, 1>>> stopped after [2-9]\.\d s"):
            sleeper(x, 60_000_000_000, grid=1, block=1)
    finally:
        timer.cancel()
    (shown,) = recorder.made
    assert shown.closed[1] == "interrupted"
    np.testing.assert_array_equal(wb.to_host(x), np.zeros(1, np.float32))  # not written


def test_off_the_main_thread_nothing_is_reported(sleeper, recorder):
    x = wb.to_device(np.zeros(1, np.float32))
    worker = threading.Thread(target=sleeper, args=(x, 2_300_000_000),
                              kwargs={"grid": 1, "block": 1})
    worker.start()
    worker.join()
    assert recorder.made == []


def test_the_notebook_line_says_what_runs_for_how_long_and_how_to_stop_it():
    line = WaitLine.__new__(WaitLine)
    line.what = "kernel spin"
    assert line.running(4.2) == ("kernel spin has run for 4 s on the simulator; to stop it, "
                                 "interrupt the kernel (the stop button, or I, I): device arrays "
                                 "stay as they are")
    assert WaitLine.ended("kernel spin", 4.25, "done") == "kernel spin ran for 4.2 s on the simulator"
    assert WaitLine.ended("kernel spin", 4.25, "interrupted") == "kernel spin was stopped after 4.2 s"
