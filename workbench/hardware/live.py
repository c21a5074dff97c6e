"""Live device statistics through NVML (``nvidia-ml-py``), and a background
sampler that keeps a short history of them.

NVML is initialised on first use, never at import. Where it is missing (no
driver, no library, the simulator) every figure NVML would give is
:data:`~workbench.present.na.NA` and one ``HINT:`` line is logged, once.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
import weakref
from dataclasses import asdict, dataclass
from typing import Callable

from ..errors import ArgumentValueError
from ..present.na import NA, formatted_fields, or_na
from ..present.tables import html_fields, pandas
from ..present.units import format_bytes
from ..runtime.session import backend

log = logging.getLogger("workbench.hardware")

_NVML_LOCK = threading.Lock()
_nvml_ready: bool | None = None     # None: not tried yet
_nvml_reason = ""
_handles: dict = {}


def _pynvml():
    """The ``pynvml`` module (raises ImportError when it is not installed)."""
    import pynvml  # lazy: optional package, and NVML is initialised only when first asked for
    return pynvml


def nvml_available() -> bool:
    """True when NVML answers; initialises it on the first call. When it does
    not, logs one HINT saying why and what to do."""
    global _nvml_ready, _nvml_reason
    if _nvml_ready is not None:
        return _nvml_ready
    with _NVML_LOCK:
        if _nvml_ready is None:
            try:
                _pynvml().nvmlInit()
                _nvml_ready = True
            except ImportError:
                _nvml_reason = "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
                _nvml_ready = False
            except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded...
                _nvml_reason = f"{exc} (is the NVIDIA driver installed and loaded?)"
                _nvml_ready = False
            if not _nvml_ready:
                log.warning("HINT: NVML is unavailable: %s; live GPU statistics show N/A.",
                            _nvml_reason)
    return _nvml_ready


def nvml_unavailable_reason() -> str:
    """Why NVML is unavailable ('' when it works or was not tried)."""
    return _nvml_reason


def _pci_bus_id(index: int) -> str | None:
    """The PCI bus id of CUDA device ``index`` (CUDA and NVML may number
    devices differently, e.g. under CUDA_VISIBLE_DEVICES)."""
    try:
        extra = backend().device_properties(index).extra
        return (f"{int(extra['pciDomainID']):08X}:{int(extra['pciBusID']):02X}:"
                f"{int(extra['pciDeviceID']):02X}.0")
    except Exception:
        return None


def nvml_handle(index: int):
    """The NVML handle of CUDA device ``index``, or ``None``."""
    if not nvml_available():
        return None
    if index in _handles:
        return _handles[index]
    pynvml = _pynvml()
    handle = None
    bus_id = _pci_bus_id(index)
    try:
        if bus_id is not None:
            handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
    except pynvml.NVMLError:
        handle = None
    if handle is None:
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError:
            handle = None
    _handles[index] = handle
    return handle


def _query(fn, *args, scale=1.0):
    """``fn(*args) * scale``, or NA when NVML cannot give it."""
    pynvml = _pynvml()
    try:
        value = fn(*args)
    except (pynvml.NVMLError, AttributeError):
        return NA
    return value * scale if scale != 1.0 else value


def energy_joules(index: int | None = None) -> float | None:
    """Device ``index``'s energy counter in joules (NVML's total energy
    consumption since the driver loaded: Volta and later), or None where the
    device does not report it (the simulator, older GPUs, no NVML)."""
    b = backend()
    if b.simulated:
        return None
    handle = nvml_handle(b.current_device() if index is None else index)
    if handle is None:
        return None
    value = _query(_pynvml().nvmlDeviceGetTotalEnergyConsumption, handle)  # millijoules
    return None if value is NA else float(value) * 1e-3


def driver_version() -> str:
    """The NVIDIA display driver's version (e.g. ``"580.65.06"``), or NA."""
    if not nvml_available():
        return NA
    value = _query(_pynvml().nvmlSystemGetDriverVersion)
    return value.decode() if isinstance(value, bytes) else value


