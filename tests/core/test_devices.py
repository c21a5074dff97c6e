"""Devices, live statistics, the device magic and the panels, on every backend
(the simulator's virtual H100 here, the real GPU on the device)."""
from __future__ import annotations

import logging
import math
import threading
import time

import numpy as np
import pytest

import workbench as wb
from workbench.hardware import live
from workbench.present.na import NA, is_na

from helpers import using_backend

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

# 4 KiB of static shared memory: the shared-memory limit shows in its occupancy
TILED = r"""
extern "C" __global__ void tiled(const float* x, float* y, int n) {
    __shared__ float tile[1024];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x % 1024] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = tile[(threadIdx.x + 1) % blockDim.x % 1024];
}
"""


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


# -- NA ----------------------------------------------------------------------

def test_na_prints_as_na_and_acts_like_nan():
    assert str(NA) == "N/A" and f"{NA}" == "N/A"
    assert not NA
    assert math.isnan(NA + 1) and math.isnan(2 * NA) and math.isnan(float(NA))
    assert not (NA > 0) and not (NA < 0)
    assert is_na(NA) and is_na(None) and is_na(float("nan")) and not is_na(0)


# -- imports -------------------------------------------------------------------

def _run_python(code: str, **env) -> str:
    import os
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_device_modules_import_no_jupyter_plotting_or_nvml():
    loaded = _run_python(
        "import sys\n"
        "import workbench.hardware.properties, workbench.hardware.occupancy\n"
        "import workbench.hardware.inspect, workbench.hardware.live\n"
        "print(sorted(m for m in ('IPython', 'ipywidgets', 'matplotlib', 'pynvml') if m in sys.modules))")
    assert loaded == "[]"


def test_wb_devices_is_callable_after_its_package_is_imported():
    # importing a hardware submodule must leave `wb.devices` the function
    out = _run_python("import workbench as wb, workbench.hardware.live\n"
                      "print(len(wb.devices()), wb.devices()[0].simulated)",
                      WORKBENCH_BACKEND="simulator")
    assert out == "1 True"


# -- devices -------------------------------------------------------------------

def test_devices_carry_the_backend_properties(backend):
    found = wb.devices()
    assert len(found) == backend.device_count() >= 1
    for info in found:
        p = backend.device_properties(info.index)
        assert info.name == p.name
        assert info.compute_capability == f"{p.compute_capability[0]}.{p.compute_capability[1]}"
        assert info.multiprocessors == p.multiprocessors
        assert info.total_memory == p.total_memory
        assert info.shared_memory_per_block_optin == p.shared_memory_per_block_optin
        assert info.shared_memory_per_multiprocessor == p.shared_memory_per_multiprocessor
        assert info.max_blocks_per_multiprocessor == p.max_blocks_per_multiprocessor
        assert info.simulated == backend.simulated
        # every figure is a value or NA: never None, never an exception
        assert all(v is not None for v in info.to_dict().values())


def test_devices_table_shows_missing_values_as_na(backend):
    found = wb.devices()
    table = found.to_pandas()
    assert list(table.index) == list(range(backend.device_count()))
    text = repr(found)
    assert found[0].name in text and "Shared memory per block (opt-in)" in text
    if backend.simulated:  # the virtual device has no display driver or PCIe link
        assert found[0].driver_version is NA and found[0].pcie_link is NA
        assert "N/A" in text


def test_device_chooses_and_rejects_bad_indices(backend):
    count = backend.device_count()
    info = wb.device(count - 1)
    assert backend.current_device() == count - 1 and info.index == count - 1
    with pytest.raises(wb.WorkbenchError, match=f"has {count} device"):
        wb.device(count)
    with pytest.raises(wb.WorkbenchError, match="pass an index"):
        wb.device("0")
    wb.device(0)


def test_cuda_device_magic(backend, shell, capsys):
    shell.run_line_magic("cuda_device", "0")
    assert f"Using device 0: {wb.devices()[0].name}" in capsys.readouterr().out
    with pytest.raises(wb.WorkbenchError, match="No device 99"):
        shell.run_line_magic("cuda_device", "99")


# -- live statistics -------------------------------------------------------------

