"""Nsight Compute (``ncu``) on a program, one kernel launch, or a cell's code.

Every entry point runs ``ncu --metrics ... --export report`` on a process,
then reads the report back with ``ncu --import report.ncu-rep --csv --page
raw`` (:mod:`.report`). A launch or a cell runs again in a child Python
process (:mod:`.child`), because ncu must start the process it profiles.
"""
from __future__ import annotations

import glob
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import subprocesses
from ..errors import ProfileFailed
from ..runtime.session import backend as active_backend
from ..runtime.session import session
from . import ship, simulated, tools
from .report import ALL_METRICS, METRICS, NcuReport

#: Kernel launches profiled at most when not said otherwise (each is replayed
#: for every counter pass: a cell that launches thousands would take minutes).
DEFAULT_LAUNCH_COUNT = 20

#: Lines of the profiled process's output an error quotes.
_TAIL = 15

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding workbench/


def _tail(output: str, lines: int = _TAIL) -> str:
    kept = [ln for ln in output.strip().splitlines() if ln.strip()][-lines:]
    return "\n".join("    " + ln for ln in kept)


def child_environment(backend_name: str | None = None) -> dict:
    """The environment of a profiled child: this workbench's source tree
    first on ``PYTHONPATH``, the same backend, NVTX ranges on, launches
    timed with events (not CUPTI, which the profiler holds), and the C
    locale (ncu's numbers without locale separators)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    if backend_name:
        env["WORKBENCH_BACKEND"] = backend_name
    env["WORKBENCH_PROFILING_CHILD"] = "1"
    env["WORKBENCH_TIMING"] = "events"  # CUPTI activity timing would compete with the profiler's CUPTI
    env["PYTHONUNBUFFERED"] = "1"
    env["LC_ALL"] = "C"
    return env


def kernel_filter(name: str) -> str:
    """An ncu ``--kernel-name`` regex for kernel ``name`` (a template instance
    ``scale<float>`` or a namespaced ``ns::k`` too) and nothing else."""
    base = re.escape(name.split("<", 1)[0].split("::")[-1].strip())
    return rf"regex:^([A-Za-z0-9_]+::)*{base}(<.*>)?(\(.*\))?$"  # plain ECMAScript regex


def name_filter(kernel: str | None) -> str | None:
    """The ``--kernel-name`` value for a user's ``kernel=``: None (every
    kernel), ``"regex:..."`` as it is, else :func:`kernel_filter`."""
    return kernel if kernel is None or kernel.startswith("regex:") else kernel_filter(kernel)


def resolve_executable(path, cwd=None) -> str:
    """The absolute path of the program ``path`` (relative to ``cwd``, or
    found on ``PATH``), or :class:`~workbench.ProfileFailed` saying to build it."""
    path = os.fspath(path)
    candidate = os.path.join(os.fspath(cwd), path) if cwd is not None else path
    resolved = os.path.abspath(candidate) if os.path.isfile(candidate) else shutil.which(path)
    if not resolved or not os.access(resolved, os.X_OK):
        raise ProfileFailed(f"{path} is not an executable file; build it first (nvcc -o {path} ...).")
    return resolved


def keep_report(path: str, report_dir, what: str) -> str:
    """Copy the report file ``path`` into ``report_dir`` (made if missing)
    under a name from ``what`` that is not taken yet; its new path."""
    os.makedirs(report_dir, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", what).strip("_.")[:60] or "report"
    suffix = "".join(Path(path).suffixes[-1:])
    target, n = os.path.join(report_dir, stem + suffix), 1
    while os.path.exists(target):
        n += 1
        target = os.path.join(report_dir, f"{stem}-{n}{suffix}")
    shutil.copyfile(path, target)
    return target


def _remove(folder: str | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def ncu_command(ncu: str, target, report: str, metrics, *, kernel: str | None = None,
                launch_skip: int = 0, launch_count: int | None = None, extra=()) -> list[str]:
    """The ncu command line that profiles ``target`` (a command list)."""
    cmd = [ncu, "--target-processes", "all", "--metrics", ",".join(metrics),
           "--export", report, "--force-overwrite"]
    if kernel:
        cmd += ["--kernel-name", kernel]
    if launch_skip:
        cmd += ["--launch-skip", str(int(launch_skip))]
    if launch_count is not None:
        cmd += ["--launch-count", str(int(launch_count))]
    return cmd + list(extra) + [str(t) for t in target]


def _run(cmd, env, timeout: float, what: str, cwd=None, deadline: float | None = None
         ) -> subprocess.CompletedProcess:
    """Run a profiler command (its whole process group stopped after
    ``timeout`` s, or at ``deadline``, a ``time.monotonic()`` shared by retries)."""
    left = timeout if deadline is None else max(0.0, deadline - time.monotonic())
    try:
        return subprocesses.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", env=env, timeout=left, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        raise ProfileFailed(f"profiling {what} took longer than {timeout:.0f} s and was stopped "
                            f"(pass timeout=, or profile fewer launches with launch_count=):\n"
                            f"{_tail(out)}") from None


def read_report(ncu: str, path: str, **kwargs) -> NcuReport:
    """An :class:`NcuReport` from a ``.ncu-rep`` file, through ncu's CSV export."""
    base = [ncu, "--import", path, "--csv", "--page", "raw"]
    result = None
    # base units and plain function names; without the options if this ncu lacks them
    for cmd in (base + ["--print-units", "base", "--print-kernel-base", "function"], base):
        result = subprocesses.run(cmd, text=True, errors="replace", timeout=300,
                                env={**os.environ, "LC_ALL": "C"})
        if result.returncode == 0:
            return NcuReport.from_csv(result.stdout, path=path, **kwargs)
    raise ProfileFailed(f"ncu could not read its report {path}:\n{_tail(result.stdout + result.stderr)}")


