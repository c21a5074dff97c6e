"""A compiled cell on the simulator (:class:`SimModule`), its kernels
(:class:`SimFunction`) and its global variables, which it keeps so that a
restarted worker gets them back."""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..base import CompiledModule, KernelResources
from .protocol import Op, pack_str
from .source import launcher_symbol
from .worker import Worker, WorkerDied, WorkerError

if TYPE_CHECKING:
    from .backend import SimulatorBackend


class SimFunction:
    """A launchable kernel of a :class:`SimModule`."""

    __slots__ = ("module", "name", "symbol")

    def __init__(self, module: "SimModule", name: str, symbol: str):
        self.module = module
        self.name = name
        self.symbol = symbol

    def __repr__(self) -> str:
        return f"<simulator kernel {self.name}{' (checked)' if self.module.checked else ''}>"


class SimModule(CompiledModule):
    """A compiled cell: a shared library loaded by the worker on first launch."""

    compiler = "g++"

    def __init__(self, path: str, kernels: Sequence[str], checked: bool,
                 resources: dict[str, KernelResources], backend: "SimulatorBackend",
                 nvrtc: Any = None):
        self.path = path
        self.checked = checked
        self.nvrtc = nvrtc
        self._resources = resources
        self._backend = backend
        self._functions = {name: SimFunction(self, name, launcher_symbol(i))
                           for i, name in enumerate(kernels)}
        self._globals: dict[str, bytes] = {}

    def get_function(self, name: str) -> SimFunction:
        try:
            return self._functions[name]
        except KeyError:
            known = ", ".join(self._functions) or "none"
            raise KeyError(f"no kernel {name!r} in this module (kernels: {known}); template "
                           "kernels need their instantiation, e.g. instantiate=['scale<float>']"
                           ) from None

    def resources(self, name: str) -> KernelResources:
        return self._resources.get(name, KernelResources())

    @property
    def kernel_names(self) -> list[str]:
        return list(self._functions)

    def load_into(self, worker: Worker) -> int:
        """This library's handle in ``worker``, loading it (and setting the
        global variables set from Python) if the worker does not have it yet."""
        fresh = self.path not in worker.libraries
        handle = worker.load(self.path)
        if fresh:
            for name, data in self._globals.items():
                _write_global(worker, handle, name, data)
        return handle

    def set_global(self, name: str, value) -> None:
        """Set a ``__constant__`` or ``__device__`` variable ``name`` to the
        bytes of ``value`` (like ``cudaMemcpyToSymbol``); kept across worker
        restarts."""
        data = np.ascontiguousarray(value).tobytes()
        try:
            with self._backend.lock:
                worker = self._backend.worker_for(self.checked)
                _write_global(worker, self.load_into(worker), name, data)
                self._globals[name] = data
        except WorkerDied as died:
            raise self._backend.worker_ended(died, f"setting global variable {name!r}") from None

    def get_global(self, name: str, dtype, count: int = 1) -> np.ndarray:
        """The current value of global variable ``name`` as ``count`` items of ``dtype``."""
        dtype = np.dtype(dtype)
        try:
            with self._backend.lock:
                worker = self._backend.worker_for(self.checked)
                handle = self.load_into(worker)
                data = worker.request(Op.SYMBOL_READ, struct.pack("<I", handle) + pack_str(name)
                                      + struct.pack("<QQ", 0, dtype.itemsize * count))
        except WorkerDied as died:
            raise self._backend.worker_ended(died, f"reading global variable {name!r}") from None
        except WorkerError as exc:
            raise KeyError(f"no global variable {name!r} in this module: {exc}") from None
        return np.frombuffer(data, dtype=dtype, count=count).copy()


def _write_global(worker: Worker, handle: int, name: str, data: bytes) -> None:
    try:
        worker.request(Op.SYMBOL_WRITE, struct.pack("<I", handle) + pack_str(name)
                       + struct.pack("<QQ", 0, len(data)) + data)
    except WorkerError as exc:
        raise KeyError(f"no global variable {name!r} in this module: {exc}") from None
