"""A live panel of a ring kernel (:mod:`workbench.rings`): whether it runs,
its queue depth, the answers waiting to be received, and the rate of the
last interval, refreshed by a background thread."""
from __future__ import annotations

import threading
import time

import ipywidgets as widgets
import traitlets

from ..benchmarking.result import format_seconds
from ..present.tables import html_fields
from .static import StaticFallback, html_part


class RingPanel(StaticFallback, widgets.VBox):
    """``RingPanel(ring, interval=0.5)``: a ring's live figures. The rate is
    answers collected per second over the last interval; ``stop()`` ends the
    refresh (the panel keeps its last figures), as does the ring's own stop."""

    depth = traitlets.Int(0).tag(sync=True)
    rate = traitlets.Float(0.0).tag(sync=True)
    refreshes = traitlets.Int(0).tag(sync=True)

    def __init__(self, ring, interval: float = 0.5, **kwargs):
        self.ring = ring
        self.interval = float(interval)
        self._body = html_part()
        super().__init__(children=[self._body], **kwargs)
        self._last = (time.monotonic(), ring.stats().messages)
        self._stop = threading.Event()
        self.refresh()
        self._thread = threading.Thread(target=self._loop, name="wb-ring-panel", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.refresh()
            except Exception:  # noqa: BLE001 - a panel must never take the kernel down
                pass
            if not self.ring.running:
                break

    def refresh(self) -> None:
        """Read the ring's figures and redraw."""
        stats = self.ring.stats()
        now = time.monotonic()
        then, count = self._last
        with self.hold_sync():
            self.depth = self.ring.depth
            if now > then:
                self.rate = (stats.messages - count) / (now - then)
            self.refreshes += 1
        self._last = (now, stats.messages)
        self._body.value = self._fields_html(stats)

    def _fields_html(self, stats) -> str:
        ring = self.ring
        fields = [("state", "running" if ring.running else "stopped"),
                  ("queue depth (unanswered)", f"{self.depth} of {ring.capacity} slots"),
                  ("answers waiting for recv()", ring.pending),
                  ("messages answered", stats.messages),
                  ("rate, last interval", f"{self.rate:,.0f} messages/s"),
                  ("round trip p50 / p99", f"{format_seconds(stats.percentile(50))} / "
                                           f"{format_seconds(stats.percentile(99))}")]
        return html_fields(fields)

    def stop(self) -> None:
        """Stop refreshing; the panel keeps its last figures."""
        self._stop.set()

    def close(self) -> None:
        self.stop()
        super().close()

    def _snapshot_title(self) -> str:
        return f"ring {self.ring.name} ({self.ring.backend.name})"

    def _snapshot_html(self) -> str:
        return self._body.value
