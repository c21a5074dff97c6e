"""The process a profiler starts: ``python -m workbench.profiling.child FOLDER``.

It re-creates what :mod:`.ship` wrote to ``FOLDER`` and runs it on the GPU
backend: the modules are compiled again from their sources, then either one
kernel is launched ``warmup`` times and once more (the profiler measures
only that last launch), or a cell's code is run with the kernels and the
values it reads bound by name. The workbench is imported from the same
source tree as the notebook's (``PYTHONPATH``). An error prints its
traceback and exits with status 1; the parent reports it.
"""
from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np

from ..core.arrays import synchronize, to_device
from ..core.compiler import compile as wb_compile
from ..runtime import nvtx
from ..runtime.devices import device
from ..runtime.session import backend
from . import ship


def _compile_all(spec: dict) -> dict:
    return {m["name"]: wb_compile(**m) for m in spec["modules"]}


def _argument(entry: dict, arrays, device: dict):
    kind = entry["kind"]
    if kind == "null":
        return None
    if kind == "device":
        key = entry["key"]
        if key not in device:
            if key + ship.UNWRITTEN in arrays.files:
                device[key] = _partly_written(arrays[key], arrays[key + ship.UNWRITTEN])
            else:
                device[key] = to_device(arrays[key])
        return device[key]
    if kind == "tuple":
        return tuple(entry["value"])
    value = entry["value"]
    return np.dtype(entry["dtype"]).type(value) if entry.get("dtype") else value


def _partly_written(host: np.ndarray, packed: np.ndarray):
    """A device array of ``host``'s shape whose bytes are copied from ``host``
    only where ``packed`` (a bitmap of the unwritten bytes) says they were
    written: initcheck sees the others as never written, as in the notebook."""
    b = backend()
    flat = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
    unwritten = np.unpackbits(packed, count=flat.size, bitorder="little").astype(bool)
    raw = b.allocate((flat.size,), np.uint8)  # (not wb.allocate: no fill, nothing written)
    edges = np.flatnonzero(np.diff(np.concatenate(([True], unwritten, [True])).astype(np.int8)))
    for lo, hi in zip(edges[::2], edges[1::2]):  # the written runs
        b.copy(raw[lo:hi], flat[lo:hi])
    b.synchronize()
    return raw.view(host.dtype).reshape(host.shape)


def run_kernel(spec: dict, folder: Path) -> None:
    modules = _compile_all(spec)
    kernel = modules[spec["module"]][spec["kernel"]]
    with np.load(folder / ship.ARRAYS) as arrays:
        device: dict = {}
        args = [_argument(e, arrays, device) for e in spec["args"]]
    launch = {"grid": tuple(spec["grid"]), "block": tuple(spec["block"]),
              "shared_mem": spec["shared_mem"]}
    for _ in range(spec["warmup"]):  # skipped by the profiler's --launch-skip
        kernel(*args, **launch)
    synchronize()
    kernel(*args, **launch)
    synchronize()


def run_code(spec: dict, folder: Path) -> None:
    modules = _compile_all(spec)
    workbench = sys.modules[__package__.split(".")[0]]  # the package itself, for `wb.` in the cell
    ns: dict = {"__name__": "__main__", "wb": workbench, "workbench": workbench, "np": np,
                "numpy": np}
    for name, (module, kind, key) in spec["bound"].items():
        m = modules[module]
        ns[name] = m if kind == "module" else m.templates[key] if kind == "template" else m[key]
    shipped = pickle.loads((folder / ship.VARIABLES).read_bytes())
    for name, module_name in shipped["imports"].items():
        ns[name] = __import__(module_name, fromlist=["_"])
    ns.update(shipped["host"])
    with np.load(folder / ship.ARRAYS) as arrays:
        for name in spec["device_names"]:
            ns[name] = to_device(arrays[name])
    code = compile(spec["code"], "<profiled cell>", "exec")
    nvtx.push("profiled cell")
    try:
        exec(code, ns)  # noqa: S102 -- the user's own cell, run as the notebook would
        synchronize()
    finally:
        nvtx.pop()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = Path(argv[0])
    spec = json.loads((folder / ship.SPEC).read_text())
    if spec.get("device"):
        device(spec["device"])
    run = run_kernel if spec["mode"] == "kernel" else run_code
    if spec.get("count") is not None:  # on the simulator: the launches counted
        from .simulated import count_code  # (only a counting child needs it)
        report = count_code(lambda: run(spec, folder), **spec["count"])
        (folder / ship.COUNTS).write_bytes(pickle.dumps(report))
        return 0
    run(spec, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
