"""Several devices and the links between them: ``wb.peer_matrix()`` (which
device can address which), ``wb.peer_bandwidth()`` (measured copy GB/s
between every pair, a heatmap) and ``wb.host_bandwidth()`` (host<->device GB/s
per device, pageable against pinned).

Copies are timed with events on a stream of the source device (the timing log
is paused: these are measurements, not the user's work); the figure is the
median of ``repeat`` copies. On the simulator a "copy" is a CPU memcpy: the
tables work, the figures say nothing about a GPU.
"""
from __future__ import annotations

import statistics

import numpy as np

from ..core.streams import Event, Stream
from ..core.transfers import copy, pinned
from ..present.figures import figure_axes
from ..present.tables import html_table, pandas
from ..runtime.devices import device
from ..runtime.session import backend, session

MIB = 1 << 20


class Matrix:
    """A square table over devices (``values[i][j]``: from ``i`` to ``j``)."""

    def __init__(self, values, title: str, unit: str, simulated: bool):
        self.values = values
        self.title, self.unit, self.simulated = title, unit, simulated

    @property
    def devices(self) -> int:
        return len(self.values)

    def __getitem__(self, ij):
        i, j = ij
        return self.values[i][j]

    def _text(self, v) -> str:
        if v is None:
            return "—"
        if isinstance(v, bool):
            return "yes" if v else "no"
        return f"{v:.1f}"

    def to_pandas(self):
        names = [f"GPU {i}" for i in range(self.devices)]
        return pandas().DataFrame(self.values, index=names, columns=names)

    def __repr__(self) -> str:
        note = " (simulator)" if self.simulated else ""
        head = "from\\to " + " ".join(f"{f'GPU {j}':>8}" for j in range(self.devices))
        rows = [f"{f'GPU {i}':<7} " + " ".join(f"{self._text(v):>8}" for v in row)
                for i, row in enumerate(self.values)]
        return "\n".join([f"{self.title}{f' ({self.unit})' if self.unit else ''}{note}:", head, *rows])

    def _repr_html_(self) -> str:
        cells = [[f"GPU {i}", *[self._text(v) for v in row]] for i, row in enumerate(self.values)]
        return html_table(cells, ["from \\ to", *[f"GPU {j}" for j in range(self.devices)]],
                          title=f"{self.title}{f' ({self.unit})' if self.unit else ''}"
                                f"{' (simulator)' if self.simulated else ''}")

    def plot(self, ax=None):
        """A heatmap (matplotlib Figure)."""
        fig, ax = figure_axes(ax, figsize=(1.6 + 1.1 * self.devices, 1.2 + 1.0 * self.devices))
        data = np.array([[np.nan if v is None else float(v) for v in row] for row in self.values])
        image = ax.imshow(data, cmap="viridis")
        for i in range(self.devices):
            for j in range(self.devices):
                ax.text(j, i, self._text(self.values[i][j]), ha="center", va="center",
                        color="white", fontsize=8)
        ticks = range(self.devices)
        ax.set_xticks(ticks, [f"GPU {j}" for j in ticks])
        ax.set_yticks(ticks, [f"GPU {i}" for i in ticks])
        ax.set_xlabel("to")
        ax.set_ylabel("from")
        ax.set_title(self.title + (" (simulator)" if self.simulated else ""))
        fig.colorbar(image, ax=ax, label=self.unit)
        return fig


def peer_matrix() -> Matrix:
    """Whether each device can address each other device's memory directly
    (``cudaDeviceCanAccessPeer``); the diagonal is its own memory."""
    b = backend()
    n = b.device_count()
    values = [[True if i == j else b.can_access_peer(i, j) for j in range(n)] for i in range(n)]
    return Matrix(values, "Peer access", "", b.simulated)


def _timed_copies(dst, src, stream: Stream, repeat: int) -> float:
    """Median GB/s of ``repeat`` copies of ``src`` into ``dst`` on ``stream``."""
    copy(dst, src, stream=stream, sync=True)  # warm up (and page in)
    rates = []
    for _ in range(repeat):
        start, end = Event(stream.device).record(stream), Event(stream.device)
        copy(dst, src, stream=stream)
        end.record(stream)
        ms = start.elapsed_ms(end)
        rates.append(src.nbytes / ms / 1e6 if ms > 0 else float("nan"))
    return statistics.median(rates)


