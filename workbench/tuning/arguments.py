"""The arguments of ``wb.tune`` (and ``wb.tuned``) checked and brought into shape."""
from __future__ import annotations

import datetime as _dt
import re

import numpy as np

from ..benchmarking.checks import to_numpy
from ..core.adapters import as_launchable
from ..core.kernel import Kernel, KernelTemplate
from ..core.signature import find_kernels
from ..cxx import find_globals
from ..errors import TuneError
from .grids import GridDivisors
from .result import OBJECTIVES
from .task import energy_available


def as_tuple(value) -> tuple:
    if isinstance(value, str):
        return (value,)
    return tuple(value or ())


def kernel_source(kernel, kernel_name):
    """(source, kernel name, template parameter names, compile options); the
    options of a Kernel include ``constants``: the module variables its
    module was given with ``set_global``."""
    kernel = as_launchable(kernel)
    if isinstance(kernel, KernelTemplate):
        any_instance = next(iter(kernel.instances.values()), None)
        if any_instance is None:
            raise TuneError(f"template {kernel.name} has no instantiations to take the "
                            "source from; pass the source text instead")
        kernel_name = kernel_name or kernel.name
        kernel = any_instance
    if isinstance(kernel, Kernel):
        module = kernel.module
        source, opts = module.source, module.options
        name = kernel_name or kernel.signature.name.split("<", 1)[0].strip()
        options = {"defines": tuple(opts.defines), "std": opts.std, "fast_math": opts.fast_math,
                   "options": tuple(opts.extra), "arch": opts.arch,
                   "constants": dict(getattr(module, "assigned", None) or {})}
    elif isinstance(kernel, str):
        source, name, options = kernel, kernel_name, {}
    else:
        raise TuneError(f"tune() takes a workbench Kernel or CUDA C++ source, got "
                        f"{type(kernel).__name__}")
    signatures = find_kernels(source, options.get("defines", ()))
    if name is None:
        if len(signatures) != 1:
            raise TuneError(f"the source has {len(signatures)} kernels "
                            f"({', '.join(s.name for s in signatures)}); name one with kernel_name=")
        name = signatures[0].name
    match = next((s for s in signatures if name in (s.name, s.qualified_name)), None)
    if match is None:
        raise TuneError(f"no kernel {name!r} in the source (kernels: "
                        f"{', '.join(s.name for s in signatures) or 'none'})")
    return source, match.name, tuple(n for _, n in match.template_params), options


def objectives_of(objective, bytes, flops, client) -> tuple[str, ...]:
    chosen = (objective,) if isinstance(objective, str) else tuple(objective)
    if not chosen:
        raise TuneError("objective= is empty; give 'time', 'gbps', 'gflops' or 'energy'")
    for o in chosen:
        if o not in OBJECTIVES:
            raise TuneError(f"objective {o!r}: choose from {', '.join(OBJECTIVES)}")
    if "gbps" in chosen and bytes is None:
        raise TuneError("objective 'gbps' needs bytes= (bytes moved per launch, or a function "
                        "of the configuration)")
    if "gflops" in chosen and flops is None:
        raise TuneError("objective 'gflops' needs flops= (operations per launch, or a function "
                        "of the configuration)")
    if "energy" in chosen and client is None and not energy_available():
        raise TuneError("objective 'energy' needs a device that reports its energy through NVML "
                        "(Volta or later); this one does not (the simulator never does)")
    if "energy" in chosen and client is not None:
        reports = client.run(energy_available)   # {worker address: bool}, on every worker
        if not any(reports.values()):
            raise TuneError(f"objective 'energy' needs workers whose devices report their energy "
                            f"through NVML; none of the {len(reports)} worker(s) does (simulator "
                            "workers never do): tune objective='time', or use workers on GPUs "
                            "of Volta or later with NVML (pynvml) installed")
    if len(set(chosen)) != len(chosen):
        raise TuneError(f"objective lists one twice: {chosen}")
    return chosen


def host_copy(value):
    """A plain NumPy copy of a device array (the simulator's device arrays are
    NumPy subclasses, which a Dask worker cannot receive); other arguments as
    they are."""
    if type(value) is np.ndarray or isinstance(value, (np.generic, int, float, bool)) \
            or value is None:
        return value
    return np.array(to_numpy(value), copy=True)


def signature_of(source, name, defines):
    return next(s for s in find_kernels(source, defines) if s.name == name)


def output_index(signature, args, output, reference):
    """The index of the argument holding the result; None when nothing is
    checked (``reference=False`` without ``output=``)."""
    if output is not None:
        if not isinstance(output, int) or not -len(args) <= output < len(args):
            raise TuneError(f"output={output!r}: give the index of the argument the kernel "
                            f"writes its result to (0..{len(args) - 1})")
        return output % len(args)
    if reference is False:
        return None
    writable = [i for i, p in enumerate(signature.params) if p.is_pointer and not p.is_const]
    if len(writable) == 1 and writable[0] < len(args):
        return writable[0]
    return None if not writable else _ambiguous(signature, writable)


def _ambiguous(signature, writable):
    names = ", ".join(f"{i} ({signature.params[i].name})" for i in writable)
    raise TuneError(f"{signature.name} writes through several pointers ({names}); say which holds "
                    "the result with output=<index>, or pass reference=False to skip the check")


