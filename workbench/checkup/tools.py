"""The doctor's rows for NVIDIA's tools: Nsight Compute and whether it may
read the performance counters, Nsight Systems, compute-sanitizer.

Whether the counters are readable is read from the driver's own setting
(``RmProfilingAdminOnly`` in ``/proc/driver/nvidia/params``) and this
process's privileges: nothing runs. ``wb.doctor(deep=True)`` also profiles
one launch with ncu, which is the definitive answer.
"""
from __future__ import annotations

import glob
import os
import shutil

import numpy as np

from .. import subprocesses
from ..core.compiler import compile as compile_source
from ..core.arrays import to_device
from ..errors import ProfilerUnavailable
from ..profiling import ncu, tools as profilers
from ..runtime.session import session
from .gpu import GPU_ONLY, Gpus
from .result import Check

#: The capability Linux asks of an administrator who reads the counters (CAP_SYS_ADMIN).
CAP_SYS_ADMIN = 21
#: The loaded driver's options; ``RmProfilingAdminOnly: 1`` keeps the counters to administrators.
DRIVER_PARAMS = "/proc/driver/nvidia/params"
TINY_KERNEL = ('extern "C" __global__ void doctor_axpy(float a, const float* x, float* y, int n) '
               '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }')


def tiny_kernel():
    """A small kernel compiled on the active backend, left out of ``wb.modules``."""
    module = compile_source(TINY_KERNEL, name="doctor_axpy")
    session().modules.pop("doctor_axpy", None)
    return module["doctor_axpy"]


def check_profiler(tool: str, g: Gpus) -> Check:
    what, install = profilers.TOOLS[tool]
    path = profilers.find(tool)
    if path is None:
        return Check(what, "missing", "not found (not on PATH, nor in the CUDA toolkit's places)",
                     GPU_ONLY if not g.present else install)
    version = profilers.version(tool)
    if not g.present:
        return Check(what, "ok", f"{version} at {path} (no GPU to profile here)")
    return Check(what, "ok", f"{version} at {path}")


def find_sanitizer() -> str | None:
    """compute-sanitizer on PATH or in the CUDA toolkit's usual places, or None."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    cuda = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    for pattern in (f"{cuda}/bin/compute-sanitizer", "/usr/local/cuda*/bin/compute-sanitizer",
                    "/usr/local/cuda*/compute-sanitizer/compute-sanitizer"):
        for candidate in sorted(glob.glob(pattern), reverse=True):
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def check_sanitizer(g: Gpus) -> Check:
    path = find_sanitizer()
    if path is None:
        return Check("compute-sanitizer", "missing", "not found", GPU_ONLY if not g.present else
                     "it comes with the CUDA toolkit: put its bin/ on PATH (checks a program's "
                     "memory accesses on the GPU; the simulator's --check does it on the CPU)")
    out = subprocesses.run([path, "--version"], text=True, timeout=30)
    lines = [ln.strip() for ln in (out.stdout or out.stderr).splitlines() if ln.strip()]
    return Check("compute-sanitizer", "ok", f"{lines[-1] if lines else 'version unknown'} at {path}")


def _is_administrator() -> bool:
    """True when this process may read restricted counters: root with CAP_SYS_ADMIN."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/status") as f:
            caps = next(line.split()[1] for line in f if line.startswith("CapEff:"))
        return bool(int(caps, 16) >> CAP_SYS_ADMIN & 1)
    except (OSError, StopIteration, ValueError, IndexError):
        return True


def counters_restricted(params: str = DRIVER_PARAMS) -> bool | None:
    """The driver's setting: True when only administrators may read the
    performance counters, False when everyone may, None where it cannot be read."""
    try:
        with open(params) as f:
            for line in f:
                if line.startswith("RmProfilingAdminOnly:"):
                    return line.split(":", 1)[1].strip() == "1"
    except OSError:
        return None
    return None


def check_counters(g: Gpus, deep: bool) -> Check:
    name = "performance counters"
    if not g.present:
        return Check(name, "missing", "no NVIDIA GPU", GPU_ONLY)
    allow = (f"an administrator sets the driver option NVreg_RestrictProfilingToAdminUsers=0 "
             f"(in a container: --cap-add=SYS_ADMIN); see developer.nvidia.com/"
             f"{profilers.COUNTERS_RESTRICTED}")
    if deep and profilers.find("ncu") is not None:
        return _counters_by_ncu(name, allow)
    restricted = counters_restricted()
    if restricted is None:
        return Check(name, "warning", "the driver's setting cannot be read here "
                     "(/proc/driver/nvidia/params)", "wb.doctor(deep=True) profiles one launch "
                     "with ncu to find out")
    if not restricted:
        return Check(name, "ok", "readable by every user (RmProfilingAdminOnly: 0)")
    if _is_administrator():
        return Check(name, "ok", "restricted to administrators, and this process is one")
    return Check(name, "warning", f"restricted to administrators (RmProfilingAdminOnly: 1): ncu "
                 f"and wb.profile stop with {profilers.COUNTERS_RESTRICTED}", allow)


def _counters_by_ncu(name: str, allow: str) -> Check:
    """Profile one launch of a tiny kernel with ncu: the answer itself."""
    kernel = tiny_kernel()
    x = to_device(np.ones(256, np.float32))
    y = to_device(np.ones(256, np.float32))
    try:
        report = ncu.profile(kernel, np.float32(2.0), x, y, np.int32(256), grid=1, block=256,
                             timeout=120)
    except ProfilerUnavailable as exc:
        if profilers.COUNTERS_RESTRICTED in str(exc):
            return Check(name, "warning", f"ncu was refused ({profilers.COUNTERS_RESTRICTED})", allow)
        return Check(name, "error", f"ncu could not profile a launch: {exc}",
                     "see the message; a newer Nsight Compute may support this GPU")
    return Check(name, "ok", f"readable: ncu measured a launch ({len(report)} kernel)")
