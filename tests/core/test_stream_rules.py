"""CUDA's rules for streams, events, copies and graph captures, which the
simulator enforces as a GPU does: events and kernel launches belong to one
device, asynchronous copies keep their arrays, calls that wait break a
capture, graph nodes keep their kernel's argument checks, and the timeline
places work where it ran in host time."""
import gc
import time
import weakref

import numpy as np
import pytest

import workbench as wb
from workbench.runtime.session import session

SOURCE = r'''
extern "C" __global__ void axpb(float* x, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i] + b;
}
'''


@pytest.fixture
def two(private_simulator):
    b = private_simulator(devices=2)
    return b, wb.compile(SOURCE, name="rules")["axpb"]


def test_events_go_back_to_the_pool_of_the_device_that_queued_the_work(two):
    b, k = two
    n = 256
    with wb.device(1):
        x1 = wb.to_device(np.zeros(n, np.float32))
        for _ in range(3):
            k(x1, 1.0, 1.0, n, n=n)              # the default stream, device 1's events
    x0 = wb.to_device(np.zeros(n, np.float32))
    log = wb.timings()                           # read with device 0 current
    assert list(log["device"].iloc[-4:-1]) == [1, 1, 1]
    for _ in range(8):                           # device 0's launches take device 0's events
        k(x0, 1.0, 1.0, n, n=n)
    np.testing.assert_array_equal(wb.to_host(x0), np.full(n, 8, np.float32))
    assert list(wb.timings()["device"].iloc[-8:]) == [0] * 8


def test_an_explicit_stream_of_another_device(two):
    b, k = two
    n = 128
    with wb.device(1):
        s1 = wb.Stream(name="s1")
        x1 = wb.allocate((n,), np.float32)
    host = np.random.default_rng(7).standard_normal(n).astype(np.float32)
    wb.copy(x1, host, stream=s1, sync=True)      # queued from device 1, device 0 stays current
    wb.memset(x1, 0, stream=s1)
    assert b.current_device() == 0 and not wb.to_host(x1).any()
    with pytest.raises(wb.WorkbenchError, match="current device"):
        k(x1, 1.0, 1.0, n, n=n, stream=s1)
    with pytest.raises(wb.WorkbenchError, match=r"device 0.*device 1"):
        wb.Event(device=0).record(s1)
    e = wb.Event(device=1).record()             # no stream: device 1's current stream
    assert e.recorded and e.done and b.current_device() == 0
    s1.record().synchronize()
    with pytest.raises(wb.WorkbenchError, match="wb.Stream"):
        wb.copy(x1, host, stream=3)
    with pytest.raises(wb.WorkbenchError, match="wb.Stream"):
        k(x1, 1.0, 1.0, n, n=n, stream="s1")
    with pytest.raises(wb.DeviceError):        # the backend itself refuses what CUDA refuses
        b.record_event(b.create_event(), s1.raw)
    with pytest.raises(wb.LaunchConfigError, match="device 1"):
        k.backend.launch(k.function, (1, 1, 1), (n, 1, 1), (x1, 1.0, 1.0, n), 0, s1.raw)


def test_asynchronous_copies_keep_their_arrays_until_done(backend):
    n = 1 << 12
    d = wb.allocate((n,), np.float32)
    host = np.ones(n, np.float32)
    alive = weakref.ref(host)
    wb.copy(d, host)
    del host
    gc.collect()
    assert alive() is not None                   # held by the copy's record ...
    wb.timings()
    gc.collect()
    assert alive() is None                       # ... until its time was read
    log = session().timing_log
    with log.paused():                           # benchmarks: no record, still kept
        host = np.ones(n, np.float32)
        alive = weakref.ref(host)
        wb.copy(d, host)
        del host
        gc.collect()
        assert alive() is not None
        wb.synchronize()
        wb.copy(d, np.zeros(n, np.float32))      # the next copy lets the finished one go
        gc.collect()
        assert alive() is None


def test_the_log_holds_no_stream_alive(backend):
    s = wb.Stream(name="short-lived")
    wb.memset(wb.allocate((64,), np.uint8), 0, stream=s)
    assert "short-lived" in set(wb.timings()["stream"])
    gone = weakref.ref(s.raw)
    del s
    gc.collect()
    assert gone() is None