def check_arguments(signature, args) -> None:
    """A TuneError when ``args`` cannot fit the kernel's parameters (their
    number, an array for a value, a value for a pointer, an array of another
    element type): no configuration could run."""
    params = signature.params
    required = sum(1 for p in params if not p.has_default)
    if not required <= len(args) <= len(params):
        count = f"{required} to {len(params)}" if required != len(params) else str(len(params))
        raise TuneError(f"{signature.name} takes {count} arguments "
                        f"({', '.join(p.name for p in params)}); the tune was given {len(args)}")
    for i, (p, a) in enumerate(zip(params, args)):
        where = f"argument {i} ({p.name}, {p.ctype})"
        is_array = isinstance(a, np.ndarray) and a.ndim > 0
        if p.is_pointer and a is not None and not is_array:
            raise TuneError(f"{where} is a pointer; the tune was given {type(a).__name__} {a!r}: "
                            "pass an array")
        if not p.is_pointer and is_array:
            raise TuneError(f"{where} is a value; the tune was given an array of shape "
                            f"{a.shape}: pass a scalar (np.{p.dtype or 'int32'}(...))")
        if p.is_pointer and is_array and p.dtype is not None and p.pointer_depth == 1 \
                and a.dtype != p.dtype:
            raise TuneError(f"{where} points to {p.dtype}; the tune was given a {a.dtype} array: "
                            f"pass .astype(np.{p.dtype})")


def reference_from_list(reference, args, output):
    """Kernel Tuner's ``answer=[None, expected, None]``: one entry per
    argument, the one that is not None the expected output. Returns
    ``(expected, output index)``."""
    if len(reference) != len(args):
        raise TuneError(f"reference= as a list (Kernel Tuner's answer) has one entry per "
                        f"argument: {len(args)}, not {len(reference)}")
    given = [i for i, e in enumerate(reference) if e is not None]
    if len(given) != 1:
        raise TuneError(f"reference= as a list (Kernel Tuner's answer) needs exactly one entry that "
                        f"is not None (the expected output); it has {len(given)}: check the "
                        "others with separate tunes, or give a function")
    if output is not None and output % len(args) != given[0]:
        raise TuneError(f"output={output} but the reference list gives the expected output of "
                        f"argument {given[0]}; drop output= or make them agree")
    return reference[given[0]], given[0]


def fit_reference(expected, produced, output: int):
    """``expected`` in the output argument's shape (a flat reference of the
    right size is reshaped), or a TuneError saying what does not fit."""
    expected = np.asarray(to_numpy(expected))
    shape = getattr(produced, "shape", None)
    if shape is None or expected.shape == tuple(shape) or expected.size == 1:
        return expected
    if expected.size == int(np.prod(shape)):
        return expected.reshape(shape)
    raise TuneError(f"the reference has shape {expected.shape} ({expected.size} elements) but the "
                    f"output argument {output} has shape {tuple(shape)}: no configuration could "
                    "match it; return the expected contents of that argument (or name another "
                    "with output=)")


def problem_size_of(args) -> tuple:
    """The arguments' shapes and scalars, read where they are (no copy of a
    device array: any array's ``shape`` is enough)."""
    out = []
    for a in args:
        if isinstance(a, (int, float, np.generic)) and not isinstance(a, bool):
            out.append(a.item() if isinstance(a, np.generic) else a)
        elif getattr(a, "shape", None) is not None:
            out.append(tuple(int(d) for d in a.shape))
    return tuple(out)


def parse_budget(budget) -> tuple[int | None, float | None, str]:
    if budget is None:
        return None, None, ""
    if isinstance(budget, _dt.timedelta):
        return None, budget.total_seconds(), f"{budget.total_seconds():g} s"
    if isinstance(budget, (int, np.integer)) and not isinstance(budget, bool):
        if budget < 1:
            raise TuneError(f"budget={budget}: give at least one configuration")
        return int(budget), None, str(int(budget))
    if isinstance(budget, str):
        m = re.fullmatch(r"\s*([\d.]+)\s*(s|sec|seconds?|min|minutes?|h)\s*", budget)
        if m:
            seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)[0]]
            return None, seconds, f"{seconds:g} s"
    raise TuneError(f"budget={budget!r}: give a number of configurations (40) or a time "
                    "('30s', '2min', a timedelta)")


def constant_values(source, defines, values: dict) -> dict:
    """``constants=`` checked against the source's module variables (any
    ``#if`` branch): host copies of the values, or a TuneError naming the
    variables the source does not have."""
    if not values:
        return {}
    if not isinstance(values, dict):
        raise TuneError("constants= takes a mapping {variable name: value} of the source's "
                        "__constant__ / __device__ variables")
    known = {v.name for v in find_globals(source, None)} | {
        v.qualified_name for v in find_globals(source, None)}
    missing = [name for name in values if str(name).lstrip(":") not in known]
    if missing:
        raise TuneError(f"constants= names {missing}, which the source does not declare as "
                        f"__constant__ or __device__ variables (it has: "
                        f"{', '.join(sorted(known)) or 'none'})")
    return {str(name): host_copy(value) for name, value in values.items()}


def kernel_tuner_grid(grid, n, problem_size, divisors, names):
    """``grid`` as given, or Kernel Tuner's grid from ``problem_size`` and the
    ``grid_div_x``/``_y``/``_z`` divisors (a :class:`GridDivisors`): when
    divisors are given, or when neither ``grid`` nor ``n`` is and the space
    has Kernel Tuner's block size names."""
    given = any(d is not None for d in divisors)
    kernel_tuner_names = any(str(p).startswith("block_size_") for p in names)
    if given and (grid is not None or n is not None):
        raise TuneError("grid_div_x/_y/_z compute the grid from problem_size=, as Kernel Tuner "
                        "does; give them or grid= / n=, not both")
    if given or (grid is None and n is None and problem_size is not None and kernel_tuner_names):
        return GridDivisors.make(problem_size, *divisors, names=names)
    return grid
