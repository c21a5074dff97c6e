"""Device arrays on the active backend: ``wb.to_device``, ``wb.to_host``,
``wb.allocate``, ``wb.synchronize``.

Each works on the active backend (the GPU through CuPy, or the simulator);
an allocation that fails for lack of memory raises the workbench's
:class:`~workbench.OutOfMemoryError`, which says what holds the memory.
"""
from __future__ import annotations

import numpy as np

from ..errors import WorkbenchError
from ..memory.oom import is_out_of_memory, out_of_memory
from ..runtime.session import backend, session
from .streams import refuse_in_capture
from .transfers import check_shape


def allocate(shape, dtype=np.float32):
    """An uninitialised device array (tracked by the memory tracker)."""
    check_shape(shape, "wb.allocate")
    dtype = np.dtype(dtype)
    b = backend()
    try:
        return b.allocate(shape, dtype)
    except Exception as exc:
        if is_out_of_memory(exc, b):
            size = int(np.prod(shape if isinstance(shape, tuple) else (shape,))) * dtype.itemsize
            raise out_of_memory(size, exc) from None
        raise


def to_device(array):
    """Copy a host array to the device (returns a device array); an array
    already on the device is returned as it is."""
    b = backend()
    if b.is_device_array(array):
        return array
    if isinstance(array, (str, bytes, bytearray)):
        raise TypeError(f"wb.to_device takes numbers (a NumPy array, a list, a scalar), not a "
                        f"{type(array).__name__}; for text, encode it first: "
                        f"np.frombuffer(text.encode(), np.uint8)")
    host = np.asarray(array)
    if host.dtype.kind not in "biufcV":
        raise TypeError(f"wb.to_device takes numeric data; this is an array of dtype "
                        f"{host.dtype} ({host.dtype.kind!r}); convert it with .astype(...)")
    _not_in_capture("to_device")
    try:  # logged as a copy (kind "copy", its bytes) on the current stream
        return session().timing_log.timed_op(b, "copy", "to_device H2D", int(host.nbytes),
                                             b.current_stream(), b.to_device, host)
    except Exception as exc:
        if is_out_of_memory(exc, b):
            raise out_of_memory(host.nbytes, exc) from None
        raise


def to_host(array) -> np.ndarray:
    """Copy a device array to a new NumPy array (waits for pending work)."""
    b = backend()
    if not b.is_device_array(array):
        return b.to_host(array)
    _not_in_capture("to_host")
    return session().timing_log.timed_op(b, "copy", "to_host D2H", int(array.nbytes),
                                         b.current_stream(), b.to_host, array)


def _not_in_capture(what: str) -> None:
    if session().timing_log.capture is not None:
        raise WorkbenchError(
            f"wb.{what}() inside wb.graph(): a graph cannot hold a synchronous copy (nor the "
            f"allocation it makes). Make the arrays before the graph and copy with "
            f"wb.copy(dst, src) from or to a wb.pinned() host array.")


def synchronize() -> None:
    """Wait for all work on the active device."""
    refuse_in_capture("wb.synchronize()")
    backend().synchronize()