def pcie_link(index: int) -> dict:
    """``{"generation", "width", "max_generation", "max_width"}`` of the device's
    PCIe link (NA each where NVML cannot tell)."""
    handle = nvml_handle(index)
    if handle is None:
        return dict.fromkeys(("generation", "width", "max_generation", "max_width"), NA)
    pynvml = _pynvml()
    return {"generation": _query(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
            "width": _query(pynvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
            "max_generation": _query(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
            "max_width": _query(pynvml.nvmlDeviceGetMaxPcieLinkWidth, handle)}


@dataclass(frozen=True)
class LiveStats:
    """One sample of a device's state. Units are in the names; NA where
    the driver cannot give a figure. ``source`` says where the figures came
    from: "nvml", "backend" (memory only) or "simulator"."""

    index: int
    time: float                        # seconds since the epoch
    gpu_utilization: object = NA       # percent of time a kernel ran
    memory_utilization: object = NA    # percent of time memory was read or written
    memory_used: object = NA           # bytes
    memory_total: object = NA          # bytes
    sm_clock_mhz: object = NA
    memory_clock_mhz: object = NA
    temperature_c: object = NA
    power_w: object = NA
    power_limit_w: object = NA
    pcie_tx_bytes_per_s: object = NA
    pcie_rx_bytes_per_s: object = NA
    source: str = "none"

    LABELS = {"gpu_utilization": "GPU utilisation (%)", "memory_utilization": "Memory utilisation (%)",
              "memory_used": "Memory taken (all processes)", "memory_total": "Memory total",
              "sm_clock_mhz": "SM clock (MHz)", "memory_clock_mhz": "Memory clock (MHz)",
              "temperature_c": "Temperature (°C)", "power_w": "Power (W)",
              "power_limit_w": "Power limit (W)", "pcie_tx_bytes_per_s": "PCIe TX",
              "pcie_rx_bytes_per_s": "PCIe RX"}

    def to_dict(self) -> dict:
        """Plain values (NA stays the string "N/A"), JSON-safe."""
        return asdict(self)

    def formatted(self) -> dict:
        """Label -> text, as the panels show it."""
        def text_of(key, value):
            if key in ("memory_used", "memory_total"):
                return format_bytes(value)
            if key.startswith("pcie"):
                return f"{format_bytes(value)}/s"
            return f"{value:.1f}" if isinstance(value, float) else str(value)
        return formatted_fields(self, self.LABELS, text_of)

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v}" for k, v in self.formatted().items())
        return f"LiveStats(device {self.index}, {self.source}: {body})"

    def _repr_html_(self) -> str:
        return html_fields(self.formatted().items())

    def to_pandas(self):
        """One row with every field."""
        return pandas().DataFrame([self.to_dict()])


def live_stats(index: int | None = None) -> LiveStats:
    """A sample of device ``index`` (default: the current device) now.

    Safe to call from any thread. On the simulator only memory is known.
    """
    b = backend()
    if index is None:
        index = b.current_device()
    now = time.time()
    if b.simulated:
        free, total = b.memory_info()
        return LiveStats(index, now, memory_used=total - free, memory_total=total, source="simulator")
    handle = nvml_handle(index)
    if handle is None:
        if b.device_count() != 1:  # another thread's current device may differ
            return LiveStats(index, now, source="none")
        free, total = b.memory_info()
        return LiveStats(index, now, memory_used=total - free, memory_total=total, source="backend")
    pynvml = _pynvml()
    util = _query(pynvml.nvmlDeviceGetUtilizationRates, handle)
    mem = _query(pynvml.nvmlDeviceGetMemoryInfo, handle)
    kib = 1024.0  # NVML reports PCIe throughput in KiB/s
    return LiveStats(
        index, now,
        gpu_utilization=NA if util is NA else util.gpu,
        memory_utilization=NA if util is NA else util.memory,
        memory_used=NA if mem is NA else mem.used,
        memory_total=NA if mem is NA else mem.total,
        sm_clock_mhz=_query(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM),
        memory_clock_mhz=_query(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_MEM),
        temperature_c=_query(pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU),
        power_w=_query(pynvml.nvmlDeviceGetPowerUsage, handle, scale=1e-3),
        power_limit_w=_query(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle, scale=1e-3),
        pcie_tx_bytes_per_s=or_na(_query(pynvml.nvmlDeviceGetPcieThroughput, handle,
                                         pynvml.NVML_PCIE_UTIL_TX_BYTES, scale=kib)),
        pcie_rx_bytes_per_s=or_na(_query(pynvml.nvmlDeviceGetPcieThroughput, handle,
                                         pynvml.NVML_PCIE_UTIL_RX_BYTES, scale=kib)),
        source="nvml")


class LiveMonitor:
    """Samples :func:`live_stats` for some devices every ``interval`` seconds
    on a daemon thread, keeping the last ``history`` samples per device and
    calling each listener with every new round of samples.

    The notebook stays responsive: nothing runs on the kernel's main thread.
    ``stop()`` ends the thread (also a context manager). A listener added with
    ``weak=True`` (a bound method) does not keep its object alive; once every
    listener has gone that way, the thread ends by itself.
    """

    def __init__(self, devices=(0,), interval: float = 1.0, history: int = 120,
                 sampler: Callable[[int], LiveStats] = live_stats):
        if interval <= 0:
            raise ArgumentValueError(f"interval is in seconds and must be > 0, got {interval!r}")
        self.devices = tuple(devices)
        self.interval = float(interval)
        self.history = {i: collections.deque(maxlen=history) for i in self.devices}
        self._sampler = sampler
        self._listeners: list = []   # callables, or weakref.WeakMethod of weak listeners
        self._failed: set[int] = set()   # listeners whose failure was reported
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0          # samples that raised (logged, never stop the thread)

    def add_listener(self, callback: Callable[[dict], None], *, weak: bool = False) -> None:
        """Call ``callback({index: LiveStats})`` after each round (on the
        monitor's thread). ``weak=True`` (for a bound method): hold it through
        a weak reference, so that the monitor does not keep its object alive;
        it is dropped when the object is collected."""
        self._listeners.append(weakref.WeakMethod(callback) if weak else callback)

    def remove_listener(self, callback: Callable[[dict], None]) -> None:
        """Stop calling ``callback`` (added weak or not); no-op if absent."""
        self._listeners = [entry for entry in self._listeners
                           if self._resolve(entry) not in (None, callback)]

    @staticmethod
    def _resolve(entry):
        return entry() if isinstance(entry, weakref.WeakMethod) else entry

    @property
    def listeners(self) -> list:
        """The listeners still alive."""
        return [c for c in map(self._resolve, self._listeners) if c is not None]

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def sample_once(self) -> dict:
        """Take one round of samples now (on the calling thread)."""
        samples = {}
        for i in self.devices:
            try:
                samples[i] = self._sampler(i)
            except Exception:  # a failing sample must not kill the monitor
                self.errors += 1
                log.debug("live sample of device %s failed", i, exc_info=True)
                continue
            self.history[i].append(samples[i])
        for entry in list(self._listeners):
            callback = self._resolve(entry)
            if callback is None:   # a weak listener's object is gone
                self._drop_dead(entry)
                continue
            try:
                callback(samples)
            except Exception:
                # once per listener: a panel that fails every second must not fill every
                # cell's output with the same traceback
                if id(entry) not in self._failed:
                    self._failed.add(id(entry))
                    log.exception("a live-stats listener failed (reported once)")
                else:
                    log.debug("a live-stats listener failed again", exc_info=True)
            del callback   # no strong reference to a weak listener between rounds
        return samples

    def _drop_dead(self, entry) -> None:
        self._listeners = [e for e in self._listeners if e is not entry]
        if not self._listeners:    # nobody is listening any more: end the thread
            self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.sample_once()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def start(self) -> "LiveMonitor":
        """Start sampling in the background (no-op when already running)."""
        if not self.running:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="workbench-live-stats",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop sampling and wait for the thread to end."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def __enter__(self) -> "LiveMonitor":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
