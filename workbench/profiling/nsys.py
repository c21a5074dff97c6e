"""Nsight Systems (``nsys``): the kernels and NVTX ranges of a program or a cell in time.

``nsys profile --trace=cuda,nvtx`` runs the process (a cell's code runs in a
child process, as for Nsight Compute), ``nsys export --type=sqlite`` turns
the report into SQLite with nsys's own exporter, and the kernel intervals
(``CUPTI_ACTIVITY_KIND_KERNEL``) and NVTX ranges (``NVTX_EVENTS``) are read
with :mod:`sqlite3` into the project's timeline intervals
(:class:`~workbench.benchmarking.timeline.Interval`, ms from the trace's
first event): kernels on one lane per device and stream, NVTX ranges on
their own lane. ``NsysReport.timeline`` is the kernels' :class:`Timeline`
(overlap of streams), ``plot()`` draws the Gantt chart; the table and
``to_pandas()`` list every interval.
"""
from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
from pathlib import Path

from ..benchmarking.timeline import Interval, Timeline
from ..errors import ProfileFailed
from ..present.tables import html_table, pandas
from . import ship, tools
from .ncu import _remove, _run, _tail, child_environment, keep_report, resolve_executable

#: The lane of NVTX ranges on the timeline.
NVTX_LANE = "NVTX"


def _tables(db) -> set:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _columns(db, table: str) -> set:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def read_sqlite(path: str) -> tuple[list[Interval], list[tuple | None]]:
    """Kernels and NVTX ranges of an nsys SQLite export, in time order (ms
    from the first event), and each one's launch geometry ``(grid, block)``
    (None for an NVTX range)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    raw: list[tuple] = []  # (start_ns, end_ns, kind, name, device, stream, geometry)
    try:
        have = _tables(db)
        strings = dict(db.execute("SELECT id, value FROM StringIds")) if "StringIds" in have else {}
        if "CUPTI_ACTIVITY_KIND_KERNEL" in have:
            cols = _columns(db, "CUPTI_ACTIVITY_KIND_KERNEL")
            name = "shortName" if "shortName" in cols else "demangledName"
            device = "deviceId" if "deviceId" in cols else "0"
            query = (f"SELECT start, end, {name}, {device}, streamId, gridX, gridY, gridZ, blockX, "
                     f"blockY, blockZ FROM CUPTI_ACTIVITY_KIND_KERNEL")
            for s, e, n, dev, stream, gx, gy, gz, bx, by, bz in db.execute(query):
                raw.append((s, e, "kernel", strings.get(n, str(n)), dev or 0, stream,
                            ((gx, gy, gz), (bx, by, bz))))
        if "NVTX_EVENTS" in have:
            cols = _columns(db, "NVTX_EVENTS")
            text_id = "textId" if "textId" in cols else "NULL"
            for s, e, text, tid in db.execute(
                    f"SELECT start, end, text, {text_id} FROM NVTX_EVENTS WHERE end IS NOT NULL"):
                label = text if text is not None else strings.get(tid)
                if label is not None:
                    raw.append((s, e, "nvtx", label, 0, None, None))
    finally:
        db.close()
    raw.sort(key=lambda r: (r[0], r[2] != "nvtx"))
    t0 = raw[0][0] if raw else 0
    intervals, geometry = [], []
    for s, e, kind, name, dev, stream, geo in raw:
        lane = NVTX_LANE if kind == "nvtx" else f"GPU {dev} stream {stream}"
        intervals.append(Interval(lane, name, kind, (s - t0) / 1e6, (e - t0) / 1e6, device=int(dev),
                                  stream="" if stream is None else str(stream)))
        geometry.append(geo)
    return intervals, geometry


class NsysReport:
    """What Nsight Systems recorded: kernel intervals and NVTX ranges
    (``intervals``, timeline intervals in ms; ``kernels`` keeps the kernels),
    ``timeline`` (the kernels on one lane per stream, with their overlap),
    ``plot()``, ``to_pandas()``, a table in the notebook. ``path`` is the
    ``.nsys-rep`` file when it was kept (``report_dir=``; open it in the
    Nsight Systems GUI), ``output`` what the process printed."""

    def __init__(self, intervals, geometry=None, *, target: str, path: str | None = None,
                 output: str = ""):
        self.intervals: list[Interval] = list(intervals)
        self.geometry = list(geometry) if geometry is not None else [None] * len(self.intervals)
        self.target = target
        self.path = path
        self.output = output

    @property
    def kernels(self) -> list[Interval]:
        return [i for i in self.intervals if i.kind == "kernel"]

    @property
    def timeline(self) -> Timeline:
        """The kernels as a :class:`~workbench.benchmarking.timeline.Timeline`."""
        return Timeline(self.kernels, title=f"Nsight Systems: {self.target}")

    def plot(self, ax=None, labels: bool = True):
        """The kernels' Gantt chart (a matplotlib Figure), one row per stream."""
        return self.timeline.plot(ax=ax, labels=labels)

    def to_pandas(self):
        """One row per interval: kind, name, start_us, end_us, duration_us, stream, grid, block."""
        rows = []
        for i, geo in zip(self.intervals, self.geometry):
            grid, block = geo if geo is not None else (None, None)
            rows.append({"kind": i.kind, "name": i.name, "start_us": i.start * 1e3,
                         "end_us": i.end * 1e3, "duration_us": i.ms * 1e3,
                         "stream": i.stream or None, "grid": grid, "block": block})
        return pandas().DataFrame(
            rows, columns=["kind", "name", "start_us", "end_us", "duration_us", "stream", "grid", "block"])

    def _rows(self):
        return [[i.kind, i.name, f"{i.start * 1e3:.1f}", f"{i.ms * 1e3:.2f}", i.stream]
                for i in self.intervals]

    _HEADER = ["kind", "name", "start (µs)", "duration (µs)", "stream"]

    def __repr__(self) -> str:
        lines = [f"<NsysReport of {self.target}: {len(self.kernels)} kernels, "
                 f"{len(self.intervals) - len(self.kernels)} NVTX ranges"]
        lines += [f"  {r[0]:6} {r[2]:>12} {r[3]:>12}  {r[1]}" for r in self._rows()[:50]]
        if len(self.intervals) > 50:
            lines.append(f"  ... {len(self.intervals) - 50} more (to_pandas() has all)")
        return "\n".join(lines) + ">"

    def _repr_html_(self) -> str:
        notes = [self.timeline.summary() + " (plot() draws it)"] if self.kernels else []
        if self.path:
            notes.append(f"report: {self.path} (open it in Nsight Systems)")
        return html_table(self._rows(), self._HEADER, title=f"Nsight Systems: {self.target}",
                          notes=notes)


