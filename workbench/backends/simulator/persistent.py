"""Persistent kernels on the simulator (see :mod:`..contract.persistent`).

Launches on the simulator are synchronous: the worker answers when the kernel
has finished. A persistent launch therefore gets a worker process of its own,
mapping the same arena, and a Python thread that waits for its reply; the
host meanwhile reads and writes the kernel's queues in the arena directly
(the arena is shared memory), and ordinary launches go on in the main worker.
A small launch's blocks run one after another on one OS thread, so a
persistent kernel has one block here (:meth:`SimulatorBackend.concurrent_blocks`),
unless it is launched cooperatively: then each block has an OS thread.
"""
from __future__ import annotations

import threading

import numpy as np

from ...errors import KernelArgumentError
from ..contract import MappedBuffer, PersistentLaunch
from . import build
from .faults import kernel_fault
from .launch import argument_bytes, launch_request
from .protocol import Op
from .worker import Worker, WorkerDied, WorkerError

#: The time limit a persistent kernel runs under (the worker counts in u32 milliseconds).
TIME_LIMIT_S = 2**31 / 1000


def alloc_mapped(backend, nbytes: int) -> MappedBuffer:
    """Arena memory: the notebook and every worker see it at one address."""
    holder = [backend.allocate((max(1, int(nbytes)),), np.uint8)]
    host = holder[0].view(np.ndarray)  # freed with the last view of it
    return MappedBuffer(host, backend.device_pointer(holder[0]), holder.clear)


class SimPersistentLaunch(PersistentLaunch):
    """A kernel running in a worker process of its own."""

    def __init__(self, backend, function, grid, block, args, shared_mem: int,
                 cooperative: bool = False):
        self.kernel = function.name
        module = function.module
        self._worker = Worker(backend.arena, lambda: build.worker_executable(module.checked),
                              threads=backend.threads)
        blobs = [argument_bytes(a, i, backend.is_device_array) for i, a in enumerate(args)]
        try:
            payload = launch_request(module.load_into(self._worker), function.symbol, grid, block,
                                     shared_mem, TIME_LIMIT_S, blobs, backend.arena, module.checked,
                                     cooperative=cooperative, whole_arena=True)
        except WorkerError as exc:
            self._worker.stop()
            raise KernelArgumentError(str(exc)) from None
        self._fault = None
        self._killed = False
        self._ended = threading.Event()
        self._arena = backend.arena
        self._thread = threading.Thread(target=self._run, args=(payload, module.checked),
                                        name=f"wb-persistent-{self.kernel}", daemon=True)
        self._thread.start()

    def _run(self, payload: bytes, checked: bool) -> None:
        try:
            self._worker.request(Op.LAUNCH, payload, timeout=TIME_LIMIT_S)
        except WorkerDied as died:
            if not self._killed:
                self._fault = kernel_fault(self.kernel, checked, died, TIME_LIMIT_S, self._arena)
        except Exception as exc:  # noqa: BLE001 - reported by wait()
            if not self._killed:
                self._fault = exc
        finally:
            self._worker.stop()
            self._ended.set()

    def done(self) -> bool:
        return self._ended.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        if not self._ended.wait(timeout):
            return False
        if self._fault is not None:
            raise self._fault
        return True

    def kill(self) -> bool:
        if self._ended.is_set():
            return False
        self._killed = True
        self._worker.stop()
        self._ended.wait(5.0)
        return True
