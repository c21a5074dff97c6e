"""What a profiling child process needs, written to a folder.

A profiler must start the process it measures, so a launch or a cell of the
notebook is run again in a fresh Python process (:mod:`.child`). This module
writes what that process re-creates: ``spec.json`` (the compiled modules'
sources and options, the kernel and its launch configuration, or the cell's
code), ``arrays.npz`` (device arrays copied to the host, saved with NumPy)
and, for a cell, ``variables.pickle`` (the plain values the cell reads).
"""
from __future__ import annotations

import ast
import json
import pickle
import types
from pathlib import Path

import numpy as np

from ..core.compiler import Module
from ..core.kernel import Kernel, KernelTemplate
from ..errors import KernelArgumentError, ProfileFailed
from ..runtime.session import session

SPEC = "spec.json"
ARRAYS = "arrays.npz"
VARIABLES = "variables.pickle"
#: The report a child that counted launches on the simulator writes back.
COUNTS = "counted.pickle"


def module_spec(module) -> dict:
    """A compiled module as the keyword arguments of :func:`workbench.compile`."""
    o = module.options
    return {"source": module.source, "name": module.name, "arch": o.arch,
            "defines": list(o.defines), "std": o.std, "fast_math": o.fast_math,
            "options": list(o.extra), "checked": o.checked, "line_offset": module.line_offset,
            "instantiate": [e for t in module.templates.values() for e in t.instances]}


def kernel_key(kernel: Kernel) -> str:
    """The name ``module[name]`` finds ``kernel`` under (a template instance by its expression)."""
    module = kernel.module
    for name, k in module.kernels.items():
        if k is kernel:
            return name
    for template in module.templates.values():
        for expr, k in template.instances.items():
            if k is kernel:
                return expr
    return kernel.name


#: The suffix of an array's unwritten bytes in ``arrays.npz`` (a packed bitmap).
UNWRITTEN = "__unwritten"


def _arg_entry(i: int, value, b, arrays: dict, seen: dict, kernel: str,
               initialisation: bool = False) -> dict:
    if value is None:
        return {"kind": "null"}
    if b.is_device_array(value):
        key = seen.get(id(value))
        if key is None:  # the same array twice stays one array in the child
            key = seen[id(value)] = f"a{i}"
            arrays[key] = np.asarray(b.to_host(value))
            unwritten = b.uninitialised(value) if initialisation else None
            if unwritten is not None:  # the child leaves these bytes unwritten (initcheck)
                arrays[key + UNWRITTEN] = np.packbits(unwritten, bitorder="little")
        return {"kind": "device", "key": key}
    if isinstance(value, (bool, int, float)):
        return {"kind": "scalar", "value": value}
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return {"kind": "scalar", "value": value.item(), "dtype": value.dtype.str}
    if isinstance(value, (tuple, list)) and all(isinstance(v, (bool, int, float)) for v in value):
        return {"kind": "tuple", "value": list(value)}
    raise KernelArgumentError(
        f"{kernel}(): argument {i} ({type(value).__name__}) cannot be sent to the profiling "
        f"process; wb.profile takes device arrays, None and numbers.")


def write_kernel_spec(folder: Path, kernel, args, grid, block, shared_mem: int, n, warmup: int,
                      *, lineinfo: bool = False, initialisation: bool = False) -> str:
    """Write what the child needs to launch ``kernel(*args)`` ``warmup + 1``
    times; returns the kernel's name as ncu filters it. ``lineinfo``: the
    module is compiled with ``-lineinfo`` (compute-sanitizer names lines);
    ``initialisation``: the bytes of ``wb.allocate``'s arrays that nothing
    wrote stay unwritten in the child (initcheck)."""
    if isinstance(kernel, KernelTemplate):
        raise KernelArgumentError(
            f"wb.profile: {kernel.name} is a template; pick an instance, e.g. "
            f"{kernel.name}['float'] (instances: {', '.join(kernel.instances) or 'none'}).")
    if not isinstance(kernel, Kernel):
        raise KernelArgumentError(
            f"wb.profile takes a CUDA C++ kernel (from %%cuda or wb.compile), got "
            f"{type(kernel).__name__}; profile Numba and Triton kernels with %%ncu.")
    kernel.convert_args(args)  # the user's mistakes surface here, not in the child
    grid3, block3 = kernel.launch_config(grid, block, shared_mem, n)
    arrays, seen = {}, {}
    entries = [_arg_entry(i, a, kernel.backend, arrays, seen, kernel.name, initialisation)
               for i, a in enumerate(kernel._complete(tuple(args)))]
    np.savez(folder / ARRAYS, **arrays)
    spec_of_module = module_spec(kernel.module)
    if lineinfo and "-lineinfo" not in spec_of_module["options"]:
        spec_of_module["options"] = [*spec_of_module["options"], "-lineinfo"]
    spec = {"mode": "kernel", "device": kernel.backend.current_device(),
            "modules": [spec_of_module], "module": kernel.module.name,
            "kernel": kernel_key(kernel), "args": entries, "grid": [int(v) for v in grid3],
            "block": [int(v) for v in block3], "shared_mem": int(shared_mem), "warmup": int(warmup)}
    (folder / SPEC).write_text(json.dumps(spec))
    return kernel.signature.name


