"""``wb.MemoryPanel()``: device memory at a glance in the notebook.

A bar of in use / cached / free with the pool limit marked, the per-cell
table and the largest live allocations by source line. It refreshes after
every cell (IPython's ``post_run_cell``) and when its Refresh button is
pressed; a refresh only reads counters the tracker keeps, so it never waits
for the device.
"""
from __future__ import annotations

import html
import weakref

import ipywidgets as widgets
from IPython import get_ipython
from traitlets import Bool, Float, Int, List, Unicode

from .. import memory
from ..present.tables import html_table
from ..memory.snapshot import FRAGMENTATION_FROM
from ..present.units import format_bytes, format_fraction
from .static import StaticFallback, html_part

_COLORS = {"in_use": "#d62728", "cached": "#ff9f40", "free": "#c7e9c0"}
_LIVE_KEYS = ("line", "code", "bytes", "count", "held_by", "kind")   # of memory.live_rows()


class MemoryPanel(StaticFallback, widgets.VBox):
    """Device memory panel: bars, per-cell table and top live allocations.

    Every number it shows is a synced trait, so ``panel.get_state()`` holds
    the same values as :func:`workbench.memory.stats` at the last refresh.
    """

    backend_name = Unicode("", help="the backend whose memory is shown").tag(sync=True)
    simulated = Bool(False, help="True when the device is the CPU simulator's").tag(sync=True)
    tracking = Bool(False, help="whether allocations are being tracked").tag(sync=True)
    in_use = Int(None, allow_none=True, help="bytes held by live arrays").tag(sync=True)
    cached = Int(None, allow_none=True,
                 help="bytes the pool keeps in free blocks for reuse").tag(sync=True)
    reserved = Int(None, allow_none=True,
                   help="bytes the pool holds from the device (in use + cached)").tag(sync=True)
    peak = Int(None, allow_none=True, help="most bytes in use since tracking started").tag(sync=True)
    free_blocks = Int(None, allow_none=True, help="free blocks in the pool").tag(sync=True)
    fragmentation = Float(None, allow_none=True,
                          help="1 - largest free block / cached bytes").tag(sync=True)
    limit = Int(None, allow_none=True, help="the pool's cap in bytes (None: none)").tag(sync=True)
    device_free = Int(None, allow_none=True, help="bytes free on the device").tag(sync=True)
    device_total = Int(None, allow_none=True, help="bytes of device memory").tag(sync=True)
    per_cell = List(help="per-cell rows: cell, allocated, freed, alive, net, peak, "
                         "allocations, frees").tag(sync=True)
    top_live = List(help="largest live allocations by line: line, code, bytes, count, "
                         "held_by").tag(sync=True)
    top_n = Int(5, help="how many lines the live table lists").tag(sync=True)
    kinds = List(help="memory by kind: kind, arrays, bytes (device, pinned, managed)").tag(sync=True)
    refreshes = Int(0, help="how many times the panel has refreshed").tag(sync=True)

    def __init__(self, top_n: int = 5, auto_refresh: bool = True, **kwargs):
        self._title = widgets.HTML()
        self._bar = html_part()
        self._cells = html_part()
        self._live = html_part()
        refresh = widgets.Button(description="Refresh", icon="refresh",
                                 tooltip="read the pool and the tracker again")
        empty = widgets.Button(description="Empty cache", icon="trash",
                               tooltip="wb.memory.empty_cache(): give cached blocks back")
        refresh.on_click(lambda _: self.refresh())
        empty.on_click(lambda _: self.empty_cache())
        super().__init__(children=[self._title, self._bar, widgets.HBox([refresh, empty]),
                                   self._cells, self._live], top_n=top_n, **kwargs)
        self._unhook = _hook_post_run_cell(self) if auto_refresh else None
        self.refresh()

    # -- actions ------------------------------------------------------------------
    def refresh(self) -> None:
        """Read :func:`workbench.memory.stats`, the per-cell table and the
        live allocations, and redraw."""
        stats = memory.stats()
        cells = memory.per_cell().records()
        live = memory.live_rows()[:self.top_n]
        kinds = [{"kind": r["kind"], "arrays": r["arrays"], "bytes": r["bytes"]}
                 for r in memory.kinds().records()]
        with self.hold_sync():
            self.kinds = kinds
            self.backend_name = stats.backend
            self.simulated = stats.simulated
            self.tracking = stats.tracking
            for name in ("in_use", "cached", "reserved", "peak", "free_blocks", "fragmentation",
                         "limit", "device_free", "device_total"):
                setattr(self, name, getattr(stats, name))
            self.per_cell = cells
            self.top_live = [{key: row[key] for key in _LIVE_KEYS} for row in live]
            self.refreshes += 1
        self._redraw()

    def empty_cache(self) -> None:
        memory.empty_cache()
        self.refresh()

    def close(self) -> None:
        if self._unhook is not None:
            self._unhook()
            self._unhook = None
        super().close()

    # -- drawing ---------------------------------------------------------------------
    def _redraw(self) -> None:
        self._title.value = f"<b>{html.escape(self._snapshot_title())}</b>"
        self._bar.value = _bar_html(self)
        self._cells.value = _table_html(
            "Per cell", ["cell", "allocated", "freed", "alive", "net"],
            [[_cell_label(r["cell"]), format_bytes(r["allocated"]), format_bytes(r["freed"]),
              format_bytes(r["alive"]), _signed(r["net"])] for r in self.per_cell],
            empty="no cell has allocated device memory yet",
            align=["left", "right", "right", "right", "right"])
        self._live.value = _table_html(
            f"Largest live allocations (top {self.top_n})",
            ["bytes", "count", "kind", "line", "code", "held by"],
            [[format_bytes(r["bytes"]), "—" if r["count"] is None else str(r["count"]),
              r.get("kind", "device"), r["line"] or "—", r["code"] or "—", r["held_by"] or "—"]
             for r in self.top_live],
            empty="no live allocations" if self.tracking else
                  "allocations are not tracked: wb.memory.tracking(True)",
            align=["right", "right", "left", "left", "left", "left"])

    # -- static fallback ------------------------------------------------------------
    def _snapshot_title(self) -> str:
        device = "simulator (virtual device)" if self.simulated else self.backend_name
        state = "tracking on" if self.tracking else "tracking off"
        return f"Device memory: {device}, {state}"

    def _snapshot_html(self) -> str:
        return self._bar.value + self._cells.value + self._live.value