def profile_command(target, *, what: str, env: dict | None = None, kernel: str | None = None,
                    launch_skip: int = 0, launch_count: int | None = DEFAULT_LAUNCH_COUNT,
                    metrics=ALL_METRICS, timeout: float = 600, folder: str | None = None,
                    extra=(), cwd=None, report_dir=None, temporary: bool | None = None) -> NcuReport:
    """Run ``target`` (a command list) under ncu and return the report.

    The report is written in ``folder`` (by default a temporary one, removed
    at the end, also on errors: ``temporary`` says whether ``folder`` is to
    be removed). ``report_dir``: a folder to keep a copy of the
    ``.ncu-rep`` file in (the report's ``path``; else ``path`` is None when
    the report was in a temporary folder).

    A metric this ncu or GPU does not know is left out and the run repeated
    (within the one ``timeout``); counters the user may not read, or no
    supported GPU, raise :class:`~workbench.ProfilerUnavailable`; a failing
    program or no kernel profiled raise :class:`~workbench.ProfileFailed`.
    """
    ncu = tools.require("ncu")
    if temporary is None:
        temporary = folder is None
    folder = folder or tempfile.mkdtemp(prefix="workbench-ncu-")
    try:
        return _profile_in(ncu, folder, target, what=what, env=env, kernel=kernel,
                           launch_skip=launch_skip, launch_count=launch_count, metrics=metrics,
                           timeout=timeout, extra=extra, cwd=cwd, report_dir=report_dir,
                           temporary=temporary)
    finally:
        if temporary:
            _remove(folder)


