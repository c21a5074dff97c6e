"""The notebook layer: ``%load_ext workbench`` registers the magics of each
module below and the cell hooks. Modules only call the core."""
from __future__ import annotations

import importlib
import importlib.util

from ..runtime.session import session

#: Modules that each define ``register(ipython)`` (and optionally ``unregister``).
MAGIC_MODULES = ("tracebacks", "cuda_magic", "memory_magic", "bench_magic", "device_magic", "profile_magic",
                 "program_magic", "graph_magic", "doctor_magic")

_loaded: list = []


def _set_cell(info=None):
    """pre_run_cell: remember the number (``In [N]``) of the cell being run.

    ``execution_count`` is no help here: IPython 9 increments it before
    ``pre_run_cell`` and IPython 8 after the cell. The input history is
    stored after this hook in both, so its length is the cell's number."""
    from IPython import get_ipython  # lazy: importing workbench.ipython.status must not load IPython
    ip = get_ipython()
    if ip is None:
        session().cell = None
        return
    history = getattr(ip.history_manager, "input_hist_parsed", None)
    session().cell = len(history) if history is not None else ip.execution_count


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
