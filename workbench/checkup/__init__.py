"""``wb.doctor()``: what this machine has and lacks for the workbench, as one
table of checks, each with its status and the fix in one line.

``%cuda_doctor`` shows the same in a notebook, ``python -m workbench doctor``
in a terminal. Nothing slow runs by default: every probe reads a file, asks a
library (NVML, NVRTC) or runs a tool's ``--version``, all at once, each with a
time limit; nothing is compiled. ``deep=True`` also builds what the workbench
would build on first use (the C modules, the simulator's worker), compiles and
runs a kernel on the active backend, and profiles one launch with Nsight
Compute where there is a GPU.

Every :class:`~workbench.BackendUnavailable` and
:class:`~workbench.ProfilerUnavailable` message points here.
"""
from __future__ import annotations

import threading

from ..runtime.session import backend as active_backend
from . import gpu, host, tools
from .result import STATUSES, Check, Checkup

__all__ = ["STATUSES", "TIMEOUT_S", "Check", "Checkup", "doctor"]

#: Seconds one probe may take by default (the probes run side by side).
TIMEOUT_S = 30.0


def _row(name: str, probe, timeout_s: float) -> Check:
    """``probe()``'s row, or an error row when it raises or takes longer than
    ``timeout_s`` (it runs in a daemon thread: a hung driver call cannot hold
    the doctor, nor the interpreter's exit)."""
    box: list = []

    def run():
        try:
            box.append(probe())
        except Exception as exc:  # noqa: BLE001 -- a failing probe is a finding, not a crash
            text = " ".join(str(exc).split()) or type(exc).__name__
            box.append(Check(name, "error", f"the check failed: {type(exc).__name__}: {text}",
                             "see the message; wb.backend() says which backend runs"))
    thread = threading.Thread(target=run, name=f"wb.doctor: {name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not box:
        return Check(name, "error", f"no answer within {timeout_s:g} s",
                     f"run wb.doctor(timeout_s={timeout_s * 4:g}); a tool or the driver may hang")
    return box[0]


def doctor(deep: bool = False, timeout_s: float = TIMEOUT_S) -> Checkup:
    """Check this machine for the workbench: the active backend, the GPU and
    its driver, MIG and clock slowdowns, CuPy, NVRTC and the CUDA toolkit
    against the driver and the architecture compiled for, CUPTI, Nsight
    Compute and whether it may read the performance counters, Nsight
    Systems, compute-sanitizer, the C and C++ compilers, the C modules and
    the simulator's worker, host memory against the simulated device, and
    Numba, Triton, Optuna and Dask.

    Returns a :class:`Checkup`: one row per check with its status (``ok``,
    ``warning``, ``missing``, ``error``), what was found and the fix in one
    line; ``to_pandas()`` gives the table. ``deep=True`` also builds, compiles,
    runs and profiles (seconds to a minute); ``timeout_s`` limits each probe.
    """
    limit = timeout_s * (4 if deep else 1)
    b = _row("backend", active_backend, limit)
    if isinstance(b, Check):  # (the backend itself could not be made: that is the finding)
        return Checkup([b], "no backend")
    g = _row("GPU and driver", gpu.gpus, limit)
    if isinstance(g, Check):
        g, gpu_failure = gpu.Gpus(error=g.found), g
    else:
        gpu_failure = None
    probes = [
        ("GPU and driver", lambda: gpu_failure or gpu.check_gpu(g)),
        ("MIG", lambda: gpu.check_mig(g)),
        ("clocks", lambda: gpu.check_clocks(g)),
        ("CuPy", lambda: gpu.check_cupy(g)),
        ("NVRTC", lambda: gpu.check_nvrtc(g, b.versions())),
        ("CUDA toolkit (nvcc)", lambda: gpu.check_toolkit(g)),
        ("CUPTI", lambda: gpu.check_cupti(g)),
        ("Nsight Compute (ncu)", lambda: tools.check_profiler("ncu", g)),
        ("performance counters", lambda: tools.check_counters(g, deep)),
        ("Nsight Systems (nsys)", lambda: tools.check_profiler("nsys", g)),
        ("compute-sanitizer", lambda: tools.check_sanitizer(g)),
        ("C++ compiler (simulator)", host.check_cxx),
        ("C compiler (C modules)", host.check_cc),
        *((f"C module: {row[0]}", lambda row=row: host.check_c_module(row, g, deep))
          for row in host.C_MODULES),
        ("simulator worker", lambda: host.check_worker(deep)),
        ("host memory", lambda: host.check_memory(b)),
        *((row[0], lambda row=row: host.check_package(row)) for row in host.PACKAGES),
    ]
    if deep:
        probes.append(("compile and run", lambda: host.check_compile_and_run(b)))
    rows: list = [None] * len(probes)

    def fill(i, name, probe):
        rows[i] = _row(name, probe, limit)
    threads = [threading.Thread(target=fill, args=(i, *p), daemon=True)
               for i, p in enumerate(probes)]
    for t in threads:  # side by side; one after another when they build and compile
        t.start()
        if deep:
            t.join()
    for t in threads:
        t.join()  # each returns within its own limit
    backend_row = Check("backend", "ok", f"{b.name}: {b.describe()}" + (f" ({b.reason})" if b.reason else ""))
    return Checkup([backend_row, *rows], f"{b.name} backend")
