"""Streams, events, copies, memory kinds, graphs and the timeline, on every
backend (the simulator here, the GPU in ``gpu``-marked runs)."""
import time

import numpy as np
import pytest

import workbench as wb
from workbench.benchmarking.timeline import Interval, Timeline, overlap_stats
from workbench.core.streams import stream

from helpers import new_timings

SOURCE = r'''
extern "C" __global__ void fill(float* x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v + i;
}
extern "C" __global__ void axpb(float* x, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i] + b;
}
extern "C" __global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
'''


@pytest.fixture
def m(backend):
    return wb.compile(SOURCE, name="streams_api")


def test_work_on_one_stream_runs_in_order(m):
    n = 1 << 16
    x = wb.allocate((n,), np.float32)
    s = wb.Stream(name="ordered")
    with s:
        m["fill"](x, 1.0, n, n=n)
        for _ in range(20):            # each step reads what the one before wrote
            m["axpb"](x, 2.0, -1.0, n, n=n)
    s.synchronize()
    expect = 1.0 + np.arange(n, dtype=np.float64)
    for _ in range(20):
        expect = 2.0 * expect - 1.0
    np.testing.assert_allclose(wb.to_host(x), expect.astype(np.float32), rtol=1e-6)


def test_a_consumer_waiting_on_an_event_gets_the_producers_data(m):
    n = 1 << 20
    rng = np.random.default_rng(1)
    value = float(rng.uniform(1, 2))
    x, y = wb.allocate((n,), np.float32), wb.allocate((n,), np.float32)
    producer, consumer = wb.Stream(name="producer"), wb.Stream(name="consumer", priority=-1)
    with producer:
        m["fill"](x, value, n, n=n)
        for _ in range(10):  # long enough that a consumer not waiting would read too early
            m["axpb"](x, 1.0, 0.0, n, n=n)
    ready = producer.record()
    consumer.wait(ready)
    m["twice"](x, y, n, n=n, stream=consumer)
    consumer.synchronize()
    assert ready.done
    np.testing.assert_array_equal(wb.to_host(y), 2.0 * (np.float32(value) + np.arange(n, dtype=np.float32)))


def test_events_measure_time_and_refuse_misuse(m):
    n = 1 << 16
    x = wb.allocate((n,), np.float32)
    start, end = wb.Event(), wb.Event()
    with pytest.raises(wb.WorkbenchError, match="never recorded"):
        start.elapsed_ms(end)
    start.record()
    m["fill"](x, 1.0, n, n=n)
    end.record()
    end.synchronize()
    assert end.done and (end - start) >= 0.0
    with pytest.raises(TypeError, match="wb.Stream"):
        with stream("not a stream"):  # what `with s:` calls
            pass


def test_copies_in_every_direction_are_timed_with_bytes_and_stream(m):
    rng = np.random.default_rng(2)
    host = rng.standard_normal(4096).astype(np.float32)
    d1, d2 = wb.allocate((4096,), np.float32), wb.allocate((4096,), np.float32)
    back = np.empty_like(host)
    s = wb.Stream(name="copies")
    with new_timings() as added:
        wb.copy(d1, host, stream=s)                    # H2D
        wb.copy(d2, d1, stream=s)                      # D2D
        wb.copy(back, d2, stream=s, sync=True)         # D2H
        wb.memset(d1, 0, stream=s)
        s.synchronize()
    np.testing.assert_array_equal(back, host)
    assert not wb.to_host(d1).any()
    log = added.frame
    copies = log[log["stream"] == "copies"]
    assert list(copies["kernel"]) == ["copy H2D", "copy D2D", "copy D2H", "memset"]
    assert list(copies["kind"]) == ["copy", "copy", "copy", "memset"]
    assert (copies["bytes"] == host.nbytes).all()
    assert (copies["gbps"] > 0).all() and (copies["ms"] >= 0).all()
    kernels = wb.timings()
    assert set(kernels["kind"]) >= {"copy", "memset"}
    with pytest.raises(wb.WorkbenchError, match="same size"):
        wb.copy(d1, host[:10])


def test_pinned_and_managed_arrays_round_trip_and_are_tracked(m):
    wb.memory.tracking(True)
    n = 1 << 12
    rng = np.random.default_rng(3)
    data = rng.standard_normal(n).astype(np.float32)
    before = wb.memory.kinds()
    h = wb.pinned((n,), np.float32)
    h[...] = data
    d = wb.allocate((n,), np.float32)
    wb.copy(d, h, sync=True)
    managed = wb.managed((n,), np.float32)
    wb.copy(managed, d, sync=True)
    if wb.backend().managed_prefetch_supported():
        wb.memory.prefetch(managed)
        wb.memory.advise(managed, "read_mostly")
    m["axpb"](managed, 2.0, 1.0, n, n=n)
    wb.synchronize()
    out = wb.pinned((n,), np.float32)
    wb.copy(out, managed, sync=True)
    np.testing.assert_allclose(out, 2.0 * data + 1.0, rtol=1e-6)
    kinds = wb.memory.kinds()
    assert kinds["pinned"]["arrays"] == before["pinned"]["arrays"] + 2
    assert kinds["pinned"]["bytes"] == before["pinned"]["bytes"] + 2 * data.nbytes
    assert kinds["managed"]["bytes"] == before["managed"]["bytes"] + data.nbytes
    rows = wb.memory.live_rows()   # (it reads the callers' variables: last)
    assert {"pinned", "managed", "device"} <= {r["kind"] for r in rows}


