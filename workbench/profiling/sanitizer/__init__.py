"""``wb.sanitize``: compute-sanitizer's four checks of one kernel launch, on a
GPU (compute-sanitizer itself, in a child process) and on the CPU simulator
(the workbench's own checks of the same events, ``docs/sanitizer.md``).

``memcheck``: out-of-bounds and misaligned accesses; ``racecheck``:
shared-memory hazards between threads nothing orders; ``synccheck``: misused
barriers; ``initcheck``: reads of global memory nothing wrote. On the
simulator, ``schedules=N`` also runs the launch in ``N`` random orders of its
blocks and threads and reports the arrays whose results differ.
"""
from __future__ import annotations

from ...backends.sanitizing import TOOLS
from ...core.kernel import Kernel, KernelTemplate
from ...errors import KernelArgumentError, ProfilerUnavailable
from ...runtime.session import backend as active_backend
from . import gpu, simulated
from .launches import CellSanitizer, sanitize_kernels
from .report import Finding, SanitizerReport

__all__ = ["sanitize", "SanitizerReport", "Finding", "TOOLS", "CellSanitizer", "sanitize_kernels"]


def _check(kernel, tool, schedules) -> None:
    if isinstance(kernel, KernelTemplate):
        raise KernelArgumentError(
            f"wb.sanitize: {kernel.name} is a template; pick an instance, e.g. "
            f"{kernel.name}['float'] (instances: {', '.join(kernel.instances) or 'none'}).")
    if not isinstance(kernel, Kernel):
        raise KernelArgumentError(
            f"wb.sanitize takes a CUDA C++ kernel (from %%cuda or wb.compile), got "
            f"{type(kernel).__name__}.")
    if tool is not None and tool not in TOOLS:
        raise KernelArgumentError(f"wb.sanitize: tool must be one of {', '.join(TOOLS)} (or None "
                                  f"with schedules=N), got {tool!r}.")
    if not isinstance(schedules, int) or isinstance(schedules, bool) or schedules < 0:
        raise KernelArgumentError(f"wb.sanitize: schedules is a number of random orders to run "
                                  f"(0 or more), got {schedules!r}.")
    if tool is None and not schedules:
        raise KernelArgumentError("wb.sanitize: give a tool, or schedules=N to explore orders.")


def sanitize(kernel, *args, grid=None, block=None, shared_mem: int = 0, n=None,
             tool: str | None = "memcheck", schedules: int = 0, seed: int = 0,
             timeout: float = 600) -> SanitizerReport:
    """Check one launch of ``kernel(*args, grid=, block=, shared_mem=, n=)``
    with ``tool``: ``"memcheck"`` (the default, as compute-sanitizer's),
    ``"racecheck"``, ``"synccheck"`` or ``"initcheck"``.

    On a GPU, compute-sanitizer checks the launch in a new process (on
    copies of the device arrays, the module compiled with ``-lineinfo``); on
    the CPU simulator the workbench's own checks do, on copies too. Either
    way your arrays stay as they were. Returns a
    :class:`~workbench.profiling.sanitizer.SanitizerReport`: ``errors``,
    ``warnings``, ``findings`` (each with the cell's lines and their
    source, threads, block, address and array), ``to_pandas()``.

    ``schedules=N`` (simulator): run the launch also in the default order and
    in ``N`` random orders of its blocks and threads (seeds ``seed + 1`` ...)
    and report every array whose elements differ between them: a race on
    global memory, or a result that depends on the order. ``tool=None``
    with ``schedules`` runs only those. ``timeout``: seconds for
    compute-sanitizer's process.
    """
    _check(kernel, tool, schedules)
    b = active_backend()
    launch = {"grid": grid, "block": block, "shared_mem": shared_mem, "n": n}
    if not b.simulated:
        if schedules:
            raise ProfilerUnavailable("schedules= explores orders on the CPU simulator only (a "
                                      "GPU chooses its own): run it with wb.backend('simulator')")
        return gpu.sanitize(kernel, args, tool=tool, timeout=timeout, **launch)
    converted = kernel.convert_args(args)  # the caller's mistakes surface here
    findings, launches = [], []
    if tool is not None:
        run, arrays = simulated.copies(kernel, converted)
        with b.sanitize_launches(tool) as launches:
            kernel(*run, **launch)
        findings = simulated.findings(launches, kernel, arrays)
    if schedules:
        findings += simulated.explore(kernel, converted, launch, schedules, seed)
    return SanitizerReport(tool or "schedules", f"{kernel.name} (one launch)", findings,
                           len(launches), "simulator", schedules)