def _hook_post_run_cell(panel: MemoryPanel):
    """Refresh ``panel`` after every cell, without keeping it alive (outside
    IPython: nothing to hook, returns None)."""
    ip = get_ipython()
    if ip is None:
        return None
    ref = weakref.ref(panel)

    def on_post_run_cell(result=None):
        target = ref()
        if target is None:
            ip.events.unregister("post_run_cell", on_post_run_cell)
            return
        try:
            target.refresh()
        except Exception as exc:  # say so in the panel; never fail the user's cell
            target._title.value = f"<b>Device memory</b>: refresh failed: {html.escape(str(exc))}"

    ip.events.register("post_run_cell", on_post_run_cell)

    def unhook():
        try:
            ip.events.unregister("post_run_cell", on_post_run_cell)
        except ValueError:
            pass
    return unhook


def _cell_label(cell) -> str:
    return "-" if cell is None else str(cell)


def _signed(n) -> str:
    return "running" if n is None else ("+" if n > 0 else "") + format_bytes(n)


def _bar_html(p: MemoryPanel) -> str:
    """One stacked bar: in use, cached, free; the pool limit as a black tick."""
    scale = p.device_total or max(p.reserved or 0, p.limit or 0, 1)
    in_use, cached = p.in_use or 0, p.cached or 0
    # the pool's share is never "free"; clamping keeps the bar within 100% even
    # when the driver's free figure and the pool's counts were read apart
    free = max(scale - in_use - cached, 0)
    if p.device_free is not None:
        free = min(p.device_free, free)
    parts = [("in_use", in_use, "in use"), ("cached", cached, "cached"), ("free", free, "free")]
    segments = "".join(
        f"<div title='{label} {format_bytes(n)}' style='width:{100 * n / scale:.3f}%;"
        f"background:{_COLORS[key]}'></div>" for key, n, label in parts if n > 0)
    limit = ""
    if p.limit is not None and p.limit <= scale:
        limit = (f"<div title='pool limit {format_bytes(p.limit)}' style='position:absolute;"
                 f"left:{100 * p.limit / scale:.3f}%;top:-3px;bottom:-3px;width:2px;"
                 f"background:#000'></div>")
    legend = " &nbsp; ".join(
        f"<span style='color:{_COLORS[key]}'>&#9632;</span> {label} {format_bytes(n)}"
        for key, n, label in parts)
    fragmentation = (f" &nbsp; fragmentation {format_fraction(p.fragmentation)}"
                     if (p.cached or 0) >= FRAGMENTATION_FROM and p.fragmentation is not None
                     else "")
    extra = (f"reserved {format_bytes(p.reserved)} &nbsp; peak {format_bytes(p.peak)} &nbsp; "
             f"limit {'none' if p.limit is None else format_bytes(p.limit)} &nbsp; "
             f"device {format_bytes(p.device_total)}{fragmentation}")
    others = [r for r in p.kinds if r["kind"] != "device" and r["arrays"]]
    if others:  # pinned host and managed arrays (wb.pinned, wb.managed), outside the bar
        extra += "<br>" + " &nbsp; ".join(
            f"{r['kind']} {format_bytes(r['bytes'])} in {r['arrays']} array"
            f"{'s' if r['arrays'] != 1 else ''}" for r in others)
    return (f"<div style='position:relative;display:flex;height:18px;border:1px solid #888;"
            f"margin:4px 0'>{segments}{limit}</div><div style='font-size:90%'>{legend}<br>"
            f"{extra}</div>")


def _table_html(title: str, headers: list[str], rows: list[list[str]], *, empty: str,
                align: list[str]) -> str:
    if not rows:
        return f"<p><b>{html.escape(title)}</b>: {html.escape(empty)}</p>"
    return html_table(rows, headers, title=title, align=align)
