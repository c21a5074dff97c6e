"""What both backends offer for persistent kernels (a kernel launched once that
runs until told to stop, such as the ring kernels of :mod:`workbench.rings`):
host memory the device reads and writes directly, and a launch that runs in the
background while the host goes on.

The interfaces live here; ``gpu`` and ``simulator`` implement them.
"""
from __future__ import annotations

import abc

import numpy as np


class MappedBuffer:
    """Host memory that kernels address directly: page-locked and mapped into
    the device's address space on a GPU, the shared arena on the simulator.

    ``host`` is a NumPy ``uint8`` view the host reads and writes; ``device_ptr``
    the address a kernel uses. ``free()`` gives the memory back (also on
    garbage collection of the owner the backend returned).
    """

    def __init__(self, host: np.ndarray, device_ptr: int, release):
        self.host = host
        self.device_ptr = int(device_ptr)
        self._release = release

    @property
    def nbytes(self) -> int:
        return int(self.host.nbytes)

    def free(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            self.host = np.empty(0, dtype=np.uint8)
            release()

    def __repr__(self) -> str:
        return f"<MappedBuffer {self.nbytes} bytes at device address {self.device_ptr:#x}>"


class PersistentLaunch(abc.ABC):
    """A kernel running in the background (see :meth:`Backend.launch_persistent`)."""

    #: The kernel's name, for messages.
    kernel: str = "?"

    @abc.abstractmethod
    def done(self) -> bool:
        """True once the kernel has ended (returned or faulted)."""

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds for the kernel to end; True if it did.
        Raises :class:`~workbench.KernelFault` when it faulted."""

    def fault(self):
        """The KernelFault of a kernel that faulted, else None (never raises)."""
        try:
            self.wait(0)
        except Exception as exc:  # noqa: BLE001 - the fault is the answer
            return exc
        return None

    @abc.abstractmethod
    def kill(self) -> bool:
        """End the kernel now if the backend can (the simulator can, a GPU
        cannot); True if it did."""


class PersistentKernels(abc.ABC):
    """Persistent kernels: host memory kernels address directly
    (:class:`MappedBuffer`) and launches that run in the background
    (:class:`PersistentLaunch`). The defaults say the backend has none."""

    def alloc_mapped(self, nbytes: int):
        """A :class:`~.persistent.MappedBuffer` of ``nbytes``: host memory that
        kernels read and write directly."""
        raise NotImplementedError(f"the {self.name} backend has no mapped host memory")

    def launch_persistent(self, function, grid, block, args, shared_mem: int = 0,
                          cooperative: bool = False):
        """Launch ``function`` and return at once with a
        :class:`~.persistent.PersistentLaunch`; the kernel runs until it returns
        by itself, while other launches go on. ``cooperative``: launched as
        ``cudaLaunchCooperativeKernel`` does (every block at once, so that
        ``this_grid().sync()`` works; the caller has checked that they fit)."""
        raise NotImplementedError(f"the {self.name} backend cannot run persistent kernels")

    def concurrent_blocks(self, cooperative: bool = False, threads: int = 1) -> int | None:
        """How many blocks (of ``threads`` threads) of one launch can run at
        once apart from the kernel's own occupancy (None: only occupancy limits
        it, as on a GPU); ``cooperative``: of a cooperative launch."""
        return None
