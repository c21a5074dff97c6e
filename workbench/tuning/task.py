"""One configuration of a tune, compiled, checked and measured.

A :class:`Task` is plain data (source, configuration, host inputs, expected
output, plan), so the same :func:`evaluate` runs in this process or on a
Dask worker with that worker's own backend: a local tune and a distributed
one make the same calls. Nothing here raises for a bad configuration: every
failure becomes a row with its ``status`` and ``reason``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..benchmarking.checks import ResultMismatch, compare_arrays, to_numpy
from ..benchmarking.engine import Plan, measure, repeat_call
from ..core.arrays import to_device
from ..core.compiler import compile as compile_source
from ..errors import ArgumentValueError, CompileError
from ..hardware.live import energy_joules, live_stats
from ..runtime.session import backend as active_backend
from .grids import GridDivisors
from .limits import DeviceLimits, shared_memory_refused

#: Seconds of repeated launches for one energy reading (NVML's counter
#: advances in steps of some milliseconds).
ENERGY_SECONDS = 0.2

#: Modules compiled in this process: (backend id, source, defines, instance, options) -> Module or error text.
_modules: dict = {}


@dataclass
class Task:
    """Everything a worker needs to evaluate one configuration."""

    source: str
    kernel: str                       # the kernel's (or template's) name
    template_params: tuple[str, ...]  # the template's parameter names, in order ('' if none)
    config: dict[str, Any]
    kinds: dict[str, str]             # parameter -> "launch" | "template" | "define"
    defines: tuple[str, ...] = ()     # fixed defines besides the tuned ones
    constants: dict = field(default_factory=dict)  # module variable -> value, set before each run
    compile_options: dict = field(default_factory=dict)  # std, fast_math, options, arch
    args: tuple = ()                  # host arrays and scalars, copied to the device each time
    grid: Any = None                  # a tuple, grid(config) -> tuple, GridDivisors; None with n
    block: Any = None                 # the block when it is not tuned, or block(config)
    n: Any = None                     # elements: the workbench picks the grid
    shared_mem: Any = 0               # bytes, or shared_mem(config) -> bytes
    output: int | None = None         # index of the argument holding the result
    expected: Any = None              # the reference output (host array) or None
    rtol: float | None = None
    atol: float | None = None
    plan: Plan = field(default_factory=Plan)
    objectives: tuple[str, ...] = ("time",)
    bytes: Any = None                 # per call, or bytes(config)
    flops: Any = None
    keep_output: bool = False         # return the output (the run that makes the reference)
    index: int = 0

    def with_config(self, config: dict, index: int) -> "Task":
        return replace(self, config=dict(config), index=index)


def _value_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


#: Launch parameters that are defines too: Kernel Tuner's names, which its
#: kernels read as macros.
DEFINED_LAUNCH_NAMES = ("block_size_x", "block_size_y", "block_size_z")


def defines_of(task: Task) -> tuple[str, ...]:
    """The fixed defines, then ``NAME=value`` for each tuned define (and for
    Kernel Tuner's block size names)."""
    tuned = tuple(f"{k}={_value_text(v)}" for k, v in task.config.items()
                  if task.kinds.get(k) == "define" or k in DEFINED_LAUNCH_NAMES)
    return tuple(task.defines) + tuned


def instance_of(task: Task) -> str | None:
    """The template instantiation (``kern<16, 4>``), or None for a plain kernel."""
    if not task.template_params:
        return None
    missing = [p for p in task.template_params if p not in task.config]
    if missing:
        raise ArgumentValueError(f"template parameter(s) {missing} of {task.kernel} are not in the "
                                 "space; give each one a list of values (one value fixes it)")
    values = ", ".join(_value_text(task.config[p]) for p in task.template_params)
    return f"{task.kernel}<{values}>"


def compile_config(task: Task):
    """The kernel of ``task``'s configuration, compiled once per process and
    backend; returns ``(kernel or None, reason, seconds)``."""
    b = active_backend()
    defines, instance = defines_of(task), instance_of(task)
    opts = dict(task.compile_options)
    # (a GPU module is loaded on the device current when it was built: one per device)
    key = (id(b), b.current_device(), task.source, defines, instance,
           tuple(sorted((k, repr(v)) for k, v in opts.items())))
    start = time.perf_counter()
    cached = _modules.get(key)
    if cached is None:
        try:
            module = compile_source(task.source, name=f"tune:{task.kernel}", defines=defines,
                                    instantiate=(instance,) if instance else (), **opts)
            cached = (module, module[instance or task.kernel])
        except CompileError as exc:
            cached = (None, shared_memory_refused(exc.log) or f"compile error: {_first_error(exc)}")
        except Exception as exc:  # noqa: BLE001 - recorded with the configuration
            cached = (None, f"compile error: {type(exc).__name__}: {exc}")
        _modules[key] = cached
    seconds = time.perf_counter() - start
    module, kernel = cached
    if module is None:
        return None, kernel, seconds
    return kernel, "", seconds


def _first_error(exc: CompileError) -> str:
    first = next((d.message for d in exc.diagnostics if d.severity == "error"
                  and not d.message.startswith("ptxas info")), None)
    if first is None:  # ptxas's own error sits in the log after its info lines
        first = next((line.split(":", 1)[1].strip() for line in (exc.log or "").splitlines()
                      if line.strip().startswith("ptxas error")), None)
    return first or str(exc).splitlines()[0]


def precompile(task: Task) -> tuple[bool, str, float]:
    """Compile ``task``'s configuration (on a CPU worker: a failed compile is
    known before a GPU worker is asked, and the build caches are warm)."""
    kernel, reason, seconds = compile_config(task)
    return kernel is not None, reason, seconds


def launch_options(task: Task) -> dict:
    config = task.config
    block = task.block(config) if callable(task.block) else task.block
    dims = [config[k] for k in ("block_x", "block_y", "block_z") if k in config]
    if "block" in config:
        block = config["block"]
    elif dims:
        block = tuple(dims)
    elif any(k in config for k in DEFINED_LAUNCH_NAMES):
        # Kernel Tuner's convention: 256 threads in x unless block_size_x says otherwise
        x, y, z = (config.get(k, d) for k, d in zip(DEFINED_LAUNCH_NAMES, (256, 1, 1)))
        block = (x, y, z)
    if isinstance(task.grid, GridDivisors):
        grid = task.grid.grid(config)
    else:
        grid = task.grid(config) if callable(task.grid) else task.grid
    shared = task.shared_mem(config) if callable(task.shared_mem) else task.shared_mem
    n = task.n(config) if callable(task.n) else task.n
    out = {"grid": grid, "block": block, "shared_mem": int(shared or 0)}
    if n is not None:
        out["n"] = n
    return out


def _per_call(value, config):
    return value(config) if callable(value) else value


def evaluate(task: Task) -> dict[str, Any]:
    """Compile, launch once and check, then measure ``task``'s configuration.

    Returns a row: ``index``, ``config``, ``status`` ("ok", "compile",
    "launch", "check" or "error"), ``reason``, ``median_s`` and the rates,
    ``energy_j``, ``compile_s``, ``measure_s`` and, with ``keep_output``,
    ``output`` (the host copy of the checked call's result)."""
    row: dict[str, Any] = {"index": task.index, "config": dict(task.config), "status": "ok",
                           "reason": "", "median_s": None, "min_s": None, "repeats": 0,
                           "gbps": None, "gflops": None, "energy_j": None,
                           "compile_s": 0.0, "measure_s": 0.0}
    kernel, reason, row["compile_s"] = compile_config(task)
    if kernel is None:
        row.update(status="restricted" if reason.startswith("device limit") else "compile",
                   reason=reason)
        return row
    b = active_backend()
    row["device"] = b.current_device()
    start = time.perf_counter()
    try:
        options = launch_options(task)
        limit = _limits(b).after_compile(_resources(kernel), options)
        if limit:
            row.update(status="restricted", reason=limit)
            return row
        for name, value in task.constants.items():
            kernel.module.set_global(name, value)
        args = tuple(to_device(a) if isinstance(a, np.ndarray) else a for a in task.args)
        kernel(*args, **options)
        b.synchronize()
    except Exception as exc:  # noqa: BLE001 - a configuration that cannot launch is a result
        row.update(status="launch", reason=_reason(exc))
        return row
    try:
        if task.output is not None:
            produced = args[task.output]
            if task.expected is not None:
                compare_arrays(produced, task.expected, rtol=task.rtol, atol=task.atol,
                               what=f"{task.kernel} {task.config}")
            if task.keep_output:
                row["output"] = np.array(to_numpy(produced), copy=True)  # a plain ndarray: it travels
    except ResultMismatch as exc:
        row.update(status="check", reason=str(exc).split(". Fix the kernel")[0])
        return row
    if "energy" in task.objectives and not energy_available():
        # a worker without NVML among workers with it: its rows say why, not "launch"
        row.update(status="error", reason="objective 'energy': this worker's device reports "
                   "neither its energy nor its power through NVML; run the tune on workers "
                   "that do (Volta or later, pynvml installed)")
        return row
    try:
        result = measure(b, kernel, [args], options, name=task.kernel, plan=task.plan,
                         bytes=_per_call(task.bytes, task.config),
                         flops=_per_call(task.flops, task.config), params=task.config,
                         record=False)
        row.update(median_s=result.median, min_s=result.min, repeats=result.repeats,
                   gbps=result.gbps, gflops=result.gflops)
        if "energy" in task.objectives:
            row["energy_j"] = _energy_per_call(b, kernel, args, options)
    except Exception as exc:  # noqa: BLE001
        row.update(status="launch", reason=_reason(exc))
    row["measure_s"] = time.perf_counter() - start
    return row


_device_limits: dict = {}


def _resources(kernel):
    try:
        return kernel.resources
    except Exception:  # noqa: BLE001 - unknown resources judge nothing; the launch will tell
        return None


def _limits(b) -> DeviceLimits:
    """The current device's limits (read once per backend and device)."""
    key = (id(b), b.current_device())
    if key not in _device_limits:
        _device_limits[key] = DeviceLimits.of(b.device_properties())
    return _device_limits[key]


def _energy_per_call(b, kernel, args, options) -> float:
    """Joules per launch: NVML's energy counter across ``ENERGY_SECONDS`` of
    launches, or where a device has no counter, its power draw at the end of
    them times the time per launch."""
    call = repeat_call(b, kernel, [args], options)
    before = energy_joules()
    if before is None and _power_watts() is None:
        raise RuntimeError("this device reports neither its energy nor its power through NVML")
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < ENERGY_SECONDS:
        for i in range(16):
            call(count + i)
        count += 16
        b.synchronize()
    elapsed = time.perf_counter() - start
    if before is not None:
        return (energy_joules() - before) / count
    return _power_watts() * elapsed / count


def _power_watts() -> float | None:
    value = live_stats().power_w
    return float(value) if isinstance(value, (int, float)) else None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    name = type(exc).__name__
    return f"{name}: {text[0]}" if text else name


def energy_available() -> bool:
    """Whether the active device reports energy or power (for the energy objective)."""
    return energy_joules() is not None or _power_watts() is not None


def strip_output(row: dict) -> dict:
    """The row without its output array (what a result keeps)."""
    return {k: v for k, v in row.items() if k != "output"}


__all__ = ["Task", "evaluate", "precompile", "compile_config", "energy_available"]
