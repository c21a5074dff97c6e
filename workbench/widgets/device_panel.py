"""``wb.DevicePanel()``: every device's properties and live statistics, with a
short history plot, refreshed in the background.

The refresh runs on a daemon thread (:class:`workbench.hardware.live.LiveMonitor`),
so the panel keeps updating while a long cell runs, and the kernel stays
responsive. ``panel.close()`` (or the Stop button, or closing the panel in the
front end) ends it.

Threads never pile up: there is one monitor per set of devices, shared by the
panels of those devices, and only the newest running panel is fed by it;
building a new panel (re-running ``p = wb.DevicePanel()``) stops the previous
one (its Run button takes the monitor back). The monitor holds its panel
through a weak reference, so a panel that is dropped stops being called and
the thread ends.
"""
from __future__ import annotations

import collections
import html
import threading
import time
import weakref

import ipywidgets as widgets
from traitlets import Bool, Dict, Float, Int, List, TraitError, Unicode, observe, validate

from ..hardware import live
from ..hardware.properties import devices
from ..present.figures import figure_png, new_figure
from ..present.tables import html_fields
from ..runtime.session import backend

MIN_INTERVAL = 0.1  # seconds; faster sampling only measures NVML itself
PLOT_EVERY = 1.0    # seconds between history-plot redraws (a PNG render costs ~50 ms)


# (backend name, device indices) -> the one monitor sampling them, and the
# panel it feeds now (a weak reference)
_MONITORS: dict[tuple, live.LiveMonitor] = {}
_OWNERS: dict[tuple, weakref.ref] = {}


def _shared_monitor(key: tuple, interval: float, history: int) -> live.LiveMonitor:
    monitor = _MONITORS.get(key)
    if monitor is None:
        monitor = _MONITORS[key] = live.LiveMonitor(key[1], interval=interval, history=history)
    return monitor


def _owner(key: tuple):
    ref = _OWNERS.get(key)
    return ref() if ref is not None else None


def _history_png(history: dict, simulated: bool) -> bytes:
    """Utilisation and memory use over time, one line per device, as PNG."""
    fig = new_figure((6.4, 2.2))
    ax_util, ax_mem = fig.subplots(1, 2)
    for index, samples in history.items():
        if not samples:
            continue
        t0 = samples[-1].time
        ts = [s.time - t0 for s in samples]
        util = [float(s.gpu_utilization) for s in samples]
        mem = [100.0 * float(s.memory_used) / float(s.memory_total) if s.memory_total else float("nan")
               for s in samples]
        ax_util.plot(ts, util, label=f"GPU {index}")
        ax_mem.plot(ts, mem, label=f"GPU {index}")
    for ax, title in ((ax_util, "utilisation (%)"), (ax_mem, "memory used (%)")):
        ax.set_ylim(0, 100)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("seconds", fontsize=8)
        ax.tick_params(labelsize=7)
    if simulated:
        ax_util.text(0.5, 0.5, "N/A on the simulator", ha="center", va="center",
                     transform=ax_util.transAxes, fontsize=8, color="0.4")
    if len(history) > 1:
        ax_mem.legend(fontsize=7)
    return figure_png(fig)