def test_pinned_and_managed_entries_go_with_their_arrays(backend):
    import gc
    before = wb.memory.kinds()
    h, managed = wb.pinned((256,), np.float32), wb.managed((256,), np.float32)
    assert wb.memory.kinds()["pinned"]["arrays"] == before["pinned"]["arrays"] + 1
    del h, managed
    gc.collect()
    assert wb.memory.kinds()["pinned"]["arrays"] == before["pinned"]["arrays"]
    assert wb.memory.kinds()["managed"]["arrays"] == before["managed"]["arrays"]


def test_managed_never_asks_for_more_than_is_free(backend):
    free, _total = backend.memory_info()
    with pytest.raises(wb.OutOfMemoryError, match="free"):
        wb.managed((free // 4 + (1 << 20),), np.float32)


def test_graph_replay_equals_direct_launches_and_takes_new_scalars(m):
    n = 1 << 14
    rng = np.random.default_rng(4)
    start = rng.standard_normal(n).astype(np.float32)
    steps = [(float(a), float(b)) for a, b in rng.uniform(0.5, 1.5, size=(8, 2))]
    direct = wb.to_device(start)
    for a, b in steps:
        m["axpb"](direct, a, b, n, n=n)
    x = wb.to_device(start)
    with wb.graph("steps") as g:
        for a, b in steps:
            m["axpb"](x, a, b, n, n=n)
    np.testing.assert_array_equal(wb.to_host(x), start)   # captured, not run
    g.launch(sync=True)
    np.testing.assert_array_equal(wb.to_host(x), wb.to_host(direct))
    table = g.nodes()
    assert len(table) == len(steps) and table.to_pandas()["kind"].tolist() == ["kernel"] * len(steps)
    # new scalars for node 0, then replay on fresh data
    x2 = wb.to_device(start)
    g.set_args(0, x, 3.0, 0.25, n)
    wb.copy(x, x2, sync=True)
    g.launch(sync=True)
    expect = wb.to_device(start)
    for i, (a, b) in enumerate(steps):
        m["axpb"](expect, *( (3.0, 0.25) if i == 0 else (a, b)), n, n=n)
    np.testing.assert_array_equal(wb.to_host(x), wb.to_host(expect))
    graphs = wb.timings().query("kind == 'graph'")
    assert graphs.iloc[-1]["kernel"] == f"steps ({len(steps)} nodes)"
    with pytest.raises(wb.KernelArgumentError, match="integer"):
        g.set_args(1, x, 1.0, 1.0, 2.5)


def test_a_graph_holds_copies_from_pinned_memory_only(m):
    n = 1024
    h = wb.pinned((n,), np.float32)
    h[...] = np.arange(n)
    d = wb.allocate((n,), np.float32)
    with wb.graph() as g:
        wb.copy(d, h)
        m["axpb"](d, 2.0, 0.0, n, n=n)
    g.launch(sync=True)
    np.testing.assert_array_equal(wb.to_host(d), 2.0 * np.arange(n, dtype=np.float32))
    assert [r["kind"] for r in g.nodes().records()] == ["copy", "kernel"]
    with pytest.raises(wb.WorkbenchError, match="pinned"):
        with wb.graph():
            wb.copy(d, np.zeros(n, np.float32))
    with pytest.raises(wb.WorkbenchError, match="to_device"):
        with wb.graph():
            wb.to_device(np.zeros(3, np.float32))
    other = wb.Stream()
    with pytest.raises(wb.LaunchConfigError, match="graph's stream"):
        with wb.graph():
            m["axpb"](d, 1.0, 0.0, n, n=n, stream=other)
    m["axpb"](d, 1.0, 1.0, n, n=n)   # the workbench works on after a failed capture
    np.testing.assert_array_equal(wb.to_host(d), 2.0 * np.arange(n, dtype=np.float32) + 1.0)


def test_the_timeline_of_a_cell_has_one_lane_per_stream(m):
    n = 1 << 12
    x, y = wb.allocate((n,), np.float32), wb.allocate((n,), np.float32)
    a, b = wb.Stream(name="lane a"), wb.Stream(name="lane b")
    since = time.time()
    m["fill"](x, 1.0, n, n=n, stream=a)
    wb.copy(y, x, stream=b)
    wb.memset(y, 0, stream=b)
    wb.synchronize()
    t = wb.timeline(since=since)
    assert set(t.lanes) == {"lane a", "lane b"}
    assert [iv.name for iv in t.lane("lane b")] == ["copy D2D", "memset"]
    assert [iv.kind for iv in t.lane("lane a")] == ["kernel"]
    assert all(iv.end >= iv.start >= 0 for iv in t.intervals)
    lane_b = t.lane("lane b")
    assert lane_b[0].end <= lane_b[1].start + 1e-3      # in order on one stream
    busy, overlapped, _span = overlap_stats(t.intervals)   # the figure the intervals give
    assert busy > 0 and t.overlap == pytest.approx(overlapped / busy)
    if wb.backend().simulated:
        assert t.overlap == 0.0
    frame = t.to_pandas()
    assert list(frame.columns) == list(Timeline.COLUMNS) and len(frame) == 3
    assert all(part in repr(t) for part in ("1 kernel", "1 copy", "1 memset", "on 2 lanes"))
    assert f"two or more lanes busy {t.overlap:.0%}" in repr(t)
    pytest.importorskip("matplotlib")
    fig = t.plot()
    assert fig.axes[0].get_yticklabels()[0].get_text() in t.lanes


def test_overlap_of_a_known_schedule():
    # lane A busy 0-4 and 6-8, lane B busy 2-7: busy 0-8 (8 ms), two busy 2-4 and 6-7 (3 ms)
    ivs = [Interval("A", "k1", "kernel", 0, 4), Interval("A", "k2", "kernel", 6, 8),
           Interval("B", "c1", "copy", 2, 7)]
    busy, overlapped, span = overlap_stats(ivs)
    assert (busy, overlapped, span) == (8.0, 3.0, 8.0)
    t = Timeline(ivs)
    assert t.lanes == ["A", "B"] and t.overlap == pytest.approx(3 / 8)
    assert [iv.name for iv in t.lane("A")] == ["k1", "k2"]
    # one lane only: never overlapped, even when its intervals touch
    assert overlap_stats([Interval("A", "x", "kernel", 0, 2), Interval("A", "y", "kernel", 2, 3)])[1] == 0
    assert Timeline([]).overlap == 0.0 and "no kernels" in repr(Timeline([]))


def test_two_virtual_devices_on_the_simulator(private_simulator):
    b = private_simulator(devices=2)
    since = time.time()
    assert b.device_count() == 2 and len(wb.devices()) == 2
    m = wb.compile(SOURCE, name="two_devices")
    n = 1000
    x0 = wb.to_device(np.arange(n, dtype=np.float32))
    with wb.device(1):
        s1 = wb.Stream(name="on 1")
        x1 = wb.allocate((n,), np.float32)
        assert b.current_device() == 1 and s1.device == 1
    assert b.current_device() == 0 and b.array_device(x1) == 1 and b.array_device(x0) == 0
    wb.copy(x1, x0, stream=s1, sync=True)            # a peer copy, queued from device 1
    assert b.current_device() == 0
    with pytest.raises(wb.WorkbenchError, match="`with s:`"):
        m["axpb"](x1, 2.0, 0.0, n, n=n, stream=s1)   # CUDA launches on the current device only
    with s1:
        m["axpb"](x1, 2.0, 0.0, n, n=n)
    np.testing.assert_array_equal(wb.to_host(x1), 2.0 * np.arange(n, dtype=np.float32))
    log = wb.timings()
    assert log.iloc[-3]["kernel"] == "copy P2P" and list(log.iloc[-3:-1]["device"]) == [1, 1]
    peers = wb.peer_matrix()
    assert peers[0, 1] and peers[1, 0] and peers[0, 0]
    bw = wb.peer_bandwidth(nbytes=1 << 16, repeat=2)
    assert bw.devices == 2 and all(v > 0 for row in bw.values for v in row)
    assert list(bw.to_pandas().columns) == ["GPU 0", "GPU 1"] and "GB/s" in repr(bw)
    pytest.importorskip("matplotlib")
    assert len(bw.plot().axes[0].texts) == 4                  # the heatmap's four cells
    host = wb.host_bandwidth(nbytes=1 << 16, repeat=2)
    assert {(r["device"], r["direction"]) for r in host.records()} == {
        (0, "H2D"), (0, "D2H"), (1, "H2D"), (1, "D2H")}
    t = wb.timeline(since=since)       # work on two devices: lanes name their device
    assert set(t.lanes) == {"GPU 0 · default", "GPU 1 · on 1"}
    with pytest.raises(wb.DeviceError, match="2 devices"):
        with wb.device(2):
            pass


def test_virtual_devices_from_the_environment(monkeypatch):
    from workbench.backends.simulator import SimulatorBackend
    monkeypatch.setenv("WORKBENCH_SIM_DEVICES", "3")
    assert SimulatorBackend().device_count() == 3
    monkeypatch.setenv("WORKBENCH_SIM_DEVICES", "lots")
    with pytest.raises(ValueError, match="WORKBENCH_SIM_DEVICES"):
        SimulatorBackend()


def test_one_device_is_unchanged(backend):
    if backend.device_count() != 1:
        pytest.skip("this machine has several GPUs")
    assert len(wb.devices()) == 1
    assert wb.peer_matrix().values == [[True]]


@pytest.mark.gpu
def test_two_gpus_peer_copy(backend):
    if backend.simulated:
        pytest.skip("the two-GPU test runs on a GPU backend")
    if backend.device_count() < 2:
        pytest.skip(f"needs two GPUs; this machine has {backend.device_count()}")
    n = 1 << 20
    data = np.random.default_rng(5).standard_normal(n).astype(np.float32)
    x0 = wb.to_device(data)
    with wb.device(1):
        x1 = wb.allocate((n,), np.float32)
        s1 = wb.Stream()
    wb.copy(x1, x0, stream=s1, sync=True)        # device 0 current: queued from device 1
    np.testing.assert_array_equal(wb.to_host(x1), data)
    wb.copy(x0, x1)                               # and back on device 0's default stream
    e1 = s1.record()                              # an event of device 1
    with pytest.raises(wb.WorkbenchError, match="device"):
        e1.record()                               # no stream: device 1's current one, fine ...
        wb.Event(device=0).record(s1)             # ... but not device 0's event on s1
    assert e1.device == 1
    log = wb.timings()                            # events went back to their own pools:
    k = wb.compile(SOURCE, name="two_gpus")["fill"]
    for _ in range(3):                            # launches on both devices still record them
        k(x0, 1.0, n, n=n)
        with wb.device(1):
            wb.memset(x1, 0)
    wb.synchronize()
    assert set(wb.timings().iloc[len(log):]["device"]) == {0, 1}
    bw = wb.peer_bandwidth(nbytes=16 << 20, repeat=3)
    assert bw[0, 1] > 1.0 and bw[1, 0] > 1.0


def test_the_cell_level_graph_magic(shell, backend):
    shell.user_ns["np"] = np
    shell.run_cell('import workbench as wb\n'
                   'k = wb.compile(r"""extern "C" __global__ void inc(float* x, int n) {'
                   ' int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }""")["inc"]\n'
                   'x = wb.to_device(np.zeros(64, np.float32))').raise_error()
    shell.run_cell("%%cuda_graph g\nfor _ in range(3):\n    k(x, 64, grid=1, block=64)\n").raise_error()
    g = shell.user_ns["g"]
    assert len(g) == 3 and not wb.to_host(shell.user_ns["x"]).any()   # captured only
    g.launch(sync=True)
    np.testing.assert_array_equal(wb.to_host(shell.user_ns["x"]), np.full(64, 3, np.float32))
    failed = shell.run_cell("%%cuda_graph h\nraise ValueError('in the cell')\n")
    assert isinstance(failed.error_in_exec, ValueError) and "h" not in shell.user_ns


def test_the_memory_panel_shows_pinned_and_managed_memory(backend):
    pytest.importorskip("ipywidgets")
    from workbench.widgets.memory_panel import MemoryPanel
    wb.memory.tracking(True)
    h, mm = wb.pinned((1024,), np.float32), wb.managed((2048,), np.float32)
    d = wb.allocate((4096,), np.float32)
    panel = MemoryPanel(auto_refresh=False, top_n=20)
    try:
        kinds = {r["kind"]: r for r in panel.get_state()["kinds"]}
        assert kinds["pinned"]["arrays"] >= 1 and kinds["managed"]["arrays"] >= 1
        assert "pinned" in panel._snapshot_html() and "managed" in panel._snapshot_html()
        assert {"pinned", "managed", "device"} <= {r["kind"] for r in panel.top_live}
    finally:
        panel.close()
    del h, mm, d


def test_the_timeline_defaults_to_the_last_cell_that_queued_work(shell, backend):
    shell.user_ns["np"] = np
    shell.run_cell("pass", store_history=True)   # a cell number of its own from here on
    shell.run_cell('import workbench as wb\n'
                   'x = wb.to_device(np.zeros(64, np.float32))\n'
                   'wb.memset(x, 1, stream=wb.Stream(name="only"))', store_history=True).raise_error()
    shell.run_cell("t = wb.timeline()", store_history=True).raise_error()  # queues nothing
    t = shell.user_ns["t"]
    assert [iv.name for iv in t.intervals] == ["to_device H2D", "memset"]
    assert t.lanes == ["default", "only"]
