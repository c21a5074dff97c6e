"""The arguments of ``wb.tune`` (and ``wb.tuned``) checked and brought into shape."""
from __future__ import annotations

import datetime as _dt
import re

import numpy as np

from ..benchmarking.checks import to_numpy
from ..core.adapters import as_launchable
from ..core.kernel import Kernel, KernelTemplate
from ..core.signature import find_kernels
from ..errors import TuneError
from .result import OBJECTIVES
from .task import energy_available


def as_tuple(value) -> tuple:
    if isinstance(value, str):
        return (value,)
    return tuple(value or ())


def kernel_source(kernel, kernel_name):
    """(source, kernel name, template parameter names, compile options)."""
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
                   "options": tuple(opts.extra), "arch": opts.arch}
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
    """A NumPy copy of a device array; other arguments as they are."""
    if isinstance(value, (np.ndarray, np.generic, int, float, bool)) or value is None:
        return value
    return np.array(to_numpy(value), copy=True)


def output_index(source, name, defines, args, output):
    if output is not None:
        if not isinstance(output, int) or not -len(args) <= output < len(args):
            raise TuneError(f"output={output!r}: give the index of the argument the kernel "
                            f"writes its result to (0..{len(args) - 1})")
        return output % len(args)
    signature = next(s for s in find_kernels(source, defines) if s.name == name)
    writable = [i for i, p in enumerate(signature.params) if p.is_pointer and not p.is_const]
    if len(writable) == 1 and writable[0] < len(args):
        return writable[0]
    return None if not writable else _ambiguous(name, signature, writable)


def _ambiguous(name, signature, writable):
    names = ", ".join(f"{i} ({signature.params[i].name})" for i in writable)
    raise TuneError(f"{name} writes through several pointers ({names}); say which holds the "
                    "result with output=<index>, or reference=False to skip the check")


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