def _profile_in(ncu, folder, target, *, what, env, kernel, launch_skip, launch_count, metrics,
                timeout, extra, cwd, report_dir, temporary) -> NcuReport:
    report = os.path.join(folder, "report")
    metrics = list(metrics)
    env = env if env is not None else child_environment()
    deadline = time.monotonic() + timeout
    for _ in range(4):
        cmd = ncu_command(ncu, target, report, metrics, kernel=kernel, launch_skip=launch_skip,
                          launch_count=launch_count, extra=extra)
        result = _run(cmd, env, timeout, what, cwd, deadline)
        output = result.stdout or ""
        unavailable = tools.failure("ncu", output)
        if unavailable is not None:
            raise unavailable
        errors = "\n".join(ln for ln in output.splitlines() if "==ERROR==" in ln)
        unknown = [m for m in metrics if m in errors and m != METRICS["duration"]]
        if result.returncode != 0 and unknown:
            metrics = [m for m in metrics if m not in unknown]  # not on this GPU / version
            continue
        break
    files = sorted(glob.glob(report + "*.ncu-rep"))
    if result.returncode != 0 and not files:
        raise ProfileFailed(f"{what} failed under Nsight Compute (exit code {result.returncode}):\n"
                            f"{_tail(output)}")
    if not files:
        raise ProfileFailed(f"Nsight Compute wrote no report for {what}:\n{_tail(output)}")
    kept = keep_report(files[0], report_dir, what) if report_dir is not None else None
    profile = read_report(ncu, files[0], target=what, command=cmd, output=output)
    profile.path = kept or (None if temporary else files[0])
    if result.returncode != 0:
        raise ProfileFailed(f"{what} exited with code {result.returncode} under Nsight Compute "
                            f"({len(profile)} launches profiled before):\n{_tail(output)}")
    if not len(profile):
        hint = f" matching {kernel}" if kernel else ""
        raise ProfileFailed(f"Nsight Compute profiled no kernel launch{hint} of {what}; does it "
                            f"launch one?\n{_tail(output)}")
    return profile


def profile_executable(path, args=(), *, kernel: str | None = None, launch_skip: int = 0,
                       launch_count: int | None = DEFAULT_LAUNCH_COUNT, metrics=ALL_METRICS,
                       timeout: float = 600, cwd=None, report_dir=None) -> NcuReport:
    """Profile the program at ``path`` run with ``args`` under Nsight Compute.

    ``kernel``: only kernels of this name (a C++ name, templates and
    namespaces allowed; ``"regex:..."`` is passed to ncu as it is).
    ``launch_skip``/``launch_count``: the launches (of the matching kernels)
    skipped first and profiled at most (``None``: all). ``report_dir``: keep
    the ``.ncu-rep`` file there (else it is removed with its temporary
    folder). Returns an :class:`~workbench.profiling.NcuReport` whose ``output`` holds
    what the program printed.
    """
    resolved = resolve_executable(path, cwd)
    tools.require("ncu")
    device_env = tools.require_gpu("Nsight Compute")
    return profile_command([resolved, *map(str, args)],
                           what=" ".join([os.path.basename(os.fspath(path)), *map(str, args)]),
                           env={**child_environment(), **device_env}, kernel=name_filter(kernel), launch_skip=launch_skip,
                           launch_count=launch_count, metrics=metrics, timeout=timeout, cwd=cwd,
                           report_dir=report_dir)


def _child(folder: str) -> list[str]:
    return [sys.executable, "-m", "workbench.profiling.child", folder]


def profile(kernel, *args, grid=None, block=None, shared_mem: int = 0, n=None, warmup: int = 1,
            metrics=ALL_METRICS, timeout: float = 600, report_dir=None, device=None,
            max_blocks: int | None = None) -> NcuReport:
    """Profile one launch of ``kernel(*args, grid=, block=, shared_mem=, n=)``
    with Nsight Compute.

    ncu must start the process it measures, so the launch runs again in a
    new Python process: the kernel's module is compiled there from its
    source and options, device arrays are copied over (through the host;
    the launch changes the copies, never your arrays), and the kernel runs
    ``warmup`` times before the one launch ncu measures. Module variables set
    with ``set_global`` are not copied. The child's files (the arguments'
    copies included) are removed at the end; ``report_dir``: keep the
    ``.ncu-rep`` file there. Returns an :class:`~workbench.profiling.NcuReport`.

    On the CPU simulator the launch runs here, instrumented, on copies of the
    device arrays: its report has the counted metrics under the same names,
    a predicted time on ``device`` (``"H100"``, ``"H200"``, ``"A100"``,
    ``"L4"``, ``"T4"``, ``"RTX 4090"``; default: the simulated device), the
    source lines worst first and access maps (:mod:`.simulated`).
    ``max_blocks``: count about so many blocks and scale (faster, an
    estimate); ``warmup``, ``metrics``, ``timeout`` and ``report_dir`` are
    for Nsight Compute.
    """
    if active_backend().simulated:
        return simulated.profile_launch(kernel, args, grid=grid, block=block,
                                        shared_mem=shared_mem, n=n, device=device,
                                        max_blocks=max_blocks)
    b = tools.require_gpu_backend("Nsight Compute")
    tools.require("ncu")
    folder = tempfile.mkdtemp(prefix="workbench-ncu-")  # the spec and arrays: removed at the end
    try:
        name = ship.write_kernel_spec(Path(folder), kernel, args, grid, block, shared_mem, n, warmup)
        return profile_command(_child(folder), what=f"{name} (one launch)",
                               env=child_environment(b.name), kernel=kernel_filter(name),
                               launch_skip=warmup, launch_count=1, metrics=metrics,
                               timeout=timeout, folder=folder, report_dir=report_dir, temporary=True)
    finally:
        _remove(folder)


