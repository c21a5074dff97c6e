"""The notebook layer: ``%load_ext workbench`` registers the magics of each
module below and the cell hooks. Modules only call the core."""
from __future__ import annotations

import importlib
import importlib.util

#: Modules that each define ``register(ipython)`` (and optionally ``unregister``).
MAGIC_MODULES = ("cuda_magic", "memory_magic", "bench_magic", "device_magic")

_loaded: list = []


def _set_cell(info=None):
    """pre_run_cell: remember the execution count the cell will get."""
    from ..core.session import session
    from IPython import get_ipython
    ip = get_ipython()
    session().cell = ip.execution_count if ip is not None else None


def load(ipython) -> None:
    if _loaded:
        return
    ipython.events.register("pre_run_cell", _set_cell)
    _set_cell()
    for name in MAGIC_MODULES:
        full = f"{__name__}.{name}"
        if importlib.util.find_spec(full) is None:
            continue
        module = importlib.import_module(full)
        module.register(ipython)
        _loaded.append(module)


def unload(ipython) -> None:
    for module in reversed(_loaded):
        if hasattr(module, "unregister"):
            module.unregister(ipython)
    _loaded.clear()
    try:
        ipython.events.unregister("pre_run_cell", _set_cell)
    except ValueError:
        pass