def test_live_stats_memory_matches_the_backend(backend):
    stats = live.live_stats()
    free, total = backend.memory_info()
    # NVML counts the whole framebuffer, CUDA what is left for contexts: close, not equal
    assert stats.memory_total == pytest.approx(total, rel=0 if backend.simulated else 0.05)
    if backend.simulated:
        assert stats.source == "simulator"
        assert stats.memory_used == total - free
        assert stats.gpu_utilization is NA and stats.power_w is NA
    else:
        assert stats.memory_used <= total


def test_missing_nvml_logs_one_hint(monkeypatch, caplog):
    import pynvml

    def no_library():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", no_library)
    monkeypatch.setattr(live, "_nvml_ready", None)
    monkeypatch.setattr(live, "_handles", {})
    with caplog.at_level(logging.WARNING, logger="workbench.hardware"):
        assert live.nvml_available() is False
        assert live.nvml_available() is False
        assert live.nvml_handle(0) is None
        assert live.driver_version() is NA
    hints = [r for r in caplog.records if r.getMessage().startswith("HINT:")]
    assert len(hints) == 1 and "N/A" in hints[0].getMessage()


def test_monitor_samples_in_the_background_and_stops(backend):
    monitor = live.LiveMonitor([0], interval=0.05, history=5)
    rounds = []
    monitor.add_listener(rounds.append)
    with monitor:
        assert monitor.running
        assert wait_for(lambda: len(rounds) >= 7)
    assert not monitor.running
    assert len(monitor.history[0]) == 5  # only the last `history` samples are kept
    times = [s.time for s in monitor.history[0]]
    assert times == sorted(times)
    settled = len(rounds)
    time.sleep(0.2)
    assert len(rounds) == settled
    with pytest.raises(ValueError, match="interval"):
        live.LiveMonitor([0], interval=0)


# -- panels ------------------------------------------------------------------------

def test_device_panel_state_carries_devices_and_live_stats(backend):
    panel = wb.DevicePanel(interval=0.1)
    try:
        state = panel.get_state()
        assert state["devices"] == [d.to_dict() for d in wb.devices()]
        assert state["simulated"] == backend.simulated
        assert state["running"] is True
        assert set(state["stats"]) == {str(i) for i in range(backend.device_count())}
        assert state["stats"]["0"]["memory_total"] == pytest.approx(
            backend.memory_info()[1], rel=0 if backend.simulated else 0.05)
        first = state["samples"]
        assert wait_for(lambda: panel.samples >= first + 3)  # refreshed in the background
        assert "<svg" in panel._charts.value
    finally:
        panel.close()
    assert not panel._monitor.running and panel.running is False
    settled = panel.samples
    time.sleep(0.3)
    assert panel.samples == settled


def test_device_panel_rejects_a_bad_interval(backend):
    from traitlets import TraitError
    panel = wb.DevicePanel(interval=1.0, start=False)
    try:
        assert panel.running is False
        with pytest.raises(TraitError, match="interval"):
            panel.interval = 0.0
        panel.interval = 0.5
        panel.running = True      # the monitor samples at the interval of the panel it feeds
        assert panel._monitor.interval == 0.5
        panel.interval = 0.25
        assert panel._monitor.interval == 0.25
    finally:
        panel.close()


_EARLIER_THREADS: set = set()   # sampler threads of other tests' panels, if any were left


def _sampler_threads() -> list:
    """Live-stats threads running now, those of earlier tests left out."""
    return [t for t in threading.enumerate() if t.name == "workbench-live-stats"
            and t.is_alive() and t not in _EARLIER_THREADS]


def test_device_panels_share_one_thread_and_all_keep_updating(backend):
    _EARLIER_THREADS.update(_sampler_threads())
    dropped = wb.DevicePanel(interval=0.1)
    dropped.close()
    panels = [wb.DevicePanel(interval=0.1) for _ in range(3)]
    try:
        assert len(_sampler_threads()) == 1
        assert [p.running for p in panels] == [True, True, True]   # a new panel stops none
        first = [p.samples for p in panels]
        assert wait_for(lambda: all(p.samples >= f + 3 for p, f in zip(panels, first)))
        panels[1].stop()                          # Stop keeps the panel and its figures
        stopped = panels[1].samples
        assert wait_for(lambda: panels[0].samples >= first[0] + 6)
        assert panels[1].samples == stopped and panels[1]._live.value
        panels[0].close()
        panels[2].close()
        assert _sampler_threads() == []           # the last running panel ends the thread
        panels[1].running = True
        assert len(_sampler_threads()) == 1
    finally:
        for p in panels:
            p.close()
    assert _sampler_threads() == []