def profile_code(code: str, user_ns: dict | None = None, *, kernel: str | None = None,
                 launch_skip: int = 0, launch_count: int | None = DEFAULT_LAUNCH_COUNT,
                 metrics=ALL_METRICS, timeout: float = 600, report_dir=None,
                 device=None) -> NcuReport:
    """Profile the kernels that Python ``code`` (a cell) launches.

    The code runs in a new Python process with every module compiled in
    this session (``%%cuda`` cells, ``wb.compile``) bound by kernel name,
    ``wb`` and ``np``, and the values it reads from ``user_ns`` (the
    notebook's variables) when they can be sent over: device and NumPy
    arrays, numbers, strings, containers of them, imported modules. Anything
    else the code reads must be defined in the code itself. ``kernel``,
    ``launch_skip``, ``launch_count``, ``report_dir``: as in
    :func:`profile_executable`. The files sent to the child (the variables'
    copies) are removed at the end.

    On the CPU simulator the child counts the launches instead (see
    :func:`profile`; ``device``: the GPU the times are predicted for).
    """
    b = active_backend()
    if b.simulated:
        return _count_in_child(code, user_ns, b, kernel=kernel, launch_skip=launch_skip,
                               launch_count=launch_count, device=device, timeout=timeout)
    b = tools.require_gpu_backend("Nsight Compute")
    tools.require("ncu")
    folder = tempfile.mkdtemp(prefix="workbench-ncu-")
    try:
        ship.write_code_spec(Path(folder), code, user_ns, b)
        return profile_command(_child(folder), what="the cell", env=child_environment(b.name),
                               kernel=name_filter(kernel), launch_skip=launch_skip,
                               launch_count=launch_count, metrics=metrics, timeout=timeout,
                               folder=folder, report_dir=report_dir, temporary=True)
    finally:
        _remove(folder)


def _count_in_child(code, user_ns, b, *, kernel, launch_skip, launch_count, device,
                    timeout) -> NcuReport:
    """``%%ncu`` on the simulator: the cell runs in a child process as under
    ncu, its launches counted there (:func:`.simulated.count_code`)."""
    simulated.require_counting(b, "%%ncu")
    folder = tempfile.mkdtemp(prefix="workbench-count-")
    try:
        count = {"kernel": kernel, "launch_skip": int(launch_skip), "launch_count": launch_count,
                 "device": device or simulated.default_device(b)}
        ship.write_code_spec(Path(folder), code, user_ns, b, count=count)
        result = _run(_child(folder), child_environment(b.name), timeout, "the cell")
        found = Path(folder) / ship.COUNTS
        if result.returncode != 0 or not found.exists():
            raise ProfileFailed(f"the cell failed on the simulator (exit code {result.returncode}):\n"
                                f"{_tail(result.stdout or '')}")
        report = pickle.loads(found.read_bytes())
        report.output = result.stdout or ""
        simulated.remember(report, [m for m in session().modules.values() if m.backend is b])
        return report
    finally:
        _remove(folder)
