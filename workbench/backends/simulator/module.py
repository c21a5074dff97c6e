"""A compiled cell on the simulator (:class:`SimModule`), its kernels
(:class:`SimFunction`) and its global variables, which it keeps so that a
restarted worker gets them back."""
from __future__ import annotations

import struct
from typing import Any, Sequence

import numpy as np

from ...errors import NameNotFound
from ..contract import CompiledModule, KernelResources
from .protocol import Op, pack_str
from .source import global_symbol, launcher_symbol
from .worker import Worker, WorkerDied, WorkerError, WorkerGone


class SimFunction:
    """A launchable kernel of a :class:`SimModule`."""

    __slots__ = ("module", "name", "symbol", "requests", "waited_on")

    def __init__(self, module: "SimModule", name: str, symbol: str):
        self.module = module
        self.name = name
        self.symbol = symbol
        #: The start of its launch requests, per (library handle, grid, block,
        #: shared bytes, time limit): see :func:`.launch.request_prefix`.
        self.requests: dict = {}
        #: What a launch of it that runs for seconds is shown as (made once, not per launch).
        self.waited_on = f"kernel {name}"

    def __repr__(self) -> str:
        return f"<simulator kernel {self.name}{' (checked)' if self.module.checked else ''}>"


class SimModule(CompiledModule):
    """A compiled cell: a shared library loaded by the worker on first launch.
    ``backend`` is the :class:`~.backend.SimulatorBackend` that built it (its
    workers load it; not imported here: the backend imports this module)."""

    compiler = "g++"

    def __init__(self, path: str, kernels: Sequence[str], checked: bool,
                 resources: dict[str, KernelResources], backend,
                 nvrtc: Any = None, variables: Sequence = ()):
        self.path = path
        self.checked = checked
        self.nvrtc = nvrtc
        self._resources = resources
        self._backend = backend
        self._functions = {name: SimFunction(self, name, launcher_symbol(i))
                           for i, name in enumerate(kernels)}
        self._globals: dict[str, bytes] = {}
        # module variable -> the accessor generated for it (source.generate), by
        # qualified name and, where no other variable shares it, by plain name
        self._symbols: dict[str, str] = {}
        names = [v.name for v in variables]
        for i, v in enumerate(variables):
            self._symbols[v.qualified_name] = global_symbol(i)
            if names.count(v.name) == 1:
                self._symbols.setdefault(v.name, global_symbol(i))

    def get_function(self, name: str) -> SimFunction:
        try:
            return self._functions[name]
        except KeyError:
            known = ", ".join(self._functions) or "none"
            raise NameNotFound(f"no kernel {name!r} in this module (kernels: {known}); template "
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
                _write_global(worker, handle, self._symbol(name), name, data)
        return handle

    def write_global(self, name: str, data: bytes) -> None:
        """Write ``data`` at the start of module variable ``name`` (like
        ``cudaMemcpyToSymbol``); kept across worker restarts. KeyError when
        there is no such variable, ValueError when it is smaller than ``data``."""
        try:
            with self._backend.lock:
                worker = self._backend.worker_for(self.checked)
                try:
                    _write_global(worker, self.load_into(worker), self._symbol(name), name, data)
                except WorkerGone:  # ended while idle: once more, in a new worker
                    _write_global(worker, self.load_into(worker), self._symbol(name), name, data)
                self._globals[name] = bytes(data)
        except WorkerDied as died:
            raise self._backend.worker_ended(died, f"setting global variable {name!r}") from None

    def read_global(self, name: str, nbytes: int) -> bytes:
        """The first ``nbytes`` of module variable ``name``."""
        try:
            with self._backend.lock:
                worker = self._backend.worker_for(self.checked)
                for attempt in (1, 2):
                    try:
                        return worker.request(Op.SYMBOL_READ, struct.pack("<I", self.load_into(worker))
                                              + pack_str(self._symbol(name))
                                              + struct.pack("<QQ", 0, int(nbytes)))
                    except WorkerGone:  # ended while idle: once more, in a new worker
                        if attempt == 2:
                            raise
        except WorkerDied as died:
            raise self._backend.worker_ended(died, f"reading global variable {name!r}") from None
        except WorkerError as exc:
            raise _no_variable(name, str(exc)) from None

    def _symbol(self, name: str) -> str:
        return self._symbols.get(name.lstrip(":"), name)

    def set_global(self, name: str, value) -> None:
        """Set variable ``name`` to the bytes of ``value`` (see :meth:`write_global`)."""
        self.write_global(name, np.ascontiguousarray(value).tobytes())

    def get_global(self, name: str, dtype, count: int = 1) -> np.ndarray:
        """The current value of global variable ``name`` as ``count`` items of ``dtype``."""
        dtype = np.dtype(dtype)
        data = self.read_global(name, dtype.itemsize * count)
        return np.frombuffer(data, dtype=dtype, count=count).copy()


def _no_variable(name: str, reason: str) -> Exception:
    if reason.startswith("the variable has"):
        return ValueError(f"global variable {name!r}: {reason}")
    return KeyError(f"no __constant__ or __device__ variable {name!r} in this module")


def _write_global(worker: Worker, handle: int, symbol: str, name: str, data: bytes) -> None:
    try:
        worker.request(Op.SYMBOL_WRITE, struct.pack("<I", handle) + pack_str(symbol)
                       + struct.pack("<QQ", 0, len(data)) + data)
    except WorkerError as exc:
        raise _no_variable(name, str(exc)) from None
