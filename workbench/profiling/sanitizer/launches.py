"""``%%cuda --sanitize TOOL``: every launch of the cell's kernels checked.

:func:`sanitize_kernels` gives each kernel of a module a launch hook
(:meth:`workbench.Kernel.set_launch_hook`) that makes the launch under the
tool: on the simulator the launch itself runs sanitized (its results are
written as usual); on a GPU compute-sanitizer checks it first in a child
process, on copies of the arguments, and then the launch runs as usual. The
findings gather in a :class:`CellSanitizer` until :meth:`CellSanitizer.take`
makes them one report (the notebook layer shows it at the end of the cell
that launched the kernels).
"""
from __future__ import annotations

import threading

from . import gpu, simulated
from .report import SanitizerReport, merge

#: Launches checked per cell at most (the rest run unchecked, the report says how many).
DEFAULT_LAUNCH_COUNT = 20


class CellSanitizer:
    """The checked launches of one module's kernels since the last :meth:`take`."""

    def __init__(self, tool: str, launch_count: int = DEFAULT_LAUNCH_COUNT):
        self.tool = tool
        self.launch_count = launch_count
        self._lock = threading.Lock()
        self._findings: list = []
        self._launches = 0
        self._unchecked = 0
        self._kernels: list[str] = []
        self._output = ""
        self._where = "simulator"

    def __call__(self, kernel, args, options: dict, launch):
        with self._lock:
            if self._launches >= self.launch_count:
                self._unchecked += 1
                checked = False
            else:
                self._launches += 1
                checked = True
            if kernel.name not in self._kernels:
                self._kernels.append(kernel.name)
        if not checked:
            return launch()
        b = kernel.backend
        self._where = "simulator" if b.simulated else "compute-sanitizer"
        if b.simulated:
            arrays = simulated.device_arguments(kernel, args)
            with b.sanitize_launches(self.tool, count=1) as found:
                launch()
            new = simulated.findings(found, kernel, arrays)
            output = ""
        else:
            report = gpu.sanitize(kernel, args, tool=self.tool, grid=options["grid"],
                                  block=options["block"], shared_mem=options["shared_mem"],
                                  n=options["n"])
            new, output = report.findings, report.output
            launch()
        with self._lock:
            self._findings += new
            self._output += output

    def take(self) -> SanitizerReport | None:
        """The report of the launches since the last call (None: none), and a fresh start."""
        with self._lock:
            if not self._launches and not self._unchecked:
                return None
            target = ", ".join(self._kernels)
            if self._unchecked:
                target += f" ({self._unchecked} more launches ran unchecked)"
            report = SanitizerReport(self.tool, target, merge(self._findings), self._launches,
                                     self._where, output=self._output)
            self._findings, self._launches, self._unchecked = [], 0, 0
            self._kernels, self._output = [], ""
        return report


def sanitize_kernels(module, tool: str, launch_count: int = DEFAULT_LAUNCH_COUNT) -> CellSanitizer:
    """Check every launch of ``module``'s kernels (template instances too)
    with ``tool``; the returned :class:`CellSanitizer` gathers the findings."""
    sanitizer = CellSanitizer(tool, launch_count)
    kernels = list(module.kernels.values())
    for template in module.templates.values():
        kernels += list(template.instances.values())
    for k in kernels:
        k.set_launch_hook(sanitizer)
    return sanitizer
