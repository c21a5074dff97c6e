"""Nsight Systems (``nsys``): the kernels and NVTX ranges of a program or a cell in time.

``nsys profile --trace=cuda,nvtx`` runs the process (a cell's code runs in a
child process, as for Nsight Compute), ``nsys export --type=sqlite`` turns
the report into SQLite with nsys's own exporter, and the kernel intervals
(``CUPTI_ACTIVITY_KIND_KERNEL``) and NVTX ranges (``NVTX_EVENTS``) are read
with :mod:`sqlite3`. The project has no timeline drawing yet: the result is
a table (and a DataFrame), times relative to the first event.
"""
from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ProfileFailed
from ..present.tables import html_table, pandas
from . import ship, tools
from .ncu import _run, _tail, child_environment


@dataclass
class Interval:
    """A kernel or an NVTX range on the timeline; times in ns from the trace's first event."""

    kind: str          # "kernel" or "nvtx"
    name: str
    start_ns: int
    end_ns: int
    stream: int | None = None
    grid: tuple | None = None
    block: tuple | None = None

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def _tables(db) -> set:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _columns(db, table: str) -> set:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def read_sqlite(path: str) -> list[Interval]:
    """Kernels and NVTX ranges of an nsys SQLite export, in time order."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        have = _tables(db)
        strings = dict(db.execute("SELECT id, value FROM StringIds")) if "StringIds" in have else {}
        found: list[Interval] = []
        if "CUPTI_ACTIVITY_KIND_KERNEL" in have:
            cols = _columns(db, "CUPTI_ACTIVITY_KIND_KERNEL")
            name = "shortName" if "shortName" in cols else "demangledName"
            query = (f"SELECT start, end, {name}, streamId, gridX, gridY, gridZ, blockX, blockY, "
                     f"blockZ FROM CUPTI_ACTIVITY_KIND_KERNEL")
            for s, e, n, stream, gx, gy, gz, bx, by, bz in db.execute(query):
                found.append(Interval("kernel", strings.get(n, str(n)), s, e, stream,
                                      (gx, gy, gz), (bx, by, bz)))
        if "NVTX_EVENTS" in have:
            cols = _columns(db, "NVTX_EVENTS")
            text_id = "textId" if "textId" in cols else "NULL"
            for s, e, text, tid in db.execute(
                    f"SELECT start, end, text, {text_id} FROM NVTX_EVENTS WHERE end IS NOT NULL"):
                label = text if text is not None else strings.get(tid)
                if label is not None:
                    found.append(Interval("nvtx", label, s, e))
    finally:
        db.close()
    found.sort(key=lambda i: (i.start_ns, i.kind != "nvtx"))
    if found:
        t0 = found[0].start_ns
        for i in found:
            i.start_ns -= t0
            i.end_ns -= t0
    return found


class NsysReport:
    """What Nsight Systems recorded: kernel intervals and NVTX ranges
    (``intervals``; ``kernels`` keeps the kernels), ``to_pandas()``, a table
    in the notebook. ``path`` is the ``.nsys-rep`` file (open it in the
    Nsight Systems GUI for the timeline), ``output`` what the process printed."""

    def __init__(self, intervals, *, target: str, path: str | None = None, output: str = ""):
        self.intervals: list[Interval] = list(intervals)
        self.target = target
        self.path = path
        self.output = output

    @property
    def kernels(self) -> list[Interval]:
        return [i for i in self.intervals if i.kind == "kernel"]

    def to_pandas(self):
        """One row per interval: kind, name, start_us, end_us, duration_us, stream, grid, block."""
        return pandas().DataFrame(
            [{"kind": i.kind, "name": i.name, "start_us": i.start_ns / 1e3, "end_us": i.end_ns / 1e3,
              "duration_us": i.duration_ns / 1e3, "stream": i.stream, "grid": i.grid,
              "block": i.block} for i in self.intervals],
            columns=["kind", "name", "start_us", "end_us", "duration_us", "stream", "grid", "block"])

    def _rows(self):
        return [[i.kind, i.name, f"{i.start_ns / 1e3:.1f}", f"{i.duration_ns / 1e3:.2f}",
                 "" if i.stream is None else i.stream] for i in self.intervals]

    _HEADER = ["kind", "name", "start (µs)", "duration (µs)", "stream"]

    def __repr__(self) -> str:
        lines = [f"<NsysReport of {self.target}: {len(self.kernels)} kernels, "
                 f"{len(self.intervals) - len(self.kernels)} NVTX ranges"]
        lines += [f"  {r[0]:6} {r[2]:>12} {r[3]:>12}  {r[1]}" for r in self._rows()[:50]]
        if len(self.intervals) > 50:
            lines.append(f"  ... {len(self.intervals) - 50} more (to_pandas() has all)")
        return "\n".join(lines) + ">"

    def _repr_html_(self) -> str:
        notes = [f"report: {self.path} (open it in Nsight Systems for the timeline)"] if self.path else []
        return html_table(self._rows(), self._HEADER, title=f"Nsight Systems: {self.target}",
                          notes=notes)


def trace_command(target, *, what: str, env: dict | None = None, timeout: float = 600,
                  folder: str | None = None, cwd=None) -> NsysReport:
    """Run ``target`` (a command list) under ``nsys profile`` and read its trace."""
    nsys = tools.require("nsys")
    folder = folder or tempfile.mkdtemp(prefix="workbench-nsys-")
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
    export = _run([nsys, "export", "--type=sqlite", "--force-overwrite=true", f"--output={sqlite}", rep],
                  None, timeout, "nsys export")
    if not os.path.exists(sqlite):
        raise ProfileFailed(f"nsys export could not write {sqlite}:\n{_tail(export.stdout or '')}")
    trace = NsysReport(read_sqlite(sqlite), target=what, path=rep, output=output)
    if result.returncode != 0:
        raise ProfileFailed(f"{what} exited with code {result.returncode} under Nsight Systems:\n"
                            f"{_tail(output)}")
    return trace


def trace_executable(path, args=(), *, timeout: float = 600, cwd=None) -> NsysReport:
    """The kernels and NVTX ranges of the program at ``path`` run with ``args``."""
    path = os.fspath(path)
    candidate = os.path.join(os.fspath(cwd), path) if cwd is not None else path
    if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
        raise ProfileFailed(f"{path} is not an executable file; build it first.")
    tools.require("nsys")
    tools.require_gpu("Nsight Systems")
    return trace_command([os.path.abspath(candidate), *map(str, args)],
                         what=" ".join([os.path.basename(path), *map(str, args)]), timeout=timeout,
                         cwd=cwd)


def trace_code(code: str, user_ns: dict | None = None, *, timeout: float = 600) -> NsysReport:
    """The kernels and NVTX ranges (one per launch, named after the kernel)
    of Python ``code`` run in a child process, as :func:`~workbench.profile_code` runs it."""
    b = tools.require_gpu_backend("Nsight Systems")
    tools.require("nsys")
    folder = tempfile.mkdtemp(prefix="workbench-nsys-")
    ship.write_code_spec(Path(folder), code, user_ns, b)
    return trace_command([sys.executable, "-m", "workbench.profiling.child", folder],
                         what="the cell", env=child_environment(b.name), timeout=timeout,
                         folder=folder)