def peer_bandwidth(nbytes: int = 64 * MIB, repeat: int = 5) -> Matrix:
    """Measured copy GB/s from each device to each other (diagonal: a copy
    within the device), with peer access enabled where the devices allow it."""
    b = backend()
    n = b.device_count()
    count = max(1, nbytes // 4)
    buffers = []
    with session().timing_log.paused():
        for i in range(n):
            with device(i):
                buffers.append((b.allocate((count,), np.float32), b.allocate((count,), np.float32)))
        for i in range(n):
            for j in range(n):
                if i != j:
                    b.enable_peer_access(i, j)
        values = [[None] * n for _ in range(n)]
        for i in range(n):
            with device(i):
                stream = Stream(device=i, name=f"bandwidth {i}")
                for j in range(n):
                    values[i][j] = _timed_copies(buffers[j][1], buffers[i][0], stream, repeat)
    return Matrix(values, "Copy bandwidth", "GB/s", b.simulated)


class HostBandwidth:
    """Host<->device GB/s per device, from pageable and from pinned memory."""

    COLUMNS = ("device", "direction", "pageable_gbps", "pinned_gbps", "pinned_speedup", "bytes")

    def __init__(self, rows: list[dict], simulated: bool):
        self.rows, self.simulated = rows, simulated

    def records(self) -> list[dict]:
        return [dict(r) for r in self.rows]

    def to_pandas(self):
        return pandas().DataFrame(self.records(), columns=list(self.COLUMNS))

    def _cells(self):
        return [[f"GPU {r['device']}", r["direction"], f"{r['pageable_gbps']:.1f}",
                 f"{r['pinned_gbps']:.1f}", f"{r['pinned_speedup']:.2f}x"] for r in self.rows]

    def __repr__(self) -> str:
        lines = [f"Host <-> device bandwidth (GB/s){' (simulator)' if self.simulated else ''}:"]
        lines += ["  " + "  ".join(c) for c in self._cells()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(self._cells(), ["device", "direction", "pageable GB/s", "pinned GB/s",
                                          "pinned / pageable"],
                          title="Host ↔ device bandwidth" + (" (simulator)" if self.simulated else ""))


def host_bandwidth(nbytes: int = 256 * MIB, repeat: int = 5) -> HostBandwidth:
    """H2D and D2H GB/s of every device from pageable (a NumPy array) and
    pinned (``wb.pinned``) host memory, ``nbytes`` per copy."""
    b = backend()
    count = max(1, nbytes // 4)
    rows = []
    with session().timing_log.paused():
        pageable = np.ones(count, np.float32)
        locked = pinned((count,), np.float32)
        locked[...] = 1
        for d in range(b.device_count()):
            with device(d):
                stream = Stream(device=d, name=f"bandwidth {d}")
                dev = b.allocate((count,), np.float32)
                for direction, pairs in (("H2D", ((dev, pageable), (dev, locked))),
                                         ("D2H", ((pageable, dev), (locked, dev)))):
                    slow = _timed_copies(*pairs[0], stream, repeat)
                    fast = _timed_copies(*pairs[1], stream, repeat)
                    rows.append({"device": d, "direction": direction, "pageable_gbps": slow,
                                 "pinned_gbps": fast, "pinned_speedup": fast / slow if slow else float("nan"),
                                 "bytes": int(pageable.nbytes)})
                stream.synchronize()
                del dev
        del locked, pageable
    _give_back_pinned(b)
    return HostBandwidth(rows, b.simulated)


def _give_back_pinned(b) -> None:
    """Free the page-locked buffer just used: nothing refers to it any more
    (the log lets go of finished copies' arrays when asked), and the pinned
    pool would otherwise keep its hundreds of MiB locked for the session."""
    import gc
    session().timing_log.resolve_finished(b)
    gc.collect()
    b.release_pinned_cache()