def test_simulator_device_panel_shows_the_simulators_own_figures(backend):
    if not backend.simulated:
        pytest.skip("the simulator's figures; a GPU shows NVML's")
    kernel = wb.compile(TILED, name="test-devices-busy")["tiled"]
    x = wb.to_device(np.ones(1 << 12, np.float32))
    y = wb.xp.zeros_like(x)
    panel = wb.DevicePanel(interval=0.2)
    try:
        assert wait_for(lambda: panel.samples >= 2)
        for _ in range(20):
            kernel(x, y, x.size, grid=8, block=128)
        launched = panel.samples
        assert wait_for(lambda: panel.samples >= launched + 1)
        activity = panel.activity
        assert activity["threads"] >= 1
        assert activity["in_use"] >= x.nbytes
        text = panel._live.value
        for row in ("Worker threads", "Worker busy", "Launches per second", "In use", "Cached"):
            assert row in text
        assert "N/A" not in text                    # nothing it cannot report is listed
        assert "temperature" in panel.note and "need a GPU" in panel.note
        assert wait_for(lambda: "<svg" in panel._charts.value, timeout=10)
        assert "worker busy (%)" in panel._charts.value
    finally:
        panel.close()


def test_closing_the_panel_in_the_front_end_stops_its_thread(backend):
    panel = wb.DevicePanel(interval=0.1)
    assert panel.running and len(_sampler_threads()) == 1
    panel.comm.handle_close({"content": {"data": {}}})   # what the kernel does on comm_close
    assert panel.running is False and panel.comm is None
    assert _sampler_threads() == []


def test_a_weak_listener_that_is_collected_ends_the_monitor_thread(backend):
    import gc

    rounds = []

    class Listener:
        def on_samples(self, samples):
            rounds.append(samples)

    listener = Listener()
    monitor = live.LiveMonitor([0], interval=0.05)
    monitor.add_listener(listener.on_samples, weak=True)
    monitor.start()
    try:
        assert wait_for(lambda: len(rounds) >= 2)
        del listener
        gc.collect()
        assert wait_for(lambda: not monitor.running, timeout=5)
        assert monitor.listeners == []
    finally:
        monitor.stop()


@pytest.fixture
def tiled(backend):
    return wb.compile(TILED, name="test-devices-tiled")["tiled"]


def test_kernel_panel_state_carries_the_occupancy(tiled):
    panel = wb.KernelPanel(tiled, block=128, shared_mem=2048)
    try:
        state = panel.get_state()
        assert state["kernel_name"] == "tiled"
        assert state["resources"]["registers"] == tiled.resources.registers
        assert state["resources"]["static_shared"] == 4096
        assert state["occupancy"] == wb.occupancy(tiled, block=128, shared_mem=2048).to_dict()
        panel.block = 512
        panel.shared_mem = 40 * 1024
        expected = wb.occupancy(tiled, block=512, shared_mem=40 * 1024)
        assert panel.get_state()["occupancy"] == expected.to_dict()
        assert b"<svg" in bytes(panel._chart.value)
    finally:
        panel.close()