class DevicePanel(widgets.VBox):
    """Properties and live statistics of every device of the active backend.

    ``interval`` is the refresh period in seconds; ``history`` how many
    samples per device the plot keeps. Without NVML (or on the simulator)
    the static properties still show and live figures read N/A.
    """

    devices = List(Dict(), help="wb.devices() as plain values, one dict per device").tag(sync=True)
    stats = Dict(help="The latest live sample per device index (str), as plain values").tag(sync=True)
    samples = Int(0, help="Rounds of samples taken so far").tag(sync=True)
    interval = Float(1.0, help="Seconds between refreshes (>= 0.1)").tag(sync=True)
    running = Bool(False, help="True while the background refresh runs").tag(sync=True)
    history_size = Int(120, help="Samples per device kept for the history plot").tag(sync=True)
    simulated = Bool(False, help="True when the device is the simulator's virtual GPU").tag(sync=True)
    note = Unicode("", help="Why live figures are missing, if they are").tag(sync=True)

    def __init__(self, interval: float = 1.0, history: int = 120, start: bool = True, **kwargs):
        super().__init__(**kwargs)
        b = backend()
        infos = devices()
        self._lock = threading.Lock()
        self._last_plot = 0.0
        self._properties = widgets.HTML(infos._repr_html_())
        self._live = widgets.HTML()
        self._plot = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self._interval_box = widgets.BoundedFloatText(value=interval, min=MIN_INTERVAL, max=3600.0,
                                                      step=0.5, description="refresh (s)",
                                                      layout=widgets.Layout(width="180px"))
        self._toggle = widgets.ToggleButton(value=False, description="Run", icon="play",
                                            layout=widgets.Layout(width="90px"))
        widgets.link((self._interval_box, "value"), (self, "interval"))
        widgets.link((self._toggle, "value"), (self, "running"))
        header = widgets.HTML(f"<b>{html.escape(b.describe())}</b>")
        properties = widgets.Accordion(children=[self._properties], titles=("Properties",))
        self.children = [header, widgets.HBox([self._toggle, self._interval_box]),
                         self._live, self._plot, properties]
        with self.hold_sync():
            self.simulated = bool(b.simulated)
            self.devices = [d.to_dict() for d in infos]
            self.history_size = history
            self.interval = interval
        self._key = (b.name, tuple(d.index for d in infos))
        self._monitor = _shared_monitor(self._key, self.interval, history)
        self.running = start          # takes the monitor from the previous panel
        self.refresh()                # show figures at once
        if self.comm is not None:
            self.comm.on_close(_close_on_comm_close(self))

    # -- traits --------------------------------------------------------------
    @validate("interval")
    def _check_interval(self, proposal):
        value = proposal["value"]
        if not value >= MIN_INTERVAL:
            raise TraitError(f"interval is in seconds and must be >= {MIN_INTERVAL}, got {value!r}")
        return value

    @observe("interval")
    def _interval_changed(self, change):
        if self._owns_monitor():
            self._monitor.interval = change["new"]

    @observe("running")
    def _running_changed(self, change):
        if getattr(self, "_monitor", None) is None:
            return
        if change["new"]:
            self._take_monitor()
        else:
            self._release_monitor()
        self._toggle.description = "Stop" if change["new"] else "Run"
        self._toggle.icon = "stop" if change["new"] else "play"

    # -- the shared monitor ---------------------------------------------------
    def _owns_monitor(self) -> bool:
        return getattr(self, "_monitor", None) is not None and _owner(self._key) is self

    def _take_monitor(self) -> None:
        """Become the panel the monitor feeds; the previous one stops."""
        previous = _owner(self._key)
        if previous is self:
            self._monitor.start()
            return
        monitor = self._monitor
        monitor.stop()                 # the previous panel gets no more samples
        _OWNERS[self._key] = weakref.ref(self)
        if previous is not None:
            monitor.remove_listener(previous._on_samples)
            previous.running = False   # it no longer owns the monitor: only its button changes
            previous._live.value += ("<div><i>stopped: a newer DevicePanel shows these devices "
                                     "(press Run there, or here to switch back)</i></div>")
        monitor.interval = self.interval
        if any(h.maxlen != self.history_size for h in monitor.history.values()):
            monitor.history = {i: collections.deque(h, maxlen=self.history_size)
                               for i, h in monitor.history.items()}
        monitor.add_listener(self._on_samples, weak=True)  # a dropped panel is not kept alive
        monitor.start()

    def _release_monitor(self) -> None:
        if self._owns_monitor():
            self._monitor.stop()
            self._monitor.remove_listener(self._on_samples)
            _OWNERS.pop(self._key, None)

    # -- refresh ----------------------------------------------------------------
    def _on_samples(self, samples: dict) -> None:
        """Called on the monitor's thread with ``{index: LiveStats}``."""
        if not samples:
            return
        with self._lock:
            if self.simulated:
                note = "simulated device: only memory use is live"
            elif live.nvml_unavailable_reason():
                note = f"NVML unavailable: {live.nvml_unavailable_reason()}"
            else:
                note = ""
            png = None
            now = time.monotonic()
            if now - self._last_plot >= PLOT_EVERY:
                self._last_plot = now
                png = _history_png(self.history, self.simulated)
            with self.hold_sync():
                self.note = note
                self.stats = {str(i): s.to_dict() for i, s in samples.items()}
                self.samples = self.samples + 1
            self._live.value = self._live_table(samples)
            if png is not None:
                self._plot.value = png

    def _live_table(self, samples: dict) -> str:
        labels = next(iter(samples.values())).formatted().keys()
        cols = {i: s.formatted() for i, s in samples.items()}
        stamp = time.strftime("%H:%M:%S", time.localtime(next(iter(samples.values())).time))
        return html_fields([(label, *(c[label] for c in cols.values())) for label in labels],
                           header=[f"live ({stamp})", *(f"GPU {i}" for i in cols)],
                           notes=[self.note] if self.note else ())

    @property
    def history(self) -> dict:
        """``{index: [LiveStats, ...]}``: the samples the plot shows."""
        return {i: list(h) for i, h in self._monitor.history.items()}

    def refresh(self) -> None:
        """Take a sample now (on the calling thread) and show it."""
        samples = self._monitor.sample_once()   # feeds the panel that owns the monitor
        if not self._owns_monitor():
            self._on_samples(samples)

    def stop(self) -> None:
        """Stop the background refresh (the panel stays)."""
        self.running = False

    def close(self) -> None:
        """Stop the background refresh and remove the panel."""
        if getattr(self, "_monitor", None) is not None:
            self.running = False
            self._release_monitor()
        super().close()


def _close_on_comm_close(panel: DevicePanel):
    """A comm ``on_close`` callback closing ``panel`` (without keeping it alive)."""
    ref = weakref.ref(panel)

    def on_close(_msg) -> None:
        target = ref()
        if target is not None:
            target.close()
    return on_close
