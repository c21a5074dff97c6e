"""``%%ncu`` and ``%%nsys``: profile the kernels a cell launches; NVTX ranges around cells.

The magics are thin: parse the options, call :func:`workbench.profiling.profile_code`
or :func:`workbench.profiling.trace_code`, print what the profiled process
printed, return the report (the cell's value). The cell runs again in a new
process under the profiler: it sees the kernels of every ``%%cuda`` cell run
so far, ``wb`` and ``np``, and the notebook variables it reads that can be
sent over (arrays, numbers, strings, modules); anything else it must define
itself.

While an NVTX tool is attached (the notebook's kernel runs under Nsight
Systems, or ranges were switched on), every cell is an NVTX range named
``cell N``; launches get theirs from :mod:`workbench.runtime.nvtx`.
"""
from __future__ import annotations

import re

from IPython.core import magic_arguments
from IPython.core.magic import Magics, cell_magic, magics_class

from ..profiling import DEFAULT_LAUNCH_COUNT, profile_code, trace_code
from ..runtime import nvtx
from ..runtime.session import session


#: The profilers' own progress lines, exactly (a program's "Generating ..." stays).
_PROGRESS = re.compile(
    r"==PROF== .*"                                   # ncu
    r"|Collecting data\.\.\."                         # nsys profile
    r"|Generating '[^']*\.qdstrm'"
    r"|Processing \[\d+/\d+\].*|Processing events\.\.\."
    r"|\[\d+/\d+\] \[[=> \d%]*\] .*"
    r"|Generated:|\s+\S+\.(?:nsys-rep|sqlite|qdstrm)")


def _print_output(output: str) -> None:
    """The profiled process's own output, without the profiler's progress lines."""
    lines = [ln for ln in output.splitlines() if not _PROGRESS.fullmatch(ln.rstrip())]
    text = "\n".join(lines).strip()
    if text:
        print(text)


@magics_class
class ProfileMagics(Magics):
    """``%%ncu`` (Nsight Compute) and ``%%nsys`` (Nsight Systems)."""

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("--kernel", "-k", help="profile only kernels of this name "
                              "(\"regex:...\" is passed to ncu as it is)")
    @magic_arguments.argument("--launch-skip", "-s", type=int, default=0,
                              help="matching launches to skip before profiling (default 0)")
    @magic_arguments.argument("--launch-count", "-c", type=int, default=DEFAULT_LAUNCH_COUNT,
                              help=f"launches to profile at most (default {DEFAULT_LAUNCH_COUNT}; "
                                   f"0: all)")
    @magic_arguments.argument("--timeout", type=float, default=600, help="seconds (default 600)")
    @magic_arguments.argument("--report-dir", default=None,
                              help="keep the report file in this folder (for the Nsight GUI)")
    @magic_arguments.argument("--quiet", "-q", action="store_true",
                              help="do not print what the profiled cell printed")
    @magic_arguments.argument("--device", "-d", default=None,
                              help="on the CPU simulator: the GPU to predict times for (H100, "
                                   "H200, A100, L4, T4, 'RTX 4090'; default: the simulated one)")
    @cell_magic
    def ncu(self, line, cell):
        """Run the cell under Nsight Compute; its value is an ``NcuReport``
        (per launch: time, memory/compute throughput, limiter, occupancy...).
        On the CPU simulator the cell's launches are counted instead, with
        predicted times (docs/profiling.md)."""
        args = magic_arguments.parse_argstring(self.ncu, line)
        report = profile_code(cell, self.shell.user_ns, kernel=args.kernel,
                              launch_skip=args.launch_skip,
                              launch_count=args.launch_count or None, timeout=args.timeout,
                              report_dir=args.report_dir, device=args.device)
        if not args.quiet:
            _print_output(report.output)
        return report

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("--timeout", type=float, default=600, help="seconds (default 600)")
    @magic_arguments.argument("--report-dir", default=None,
                              help="keep the report file in this folder (for the Nsight GUI)")
    @magic_arguments.argument("--quiet", "-q", action="store_true",
                              help="do not print what the profiled cell printed")
    @cell_magic
    def nsys(self, line, cell):
        """Run the cell under Nsight Systems; its value is an ``NsysReport``
        (kernel intervals and NVTX ranges)."""
        args = magic_arguments.parse_argstring(self.nsys, line)
        report = trace_code(cell, self.shell.user_ns, timeout=args.timeout, report_dir=args.report_dir)
        if not args.quiet:
            _print_output(report.output)
        return report


_open = {"range": False}


def _cell_started(info=None) -> None:
    """pre_run_cell: an NVTX range ``cell N`` while ranges are on."""
    if nvtx.enabled():
        nvtx.push(f"cell {session().cell}")
        _open["range"] = True


def _cell_finished(result=None) -> None:
    if _open["range"]:
        _open["range"] = False
        nvtx.pop()


def register(ipython) -> None:
    ipython.register_magics(ProfileMagics)
    ipython.events.register("pre_run_cell", _cell_started)
    ipython.events.register("post_run_cell", _cell_finished)


def unregister(ipython) -> None:
    for event, hook in (("pre_run_cell", _cell_started), ("post_run_cell", _cell_finished)):
        try:
            ipython.events.unregister(event, hook)
        except ValueError:
            pass
