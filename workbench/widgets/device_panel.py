"""``wb.DevicePanel()``: every device's properties and live statistics, with
short history charts, refreshed in the background.

The refresh runs on a daemon thread (:class:`workbench.hardware.live.LiveMonitor`),
so the panel keeps updating while a long cell runs, and the kernel stays
responsive. ``panel.stop()`` (or the Stop button) pauses it and keeps what
it shows; ``panel.close()`` (or closing the panel in the front end) ends it.

Threads never pile up: there is one monitor per set of devices, shared by
every running panel of those devices (a dashboard's device tab and an
earlier panel both keep updating). The monitor holds its panels through
weak references, so a panel that is dropped stops being called, and the
thread ends with the last one.

On a GPU the live figures come from NVML. The simulator has no NVML; its
panel shows what it does know (its worker's threads and how busy they are,
launches per second, the arena's memory) and names the rows that need a GPU.
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
from ..memory.pool import pool_counts
from ..memory.snapshot import in_use_cached_reserved
from ..present.figures import line_chart_svg
from ..present.tables import html_fields
from ..present.units import format_bytes
from ..runtime.session import backend
from .static import StaticFallback, clock, html_part

MIN_INTERVAL = 0.1  # seconds; faster sampling only measures NVML itself
GIB = 2 ** 30
CHART_AFTER = 4     # samples before the charts show: fewer draw a dot, not a line
#: What the simulator cannot report: NVML's figures, which need a GPU.
GPU_ONLY_ROWS = ("utilisation", "memory utilisation", "clocks", "temperature", "power",
                 "PCIe throughput")

# (backend name, device indices) -> the one monitor sampling them, and the
# running panels it feeds (weakly)
_MONITORS: dict[tuple, live.LiveMonitor] = {}
_RUNNING: dict[tuple, weakref.WeakSet] = {}


def _shared_monitor(key: tuple, interval: float, history: int) -> live.LiveMonitor:
    monitor = _MONITORS.get(key)
    if monitor is None:
        monitor = _MONITORS[key] = live.LiveMonitor(key[1], interval=interval, history=history)
    return monitor


def _running_panels(key: tuple) -> list:
    return list(_RUNNING.get(key, ()))


class _Activity:
    """Rates from a backend's cumulative counters (``Backend.activity()``),
    one row per sample: worker busy (%), launches per second, arena bytes."""

    def __init__(self, b, history: int):
        self._backend = b
        self._last = None
        self.rows: collections.deque = collections.deque(maxlen=history)

    def sample(self, now: float) -> dict | None:
        counters = self._backend.activity()
        if not counters:
            return None
        in_use, cached, reserved = in_use_cached_reserved(pool_counts(self._backend))
        row = {"time": now, "threads": counters.get("threads"),
               "busy": float("nan"), "launches_per_s": float("nan"),
               "in_use": in_use, "cached": cached, "reserved": reserved}
        if self._last is not None and now > self._last[0]:
            then, before = self._last
            wall = now - then
            row["busy"] = min(100.0, 100.0 * (counters["kernel_seconds"] - before["kernel_seconds"])
                              / wall)
            row["launches_per_s"] = (counters["launches"] - before["launches"]) / wall
        self._last = (now, counters)
        self.rows.append(row)
        return row


def _activity_fields(row: dict, total, memory_note: str | None = None) -> list[tuple]:
    busy, rate = row["busy"], row["launches_per_s"]
    return [("Worker threads", str(row["threads"]), "OS threads that run the blocks"),
            ("Worker busy", "—" if busy != busy else f"{busy:.0f}%",
             "share of the last interval a kernel ran"),
            ("Launches per second", "—" if rate != rate else f"{rate:.1f}", ""),
            ("In use", format_bytes(row["in_use"]), "held by live device arrays"),
            ("Cached", format_bytes(row.get("cached")),
             "kept by the pool for reuse: wb.memory.empty_cache() frees it"),
            ("Virtual device memory", format_bytes(total),
             f"the simulated GPU's size, {memory_note}" if memory_note else "the simulated GPU's size")]


class DevicePanel(StaticFallback, widgets.VBox):
    """Properties and live statistics of every device of the active backend.

    ``interval`` is the refresh period in seconds; ``history`` how many
    samples per device the charts keep. Without NVML the static properties
    still show and NVML's figures read N/A; on the simulator the panel shows
    the simulator's own figures instead.
    """

    devices = List(Dict(), help="wb.devices() as plain values, one dict per device").tag(sync=True)
    stats = Dict(help="The latest live sample per device index (str), as plain values").tag(sync=True)
    activity = Dict(help="The simulator's latest figures: threads, busy (%), launches_per_s, "
                         "in_use, reserved (bytes); empty on a GPU").tag(sync=True)
    samples = Int(0, help="Rounds of samples taken so far").tag(sync=True)
    interval = Float(1.0, help="Seconds between refreshes (>= 0.1)").tag(sync=True)
    running = Bool(False, help="True while the background refresh runs").tag(sync=True)
    history_size = Int(120, help="Samples per device kept for the charts").tag(sync=True)
    simulated = Bool(False, help="True when the device is the simulator's virtual GPU").tag(sync=True)
    note = Unicode("", help="Why live figures are missing, if they are").tag(sync=True)

    def __init__(self, interval: float = 1.0, history: int = 120, start: bool = True, **kwargs):
        super().__init__(**kwargs)
        b = backend()
        infos = devices()
        self._backend = b
        self._lock = threading.Lock()
        self._stopped_at = None  # when the refresh was stopped (None: running, or never started)
        self._shown = None  # the samples shown last, and the simulator's row
        self._activity = _Activity(b, history)
        self._properties = html_part(infos._repr_html_())
        self._live = html_part()
        self._charts = widgets.HTML(layout=widgets.Layout(max_width="100%"))
        self._interval_box = widgets.BoundedFloatText(value=interval, min=MIN_INTERVAL, max=3600.0,
                                                      step=0.5, description="refresh (s)",
                                                      layout=widgets.Layout(width="180px"))
        self._toggle = widgets.ToggleButton(value=False, description="Run", icon="play",
                                            layout=widgets.Layout(width="90px"))
        widgets.link((self._interval_box, "value"), (self, "interval"))
        widgets.link((self._toggle, "value"), (self, "running"))
        self._header = widgets.HTML(f"<b>{html.escape(b.describe())}</b>")
        properties = widgets.Accordion(children=[self._properties], titles=("Properties",))
        self.children = [self._header, widgets.HBox([self._toggle, self._interval_box]),
                         self._live, self._charts, properties]
        with self.hold_sync():
            self.simulated = bool(b.simulated)
            self.devices = [d.to_dict() for d in infos]
            self.history_size = history
            self.interval = interval
        self._key = (b.name, tuple(d.index for d in infos))
        self._monitor = _shared_monitor(self._key, self.interval, history)
        self.running = start
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
        if self._is_running():
            self._tune_monitor()

    @observe("running")
    def _running_changed(self, change):
        if getattr(self, "_monitor", None) is None:
            return
        if change["new"]:
            self._stopped_at = None
            self._join_monitor()
        else:
            self._leave_monitor()
            if change["old"] and not getattr(self, "_closing", False):
                # a last sample (rates need two), shown as the figures of the moment it stopped
                self._stopped_at = time.time()
                self.refresh()
        self._toggle.description = "Stop" if change["new"] else "Run"
        self._toggle.icon = "stop" if change["new"] else "play"

    # -- the shared monitor ---------------------------------------------------
    def _is_running(self) -> bool:
        return getattr(self, "_monitor", None) is not None and self in _RUNNING.get(self._key, ())

    def _tune_monitor(self) -> None:
        """The monitor samples as often as its most frequent panel asks and
        keeps as much history as its longest one."""
        panels = _running_panels(self._key)
        if not panels:
            return
        monitor = self._monitor
        monitor.interval = min(p.interval for p in panels)
        keep = max(p.history_size for p in panels)
        if any(h.maxlen != keep for h in monitor.history.values()):
            monitor.history = {i: collections.deque(h, maxlen=keep)
                               for i, h in monitor.history.items()}

    def _join_monitor(self) -> None:
        if self._is_running():
            self._monitor.start()
            return
        _RUNNING.setdefault(self._key, weakref.WeakSet()).add(self)
        self._monitor.add_listener(self._on_samples, weak=True)  # a dropped panel is not kept alive
        self._tune_monitor()
        self._monitor.start()

    def _leave_monitor(self) -> None:
        if not self._is_running():
            return
        _RUNNING[self._key].discard(self)
        self._monitor.remove_listener(self._on_samples)
        if _running_panels(self._key):
            self._tune_monitor()
        else:
            self._monitor.stop()

    # -- refresh ----------------------------------------------------------------
    def _on_samples(self, samples: dict) -> None:
        """Called on the monitor's thread with ``{index: LiveStats}``."""
        if not samples:
            return
        with self._lock:
            now = next(iter(samples.values())).time
            row = self._activity.sample(now)
            if row is not None:
                note = ("simulator: no NVML, so " + ", ".join(GPU_ONLY_ROWS)
                        + " need a GPU; these are the simulator's own figures")
            elif live.nvml_unavailable_reason():
                note = f"NVML unavailable: {live.nvml_unavailable_reason()}"
            else:
                note = ""
            with self.hold_sync():
                self.note = note
                self.stats = {str(i): s.to_dict() for i, s in samples.items()}
                self.activity = {k: (None if isinstance(v, float) and v != v else v)
                                 for k, v in (row or {}).items()}
                self.samples = self.samples + 1
            self._shown = (samples, row)
            self._live.value = self._live_table(samples, row, self._state_header(samples))
            self._charts.value = self._charts_html()

    def _state_header(self, samples: dict) -> str:
        """"live (HH:MM:SS)" while the panel refreshes, "stopped at HH:MM:SS"
        once it stopped, "figures of HH:MM:SS" if it never ran (the time of
        the figures shown)."""
        stamp = clock(next(iter(samples.values())).time)
        if self._stopped_at is not None:
            return f"stopped at {stamp}"
        return f"live ({stamp})" if self._is_running() else f"figures of {stamp}"

    def _live_table(self, samples: dict, row: dict | None, header: str) -> str:
        notes = [self.note] if self.note else ()
        if row is not None:
            total = next(iter(samples.values())).memory_total
            note = self._backend.device_properties().extra.get("memory_note")
            return html_fields(_activity_fields(row, total, note), header=[header, "", ""],
                               notes=notes, align=["right", "left"])
        labels = next(iter(samples.values())).formatted().keys()
        cols = {i: s.formatted() for i, s in samples.items()}
        return html_fields([(label, *(c[label] for c in cols.values())) for label in labels],
                           header=[header, *(f"GPU {i}" for i in cols)], notes=notes,
                           align=["right"] * len(cols))

    def _charts_html(self) -> str:
        """Two small line charts, once a few samples make a line worth reading."""
        span = self.history_size * self.interval
        if self._stopped_at is not None:
            n = len(self._activity.rows) or min((len(h) for h in self.history.values()),
                                                default=0)
            waiting = (f"<p><i>no charts: the panel stopped after {n} sample"
                       f"{'s' if n != 1 else ''} (they need {CHART_AFTER})</i></p>")
        else:
            waiting = (f"<p><i>charts after {CHART_AFTER} samples (one every "
                       f"{self.interval:g} s)</i></p>")
        if self._activity.rows:
            rows = list(self._activity.rows)
            if len(rows) < CHART_AFTER:
                return waiting
            now = rows[-1]["time"]
            busy = {"busy": [(r["time"] - now, r["busy"]) for r in rows]}
            in_use = {"in use": [(r["time"] - now, (r["in_use"] or 0) / 2**20) for r in rows]}
            charts = [line_chart_svg("worker busy (%)", busy, span=span, y_max=100),
                      line_chart_svg("in use (MiB)", in_use, span=span)]
        else:
            history = {i: h for i, h in self.history.items() if len(h) >= CHART_AFTER}
            if not history:
                return waiting
            now = max(h[-1].time for h in history.values())
            util = {f"GPU {i}": [(s.time - now, float(s.gpu_utilization)) for s in h]
                    for i, h in history.items()}
            mem = {f"GPU {i}": [(s.time - now, float(s.memory_used) / GIB) for s in h]
                   for i, h in history.items()}
            top = max(float(h[-1].memory_total) / GIB for h in history.values())
            charts = [line_chart_svg("GPU utilisation (%)", util, span=span, y_max=100),
                      line_chart_svg("memory taken, all processes (GiB)", mem, span=span,
                                     y_max=top if top == top else None)]
        return f"<div style='display:flex;flex-wrap:wrap;gap:12px'>{''.join(charts)}</div>"

    @property
    def history(self) -> dict:
        """``{index: [LiveStats, ...]}``: the samples the charts show."""
        return {i: list(h) for i, h in self._monitor.history.items()}

    def refresh(self) -> None:
        """Take a sample now (on the calling thread) and show it."""
        samples = self._monitor.sample_once()   # feeds the running panels
        if not self._is_running():
            self._on_samples(samples)

    def stop(self) -> None:
        """Stop the background refresh (the panel stays, with its last figures)."""
        self.running = False

    def close(self) -> None:
        """Stop the background refresh and remove the panel."""
        if getattr(self, "_monitor", None) is not None:
            self._closing = True
            self.running = False
            self._leave_monitor()
        super().close()

    # -- static fallback ------------------------------------------------------------
    def _snapshot_title(self) -> str:
        return f"Device panel: {self._backend.describe()}"

    def _snapshot_html(self) -> str:
        shown = getattr(self, "_shown", None)
        if shown is None:
            return self._live.value
        samples, row = shown
        stamp = clock(next(iter(samples.values())).time)
        return self._live_table(samples, row, f"figures of {stamp}")


def _close_on_comm_close(panel: DevicePanel):
    """A comm ``on_close`` callback closing ``panel`` (without keeping it alive)."""
    ref = weakref.ref(panel)

    def on_close(_msg) -> None:
        target = ref()
        if target is not None:
            target.close()
    return on_close
