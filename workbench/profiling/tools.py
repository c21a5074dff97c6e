"""Finding Nsight Compute (``ncu``) and Nsight Systems (``nsys``), and the one
line that says why one cannot run here.

A tool is found, in this order, at ``$WORKBENCH_NCU`` / ``$WORKBENCH_NSYS``
(an explicit path), on ``PATH``, then where the CUDA Toolkit and the
standalone installers put it (``$CUDA_HOME/bin``, ``/usr/local/cuda*/``,
``/opt/nvidia/nsight-*``).
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess

from .. import subprocesses
from ..backends import gpu_unavailable_reason
from ..errors import ProfilerUnavailable
from ..runtime.session import backend as active_backend

#: What each tool is, and how to get it.
TOOLS = {
    "ncu": ("Nsight Compute (ncu)",
            "install Nsight Compute (it comes with the CUDA Toolkit; or apt install "
            "nsight-compute, or https://developer.nvidia.com/nsight-compute) and put ncu on "
            "PATH, or set WORKBENCH_NCU=/path/to/ncu"),
    "nsys": ("Nsight Systems (nsys)",
             "install Nsight Systems (apt install nsight-systems, or "
             "https://developer.nvidia.com/nsight-systems) and put nsys on PATH, or set "
             "WORKBENCH_NSYS=/path/to/nsys"),
    "sanitizer": ("compute-sanitizer",
                  "install the CUDA Toolkit (compute-sanitizer comes with it) and put "
                  "compute-sanitizer on PATH, or set WORKBENCH_SANITIZER=/path/to/compute-sanitizer"),
}
#: The executable of each tool.
_EXECUTABLES = {"ncu": "ncu", "nsys": "nsys", "sanitizer": "compute-sanitizer"}

_PLACES = {
    "ncu": ("{cuda}/bin/ncu", "/usr/local/cuda*/bin/ncu", "/usr/local/cuda*/nsight-compute*/ncu",
            "/opt/nvidia/nsight-compute/*/ncu"),
    "nsys": ("{cuda}/bin/nsys", "/usr/local/cuda*/bin/nsys", "/usr/local/cuda*/nsight-systems*/bin/nsys",
             "/opt/nvidia/nsight-systems/*/bin/nsys"),
    "sanitizer": ("{cuda}/bin/compute-sanitizer", "/usr/local/cuda*/bin/compute-sanitizer",
                  "/usr/local/cuda*/compute-sanitizer/compute-sanitizer"),
}

#: Nsight Compute's answer when the driver keeps the counters to administrators.
COUNTERS_RESTRICTED = "ERR_NVGPUCTRPERM"


def find(tool: str) -> str | None:
    """The path of ``tool`` ("ncu", "nsys" or "sanitizer": compute-sanitizer),
    or None where it is not installed."""
    explicit = os.environ.get(f"WORKBENCH_{tool.upper()}")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) and os.path.isfile(explicit) else None
    path = shutil.which(_EXECUTABLES[tool])
    if path:
        return path
    cuda = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    for pattern in _PLACES[tool]:
        for candidate in sorted(glob.glob(pattern.format(cuda=cuda)), reverse=True):  # newest first
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def require(tool: str) -> str:
    """The path of ``tool``, or :class:`~workbench.ProfilerUnavailable` with
    what to install."""
    path = find(tool)
    if path is None:
        what, install = TOOLS[tool]
        explicit = os.environ.get(f"WORKBENCH_{tool.upper()}")
        where = (f"WORKBENCH_{tool.upper()}={explicit} is not an executable file"
                 if explicit else "it is not on PATH nor in the CUDA Toolkit's usual places")
        raise ProfilerUnavailable(f"{what} is not available here ({where}): {install}.")
    return path


def require_gpu_backend(what: str):
    """The active backend when it runs kernels on a GPU; on the simulator,
    :class:`~workbench.ProfilerUnavailable` saying why nothing can be profiled."""
    b = active_backend()
    if b.simulated:
        reason = gpu_unavailable_reason()
        if reason:
            raise ProfilerUnavailable(
                f"{what} measures kernels on an NVIDIA GPU, and there is none here ({reason}); "
                f"the CPU simulator runs the kernels, so there is nothing to profile: run on a "
                f"machine with a GPU (wb.bench still times kernels on the simulator).")
        raise ProfilerUnavailable(
            f"{what} measures kernels on the GPU, but the active backend is the CPU simulator "
            f"({b.reason or 'chosen by the user'}): switch with wb.backend('gpu') and run the "
            f"%%cuda cells again.")
    return b


def require_gpu(what: str) -> dict[str, str]:
    """:class:`~workbench.ProfilerUnavailable` when this machine has no GPU
    (a program may be profiled whichever backend is active); else the
    environment that runs a program on the active device (none when the
    active backend is the simulator)."""
    b = active_backend()
    if b.simulated:
        reason = gpu_unavailable_reason()
        if reason:
            raise ProfilerUnavailable(f"{what} needs an NVIDIA GPU, and there is none here "
                                      f"({reason}): run on a machine with a GPU.")
    return b.child_environment()


def failure(tool: str, output: str) -> ProfilerUnavailable | None:
    """The :class:`~workbench.ProfilerUnavailable` that ``output`` of a failed
    ``tool`` run means (counters restricted, no supported device), or None
    when the failure is the profiled program's own."""
    what = TOOLS[tool][0]
    if COUNTERS_RESTRICTED in output:
        return ProfilerUnavailable(
            f"{what} may not read this GPU's performance counters ({COUNTERS_RESTRICTED}): run "
            f"as an administrator, or let every user read them (driver option "
            f"NVreg_RestrictProfilingToAdminUsers=0; in a container --cap-add=SYS_ADMIN); see "
            f"https://developer.nvidia.com/ERR_NVGPUCTRPERM.")
    if re.search(r"(no|not a) supported (gpu|device)|no cuda-capable device|device .* is not supported",
                 output, re.IGNORECASE):
        line = next((ln for ln in output.splitlines() if "==ERROR==" in ln), "").strip()
        return ProfilerUnavailable(f"{what} does not support this GPU or finds none"
                                   f"{': ' + line if line else ''}; a newer Nsight may support it.")
    return None


def version(tool: str) -> str | None:
    """``tool --version``'s last line, or None where the tool is missing."""
    path = find(tool)
    if path is None:
        return None
    try:
        out = subprocesses.run([path, "--version"], text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({type(exc).__name__})"
    lines = [ln.strip() for ln in (out.stdout or out.stderr).splitlines() if ln.strip()]
    return lines[-1] if lines else "unknown"


def ncu_report_path() -> str | None:
    """The folder of Nsight Compute's own Python report reader (``ncu_report``,
    in its ``extras/python``), or None."""
    path = find("ncu")
    if path is None:
        return None
    real = os.path.realpath(path)
    roots = [os.path.dirname(real), os.path.dirname(os.path.dirname(real))]
    roots += glob.glob(os.path.join(os.path.dirname(os.path.dirname(real)), "nsight-compute*"))
    for root in roots:
        candidate = os.path.join(root, "extras", "python")
        if os.path.isfile(os.path.join(candidate, "ncu_report.py")):
            return candidate
    return None


def status() -> dict:
    """Which profilers are here: ``{"ncu": path or None, "nsys": ..., "ncu_report": folder or None}``."""
    return {"ncu": find("ncu"), "nsys": find("nsys"), "ncu_report": ncu_report_path()}