def _names(code: str) -> tuple[list[str], set[str]]:
    """Names the code reads (in order of first use) and names it assigns."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ProfileFailed(f"the cell is not valid Python (line {exc.lineno}: {exc.msg}); "
                            f"%%ncu runs plain Python, no other magics") from None
    read, stored = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (stored.add(node.id) if isinstance(node.ctx, (ast.Store, ast.Del))
             else read.setdefault(node.id, None))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stored.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stored.update((a.asname or a.name).split(".")[0] for a in node.names)
    return list(read), stored


def _plain(value) -> bool:
    """True for values pickled by value and safe to re-create in the child."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, np.generic,
                                           np.ndarray, np.dtype, range, slice)):
        return True
    if isinstance(value, (tuple, list, set, frozenset)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    return isinstance(value, type) and issubclass(value, np.generic)  # np.float32 itself


def _owner(value, modules) -> tuple | None:
    """``(module, kind, key)`` when ``value`` is a module, kernel or template
    compiled in this session: how the child finds it again."""
    for m in modules:
        if value is m:
            return m, "module", m.name
        if isinstance(value, Kernel) and value.module is m:
            return m, "kernel", kernel_key(value)
        for name, template in m.templates.items():
            if value is template:
                return m, "template", name
    return None


def write_code_spec(folder: Path, code: str, user_ns: dict | None, b, count: dict | None = None) -> None:
    """Write what the child needs to run ``code``: the values it reads from
    ``user_ns``, by what they are: kernels, templates and modules compiled in
    this session (their modules are compiled again there), device arrays,
    NumPy arrays, numbers, strings, containers of them, imported modules.
    ``count``: the child counts the launches on the simulator instead
    (:func:`.simulated.count_code`'s options)."""
    user_ns = user_ns or {}
    read, stored = _names(code)
    compiled = [m for m in session().modules.values() if m.backend is b]
    modules, bound = {}, {}
    host, device, imports, refused = {}, {}, {}, []
    for name in read:
        if name not in user_ns or name.startswith("__"):
            continue
        value = user_ns[name]
        owner = (_owner(value, compiled) if isinstance(value, (Kernel, KernelTemplate, Module))
                 else None)
        if owner is None and isinstance(value, (Kernel, KernelTemplate, Module)):
            raise ProfileFailed(f"{name} was compiled on another backend than the active one "
                                f"({b.name}); run its %%cuda cell (or wb.compile) again first.")
        if owner is not None:
            module, kind, key = owner
            modules[module.name] = module
            bound[name] = [module.name, kind, key]
        elif isinstance(value, types.ModuleType):
            imports[name] = value.__name__
        elif b.is_device_array(value):
            device[name] = np.asarray(b.to_host(value))
        elif _plain(value):
            host[name] = value
        elif name not in stored:
            refused.append(f"{name} ({type(value).__name__})")
    if refused:
        raise ProfileFailed(
            f"the profiled cell runs in a new process, which cannot re-create "
            f"{', '.join(refused)} from this notebook: define {'it' if len(refused) == 1 else 'them'} "
            f"inside the cell (device arrays, NumPy arrays, numbers, strings and the kernels of "
            f"this session are sent over).")
    np.savez(folder / ARRAYS, **device)
    (folder / VARIABLES).write_bytes(pickle.dumps({"host": host, "imports": imports}))
    spec = {"mode": "code", "device": b.current_device(), "code": code,
            "modules": [module_spec(m) for m in modules.values()], "bound": bound,
            "device_names": list(device), "count": count}
    (folder / SPEC).write_text(json.dumps(spec))