def test_calls_that_wait_are_refused_inside_a_capture(backend):
    k = wb.compile(SOURCE, name="capture_rules")["axpb"]
    n = 256
    x = wb.to_device(np.zeros(n, np.float32))
    s = wb.Stream()
    h = wb.pinned((n,), np.float32)
    calls = [wb.synchronize, s.synchronize, lambda: s.done, wb.timings,
             lambda: wb.copy(x, h, sync=True)]
    for call in calls:
        with pytest.raises(wb.WorkbenchError, match="inside wb.graph"):
            with wb.graph() as g:
                k(x, 1.0, 1.0, n, n=n)
                call()
        assert len(g) == 0
        with pytest.raises(wb.WorkbenchError, match="nothing captured"):
            g.launch()
    with wb.graph() as inner:
        k(x, 1.0, 1.0, n, n=n)
    with pytest.raises(wb.WorkbenchError, match="sync=True"):
        with wb.graph():
            inner.launch(sync=True)
    # the user's own error comes through, whatever the capture's end says
    with pytest.raises(ZeroDivisionError):
        with wb.graph() as g:
            k(x, 1.0, 1.0, n, n=n)
            1 / 0
    assert len(g) == 0
    k(x, 1.0, 1.0, n, n=n)                       # the workbench works on
    np.testing.assert_array_equal(wb.to_host(x), np.ones(n, np.float32))


def test_a_capture_invalidated_underneath_says_why(private_simulator):
    b = private_simulator()
    k = wb.compile(SOURCE, name="invalidated")["axpb"]
    x = wb.to_device(np.zeros(64, np.float32))
    with pytest.raises(wb.WorkbenchError, match=r"wb.synchronize\(\), Stream.synchronize"):
        with wb.graph() as g:
            k(x, 1.0, 1.0, 64, n=64)
            try:
                b.synchronize()                  # past the workbench's own checks
            except wb.WorkbenchError:
                pass
    assert len(g) == 0


def test_a_launch_that_fails_in_a_capture_leaves_no_node(two):
    b, k = two
    n = 64
    x = wb.to_device(np.zeros(n, np.float32))
    with wb.graph() as g:
        with pytest.raises(wb.LaunchConfigError):
            with wb.device(1):                   # the graph's stream is device 0's
                k(x, 1.0, 1.0, n, n=n)
        k(x, 2.0, 1.0, n, n=n)
    assert len(g) == 1 and g.nodes().records()[0]["args"].startswith("float32[64], 2.0")


def test_set_args_checks_new_arguments_as_the_kernel_does(backend):
    k = wb.compile(SOURCE, name="set_args_checks")["axpb"]
    n = 64
    x = wb.to_device(np.zeros(n, np.float32))
    with wb.graph() as g:
        k(x, 1.0, 1.0, n, n=n)
    wrong = wb.to_device(np.zeros(n, np.float64))
    with pytest.raises(wb.KernelArgumentError, match="float"):
        g.set_args(0, wrong, 1.0, 1.0, n)
    g.launch(sync=True)                          # the graph is unchanged
    np.testing.assert_array_equal(wb.to_host(x), np.ones(n, np.float32))


def test_the_timeline_places_work_where_it_ran(backend):
    _places_work_where_it_ran()


def test_the_first_work_of_a_backend_is_placed_where_it_ran(private_simulator):
    private_simulator()                          # the log starts afresh: no clock anchor yet
    _places_work_where_it_ran()


def _places_work_where_it_ran():
    n = 1 << 24                                  # 64 MiB: a copy of some milliseconds
    host = np.ones(n, np.float32)
    d = wb.allocate((n,), np.float32)
    k = wb.compile(SOURCE, name="timeline_clock")["axpb"]
    s = wb.Stream(name="one")
    before = time.time()
    wb.copy(d, host, stream=s)
    k(d, 1.0, 1.0, n, n=n, stream=s)
    s.synchronize()
    after = time.time()
    t = wb.timeline(since=before)
    copy, kernel = t.lane("one")
    assert copy.kind == "copy" and kernel.kind == "kernel"
    assert copy.end <= kernel.start + 0.05       # in order on one stream: no overlap (ms)
    assert t.overlap == 0.0 if wb.backend().simulated else t.overlap < 0.01
    frame = wb.timings().iloc[-2:]
    starts, ends = frame["start_ms"], frame["start_ms"] + frame["ms"]
    slack = 2.0                                  # ms: the host clock against the device's
    assert (starts >= before * 1e3 - slack).all() and (ends <= after * 1e3 + slack).all()


def test_nodes_of_numba_and_triton_kernels_show_their_arguments(backend):
    from workbench.core.graphs import GraphNode
    x = wb.allocate((64,), np.float32)
    # a Python-kernel node holds (converted arguments, meta-parameters, grid)
    node = GraphNode("kernel", "add", (2, 1, 1), (32, 1, 1), 0, None, None,
                     [[x, np.float32(2.0), 64], {"BLOCK": 128}, (2,)])
    assert node.row(0)["args"] == "(float32[64], 2.0, 64), BLOCK=128, (2)"
