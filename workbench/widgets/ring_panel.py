"""A live panel of a ring kernel (:mod:`workbench.rings`): whether it runs,
its queue depth, the answers waiting to be received, and the rate of the
last interval, refreshed by a background thread."""
from __future__ import annotations

import threading
import time
import weakref

import ipywidgets as widgets
import traitlets

from ..benchmarking.result import format_seconds
from ..errors import ArgumentTypeError
from ..present.tables import html_fields
from ..rings import Ring
from .static import StaticFallback, clock, html_part


class RingPanel(StaticFallback, widgets.VBox):
    """``RingPanel(ring, interval=0.5)``: a ring's live figures. The rate is
    answers collected per second over the last interval. The panel follows the
    ring through ``stop()`` and ``start()``; ``stop()`` on the panel ends its
    refresh (it keeps its last figures). It holds the ring weakly, so a ring
    whose object is deleted is still stopped by its finalizer."""

    depth = traitlets.Int(0).tag(sync=True)
    rate = traitlets.Float(0.0).tag(sync=True)
    refreshes = traitlets.Int(0).tag(sync=True)

    def __init__(self, ring, interval: float = 0.5, **kwargs):
        if not isinstance(ring, Ring):
            raise ArgumentTypeError(f"RingPanel shows a ring made by wb.ring(...), got "
                                    f"{type(ring).__name__}: r = wb.ring(source, request=..., "
                                    f"response=...); wb.RingPanel(r)")
        self._ring = weakref.ref(ring)
        self._name = f"ring {ring.name} ({ring.backend.name})"
        self.interval = float(interval)
        self._body = html_part()
        super().__init__(children=[self._body], **kwargs)
        self._lock = threading.Lock()
        self._last = (time.monotonic(), ring.stats().messages)
        self._stop = threading.Event()
        self._stopped_at = None
        self.error = None
        self.refresh()
        self._thread = threading.Thread(target=_refresh_loop, args=(weakref.ref(self),),
                                        name="wb-ring-panel", daemon=True)
        self._thread.start()

    @property
    def ring(self):
        """The ring shown, or None once it is gone."""
        return self._ring()

    def refresh(self) -> None:
        """Read the ring's figures and redraw."""
        ring = self._ring()
        with self._lock:
            if ring is None:
                self._body.value = html_fields([("state", "gone (its object was deleted)")])
                return
            stats = ring.stats()
            now = time.monotonic()
            then, count = self._last
            with self.hold_sync():
                self.depth = ring.depth
                if now > then:
                    self.rate = (stats.messages - count) / (now - then)
                self.refreshes += 1
            self._last = (now, stats.messages)
            self._body.value = self._fields_html(ring, stats)

    def _fields_html(self, ring, stats, at: str | None = None) -> str:
        fields = [("state", "running" if ring.running else "stopped"),
                  ("queue depth (unanswered)", f"{self.depth} of {ring.capacity} slots"),
                  ("answers waiting for recv()", ring.pending),
                  ("messages answered", stats.messages),
                  ("rate, last interval", f"{self.rate:,.0f} messages/s"),
                  ("round trip p50 / p99", f"{format_seconds(stats.percentile(50))} / "
                                           f"{format_seconds(stats.percentile(99))}")]
        if self.error:
            fields.append(("refresh failed", self.error))
        if at is None:
            stopped = getattr(self, "_stopped_at", None)
            at = f"stopped at {clock(stopped)}" if stopped else f"live ({clock()})"
        return html_fields(fields, header=[at, ""])

    def stop(self) -> None:
        """Stop refreshing; the panel shows the figures of that moment,
        "stopped at HH:MM:SS"."""
        stop = getattr(self, "_stop", None)  # (None: __init__ refused its arguments)
        if stop is not None and not stop.is_set():
            stop.set()
            self._stopped_at = time.time()
            try:
                self.refresh()
            except Exception as exc:  # noqa: BLE001 - said in the panel, never raised at the user
                self.error = f"{type(exc).__name__}: {exc}"

    def close(self) -> None:
        self.stop()
        super().close()

    def _snapshot_title(self) -> str:
        return self._name

    def _snapshot_html(self) -> str:
        ring = self._ring()
        if ring is None:
            return self._body.value
        return self._fields_html(ring, ring.stats(), at=f"figures of {clock()}")


def _refresh_loop(panel_ref) -> None:
    """The panel's thread: refresh every interval until the panel is stopped,
    closed or collected, or its ring is gone. It holds the panel only weakly
    between rounds."""
    panel = panel_ref()
    while panel is not None and not panel._stop.wait(panel.interval):
        try:
            panel.refresh()
            panel.error = None
        except Exception as exc:  # noqa: BLE001 - a panel must never take the kernel down
            panel.error = f"{type(exc).__name__}: {exc}"  # shown by the next refresh
        if panel.ring is None:
            break
        interval = panel.interval
        del panel
        panel = panel_ref()
        if panel is None or interval <= 0:
            break