def test_kernel_occupancy_uses_the_active_device(tiled, backend):
    props = backend.device_properties()
    occ = tiled.occupancy(block=256, shared_mem=1000)
    same = wb.occupancy(tiled.resources, block=256, shared_mem=1000, device=props)
    assert occ.active_blocks == same.active_blocks and occ.binding == same.binding
    # 4096 static + 1000 dynamic + 1 KiB reserve -> 6144 B; the SM's shared memory divides it
    reserve = props.extra.get("reservedSharedMemPerBlock", 1024)
    per_block = -(-(4096 + 1000 + reserve) // 128) * 128
    assert occ.limits["shared memory"] == props.shared_memory_per_multiprocessor // per_block


def test_result_tables_look_alike(tiled, backend):
    occ = wb.occupancy(tiled, block=256)
    found = wb.devices()
    tables = {"devices": found._repr_html_(), "device": found[0]._repr_html_(),
              "live": live.live_stats()._repr_html_(), "occupancy": occ._repr_html_(),
              "sweep": occ.sweep()._repr_html_()}
    for name, text in tables.items():
        assert text.startswith("<div>") and "<table>" in text, name
        assert "<th style='text-align:left'>" in text, name
    assert "<th style='text-align:left'>GPU 0</th>" in tables["devices"]
    assert "Shared memory per block (opt-in)" in tables["devices"]
    if backend.simulated:   # no display driver on the virtual device
        assert ">N/A</td>" in tables["devices"] and ">N/A</td>" in tables["live"]
    assert f"<b>{occ.limit}</b>" in tables["occupancy"]          # the binding limit stands out
    assert f"suggested block size: {occ.suggested_block}" in tables["occupancy"]
    assert occ.summary() in tables["occupancy"]


def test_inspect_reports_resources_and_ptx(tiled):
    import shutil
    report = tiled.inspect()
    assert report.registers == tiled.resources.registers
    assert report.static_shared == 4096
    assert report.max_threads_per_block == tiled.resources.max_threads_per_block
    assert ".entry tiled" in report.kernel_ptx and ".shared" in report.kernel_ptx
    assert "Static shared memory" in repr(report)
    if not (shutil.which("cuobjdump") or shutil.which("nvdisasm")):
        assert report.sass is NA and "cuobjdump" in report.sass_reason
    else:
        assert report.sass is not NA, report.sass_reason
        assert "tiled" in report.sass


def test_dashboard_puts_the_panels_in_tabs(tiled):
    board = wb.dashboard(kernel=tiled, interval=0.5)
    try:
        assert board.titles == ("Device", "Memory", "Kernel", "Benchmarks")
        assert isinstance(board.children[0], wb.DevicePanel)
        assert board.kernel_chooser.panel.kernel_name == "tiled"
        assert board.device_panel.running
    finally:
        board.close()
    assert not board.device_panel._monitor.running


def test_dashboard_that_fails_to_build_leaves_no_thread(tiled, monkeypatch):
    from workbench.widgets import dashboard as dashboard_module

    class Broken(Exception):
        pass

    def failing_chooser(kernel):
        raise Broken("the kernel tab could not be built")
    monkeypatch.setattr(dashboard_module, "KernelChooser", failing_chooser)
    with pytest.raises(Broken):
        wb.dashboard(kernel=tiled, interval=0.1)
    assert _sampler_threads() == []


# -- GPU only -------------------------------------------------------------------

SPIN = r"""
extern "C" __global__ void spin(long long cycles, int* out) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    if (threadIdx.x == 0) out[blockIdx.x] = 1;
}
"""


@pytest.mark.gpu
def test_live_panel_updates_while_a_kernel_runs_in_another_thread():
    with using_backend("cupy") as b:
        if not live.nvml_available():
            pytest.skip(f"NVML unavailable: {live.nvml_unavailable_reason()}")
        spin = wb.compile(SPIN, name="test-devices-spin")["spin"]
        props = b.device_properties()
        out = wb.allocate(props.multiprocessors * 4, "int32")
        cycles = int(3.0 * (props.clock_khz or 1_500_000) * 1000)  # about 3 s at the base clock
        panel = wb.DevicePanel(interval=0.2)
        try:
            before = panel.samples

            def run():
                import cupy
                cupy.cuda.Device(0).use()
                spin(cycles, out, grid=props.multiprocessors * 4, block=128)
                b.synchronize()

            worker = threading.Thread(target=run)
            worker.start()
            worker.join(30)
            assert panel.samples >= before + 5
            busy = [s.gpu_utilization for s in panel.history[0] if s.gpu_utilization is not NA]
            assert max(busy) > 50
        finally:
            panel.close()


@pytest.mark.gpu
def test_gpu_devices_report_driver_capabilities():
    with using_backend("cupy"):
        for info in wb.devices():
            assert info.cooperative_launch in (True, False)
            assert info.managed_memory in (True, False)
            assert info.mapped_host_memory in (True, False)
            assert info.clock_mhz is not NA and info.clock_mhz > 0
            assert info.runtime_version is not NA
            if live.nvml_available():
                assert info.pcie_link.startswith("Gen") and info.driver_version is not NA
            assert isinstance(info.peer_access, tuple)