def trace_command(target, *, what: str, env: dict | None = None, timeout: float = 600,
                  folder: str | None = None, cwd=None, report_dir=None,
                  temporary: bool | None = None) -> NsysReport:
    """Run ``target`` (a command list) under ``nsys profile`` and read its
    trace. ``folder``: where the report is written (by default a temporary
    folder, removed at the end; ``temporary`` says whether to remove
    ``folder``); ``report_dir``: keep a copy of the ``.nsys-rep`` there."""
    nsys = tools.require("nsys")
    if temporary is None:
        temporary = folder is None
    folder = folder or tempfile.mkdtemp(prefix="workbench-nsys-")
    try:
        report = os.path.join(folder, "trace")
        cmd = [nsys, "profile", "--trace=cuda,nvtx", "--force-overwrite=true", f"--output={report}",
               *map(str, target)]
        result = _run(cmd, env if env is not None else child_environment(), timeout, what, cwd)
        output = result.stdout or ""
        unavailable = tools.failure("nsys", output)
        if unavailable is not None:
            raise unavailable
        rep = report + ".nsys-rep"
        if not os.path.exists(rep):
            raise ProfileFailed(f"{what} failed under Nsight Systems (exit code {result.returncode}), "
                                f"no report written:\n{_tail(output)}")
        sqlite = report + ".sqlite"
        export = _run([nsys, "export", "--type=sqlite", "--force-overwrite=true", f"--output={sqlite}",
                       rep], None, timeout, "nsys export")
        if not os.path.exists(sqlite):
            raise ProfileFailed(f"nsys export could not write {sqlite}:\n{_tail(export.stdout or '')}")
        kept = keep_report(rep, report_dir, what) if report_dir is not None else None
        intervals, geometry = read_sqlite(sqlite)
        trace = NsysReport(intervals, geometry, target=what,
                           path=kept or (None if temporary else rep), output=output)
        if result.returncode != 0:
            raise ProfileFailed(f"{what} exited with code {result.returncode} under Nsight Systems:\n"
                                f"{_tail(output)}")
        return trace
    finally:
        if temporary:
            _remove(folder)


def trace_executable(path, args=(), *, timeout: float = 600, cwd=None, report_dir=None) -> NsysReport:
    """The kernels and NVTX ranges of the program at ``path`` run with
    ``args``; ``report_dir``: keep the ``.nsys-rep`` file there."""
    resolved = resolve_executable(path, cwd)
    tools.require("nsys")
    device_env = tools.require_gpu("Nsight Systems")
    return trace_command([resolved, *map(str, args)],
                         what=" ".join([os.path.basename(os.fspath(path)), *map(str, args)]),
                         env={**child_environment(), **device_env}, timeout=timeout, cwd=cwd, report_dir=report_dir)


def trace_code(code: str, user_ns: dict | None = None, *, timeout: float = 600,
               report_dir=None) -> NsysReport:
    """The kernels and NVTX ranges (one per launch, named after the kernel)
    of Python ``code`` run in a child process, as :func:`~workbench.profiling.profile_code`
    runs it; the files sent to the child are removed at the end."""
    b = tools.require_gpu_backend("Nsight Systems")
    tools.require("nsys")
    folder = tempfile.mkdtemp(prefix="workbench-nsys-")
    try:
        ship.write_code_spec(Path(folder), code, user_ns, b)
        return trace_command([sys.executable, "-m", "workbench.profiling.child", folder],
                             what="the cell", env=child_environment(b.name), timeout=timeout,
                             folder=folder, report_dir=report_dir, temporary=True)
    finally:
        _remove(folder)
