"""What a ring measured: messages answered, rate, and latency percentiles
from host timestamps (send to receive) and device timestamps (the handler's
own time, ``%globaltimer``)."""
from __future__ import annotations

import numpy as np

from ..benchmarking.result import format_seconds
from ..present.figures import figure_axes, legend_outside
from ..present.tables import html_fields, pandas

PERCENTILES = (50, 90, 99)


class RingStats:
    """A ring's figures since it started (or since ``reset_stats``).

    ``host_latency`` holds each answered message's round trip seen by the
    host (send to receive, seconds; a batch's messages share their send and
    receive times); ``device_time`` the handler's time on the device
    (seconds). ``seconds`` is the wall time from the first send to the last
    receive.
    """

    def __init__(self, name: str, backend: str, host_latency: np.ndarray,
                 device_time: np.ndarray, seconds: float, threads: int, capacity: int):
        self.name = name
        self.backend = backend
        self.host_latency = host_latency
        self.device_time = device_time
        self.seconds = seconds
        self.threads = threads
        self.capacity = capacity

    @property
    def messages(self) -> int:
        return int(self.host_latency.size)

    @property
    def rate(self) -> float:
        """Messages answered per second (NaN before any)."""
        return self.messages / self.seconds if self.seconds > 0 else float("nan")

    def percentile(self, q: float, device: bool = False) -> float:
        """Latency percentile ``q`` in seconds (``device=True``: handler time)."""
        values = self.device_time if device else self.host_latency
        return float(np.percentile(values, q)) if values.size else float("nan")

    @property
    def p50(self) -> float:
        return self.percentile(50)

    @property
    def p99(self) -> float:
        return self.percentile(99)

    def _fields(self):
        rate = f"{self.rate / 1e6:.3g} M messages/s" if self.messages else "N/A"
        fields = [("messages answered", self.messages), ("rate", rate)]
        for q in PERCENTILES:
            fields.append((f"round trip p{q} (host)",
                           format_seconds(self.percentile(q)) if self.messages else "N/A"))
        for q in PERCENTILES:
            fields.append((f"handler p{q} (device)",
                           format_seconds(self.percentile(q, True)) if self.messages else "N/A"))
        fields.append(("threads serving", self.threads))
        fields.append(("queue slots", self.capacity))
        return fields

    def __repr__(self) -> str:
        parts = ", ".join(f"{k}={v}" for k, v in self._fields()[:5])
        return f"<RingStats {self.name} on {self.backend}: {parts}>"

    def _repr_html_(self) -> str:
        return html_fields(self._fields(), title=f"ring {self.name} ({self.backend})")

    def to_pandas(self):
        """One row per figure: ``figure``, ``value`` (seconds for latencies)."""
        rows = [("messages", self.messages), ("rate_per_s", self.rate),
                ("seconds", self.seconds)]
        rows += [(f"host_p{q}_s", self.percentile(q)) for q in PERCENTILES]
        rows += [(f"device_p{q}_s", self.percentile(q, True)) for q in PERCENTILES]
        return pandas().DataFrame(rows, columns=["figure", "value"])

    def histogram(self, ax=None, bins: int = 50):
        """A histogram of the host round trips and the handlers' device times
        (µs, log-scaled counts) on one set of bins, log-spaced when they span
        more than a decade, so that every series has visible bars; the host
        round trip's p50 and p99 marked."""
        fig, ax = figure_axes(ax)
        if self.messages:
            series = [(np.asarray(values, dtype=np.float64) * 1e6, label, color) for values, label, color in
                      ((self.host_latency, "round trip (host)", "#4C72B0"),
                       (self.device_time, "handler (device)", "#DD8452"))]
            series = [(v[np.isfinite(v) & (v > 0)], label, color) for v, label, color in series]
            series = [(v, label, color) for v, label, color in series if v.size]
            if series:
                lo = min(float(v.min()) for v, _, _ in series)
                hi = max(float(v.max()) for v, _, _ in series)
                if hi > 10 * lo:
                    edges = np.geomspace(lo, hi * 1.0001, bins + 1)
                    ax.set_xscale("log")
                else:
                    pad = max(hi - lo, hi * 0.1) * 0.05
                    edges = np.linspace(lo - pad, hi + pad, bins + 1)
                for values, label, color in series:
                    ax.hist(values, bins=edges, color=color, alpha=0.75, label=label)
                for q, style in ((50, ":"), (99, "--")):
                    ax.axvline(self.percentile(q) * 1e6, color="k", linestyle=style, linewidth=1,
                               label=f"round trip p{q}")
                ax.set_yscale("log")
        ax.set_xlabel("latency (µs)")
        ax.set_ylabel("messages")
        ax.set_title(f"ring {self.name}: latency ({self.backend})")
        if ax.get_legend_handles_labels()[0]:
            legend_outside(ax)
        return fig
