"""Kernel faults on the GPU backend: a CUDA error that means a kernel
faulted becomes a :class:`~workbench.KernelFault` saying what to do."""
from __future__ import annotations

import contextlib

from cupy.cuda import driver, runtime

from ...errors import KernelFault

_STICKY_ERRORS = ("illegal", "misaligned", "assert", "launch failure", "exception", "trap",
                  "hardware stack")


def _kernel_fault(exc: BaseException) -> KernelFault | None:
    """The KernelFault for a CUDA error that means a kernel faulted (None for
    other errors): say what happened and what to do."""
    text = str(exc)
    if not any(word in text.lower() for word in _STICKY_ERRORS):
        return None
    return KernelFault(
        f"A kernel faulted on the GPU ({text}). CUDA cannot recover from this in the same "
        "process: save your work and restart the notebook kernel. To find the faulting block, "
        "thread and line, run the kernel on the CPU simulator in checked mode: "
        "wb.backend('simulator', checked=True), then re-run its %%cuda cell.", signal=text)


@contextlib.contextmanager
def _faults_as_kernel_faults():
    """A kernel that faulted surfaces at the next synchronising call as a CUDA
    error; raise it as a KernelFault."""
    try:
        yield
    except (runtime.CUDARuntimeError, driver.CUDADriverError) as exc:
        fault = _kernel_fault(exc)
        if fault is None:
            raise
        raise fault from None
