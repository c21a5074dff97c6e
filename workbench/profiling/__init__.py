"""Profiling with NVIDIA's tools: Nsight Compute, Nsight Systems, NVTX.

- :func:`profile` (``wb.profile``): one launch of a CUDA C++ kernel under
  Nsight Compute; :func:`profile_code` (``%%ncu``): the kernels a cell
  launches; :func:`profile_executable`: a program. All return an
  :class:`NcuReport` (per launch: duration, memory and compute throughput
  in % of peak, limiter, occupancy, registers, DRAM bytes, FLOPs; a point
  on the roofline).
- :func:`trace_code` (``%%nsys``) and :func:`trace_executable`: kernel
  intervals and NVTX ranges from Nsight Systems (:class:`NsysReport`).
- :func:`sanitize` (``wb.sanitize``, ``%%cuda --sanitize TOOL``):
  compute-sanitizer's memcheck, racecheck, synccheck and initcheck of one
  launch, on a GPU (compute-sanitizer itself) and on the CPU simulator (the
  workbench's own checks, and schedules explored): a :class:`SanitizerReport`
  (:mod:`.sanitizer`).
- :func:`tools_status`: which of ncu, nsys and Nsight Compute's Python
  report reader are installed.
- On the CPU simulator, :func:`profile` and :func:`profile_code` count the
  launches instead (:mod:`.simulated`): the same report, its metrics under
  ncu's names, a predicted time on a chosen GPU (:mod:`.predict`), the
  source lines worst first; :func:`latest_profile` is a kernel's latest.

Where a tool is missing, there is no GPU or the counters are restricted,
:class:`~workbench.ProfilerUnavailable` says so in one line. NVTX ranges
around launches live in :mod:`workbench.runtime.nvtx` (the launch path's
layer); the notebook layer adds ranges around cells.
"""
from __future__ import annotations

from .ncu import DEFAULT_LAUNCH_COUNT, profile, profile_code, profile_executable
from .nsys import NsysReport, trace_code, trace_executable
from .report import KernelProfile, NcuReport
from .sanitizer import Finding, SanitizerReport, sanitize
from .simulated import latest_profile
from .tools import status as tools_status

__all__ = ["profile", "profile_code", "profile_executable", "NcuReport", "KernelProfile",
           "trace_code", "trace_executable", "NsysReport", "tools_status", "DEFAULT_LAUNCH_COUNT",
           "latest_profile", "sanitize", "SanitizerReport", "Finding"]
