"""Device arrays on the active backend: ``wb.to_device``, ``wb.to_host``,
``wb.allocate``, ``wb.synchronize`` and ``wb.xp``.

Each works on the active backend (the GPU through CuPy, or the simulator);
an allocation that fails for lack of memory raises the workbench's
:class:`~workbench.OutOfMemoryError`, which says what holds the memory.
"""
from __future__ import annotations

import functools
import types
import weakref

import numpy as np

from ..errors import ArgumentTypeError, WorkbenchError
from ..memory.oom import is_out_of_memory, out_of_memory
from ..runtime.session import backend, session
from .streams import refuse_in_capture
from .transfers import check_shape


def allocate(shape, dtype=np.float32):
    """An uninitialised device array (tracked by the memory tracker). Its
    bytes hold 0xA5 and count as never written until something writes them
    (initcheck: ``wb.sanitize(..., tool="initcheck")``)."""
    check_shape(shape, "wb.allocate")
    dtype = np.dtype(dtype)
    b = backend()
    try:
        array = b.allocate(shape, dtype)
    except Exception as exc:
        if is_out_of_memory(exc, b):
            size = int(np.prod(shape if isinstance(shape, tuple) else (shape,))) * dtype.itemsize
            raise out_of_memory(size, exc) from None
        raise
    if session().timing_log.capture is None:  # (a graph being captured would record the fill)
        b.track_uninitialised(array)
    return array


def to_device(array):
    """Copy a host array to the device (returns a device array); an array
    already on the device is returned as it is. An array of another library
    (a Numba device array, say) is copied through the host; a structured
    dtype keeps its fields."""
    b = backend()
    if b.is_device_array(array):
        return array
    if isinstance(array, (str, bytes, bytearray)):
        raise ArgumentTypeError(
            f"wb.to_device takes numbers (a NumPy array, a list, a scalar), not a "
            f"{type(array).__name__}; for text, encode it first: "
            f"np.frombuffer(text.encode(), np.uint8)")
    host = np.asarray(array)
    fields = getattr(array, "dtype", None)
    if isinstance(fields, np.dtype) and fields.names and host.dtype != fields \
            and host.dtype.itemsize == fields.itemsize:  # records another library hands over as
        host = host.view(fields)                         # bytes ("|V16"): their fields kept
    if host.dtype.kind not in "biufcV":
        raise ArgumentTypeError(f"wb.to_device takes numeric data; this is an array of dtype "
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


# -- wb.xp ------------------------------------------------------------------------------

#: The creation functions of ``wb.xp`` that allocate device memory: their
#: out-of-memory errors become the workbench's. (name: its leading parameters)
_ALLOCATING = {"zeros": ("shape", "dtype"), "ones": ("shape", "dtype"), "empty": ("shape", "dtype"),
               "full": ("shape", "fill_value", "dtype"), "zeros_like": ("a", "dtype"),
               "ones_like": ("a", "dtype"), "empty_like": ("a", "dtype"),
               "full_like": ("a", "fill_value", "dtype")}


class ArrayModule:
    """``wb.xp``: the active backend's array module (CuPy on a GPU, the
    simulator's NumPy-like namespace), unchanged but for its creation
    functions (``zeros``, ``ones``, ``full``, ``empty`` and their ``_like``
    forms), which raise :class:`~workbench.OutOfMemoryError` with the
    workbench's explanation when the device cannot hold the array. Both
    backends make these arrays in device memory, with no host copy first.
    ``__wrapped__`` is the backend's own module."""

    def __init__(self, b):
        self.__wrapped__ = b.xp
        self._backend = weakref.ref(b)  # (kept per backend in a weak dictionary: no cycle)
        for name in _ALLOCATING:
            if hasattr(self.__wrapped__, name):
                setattr(self, name, self._allocating(name, getattr(self.__wrapped__, name)))

    def _allocating(self, name: str, func):
        backend_ref = self._backend

        @functools.wraps(func)
        def allocate(*args, **kwargs):
            try:
                return func(*args, **kwargs)
            except Exception as exc:
                b = backend_ref()
                if b is not None and is_out_of_memory(exc, b):
                    raise out_of_memory(_requested_bytes(name, args, kwargs), exc) from None
                raise
        return allocate

    def __getattr__(self, name):
        return getattr(self.__wrapped__, name)

    def __dir__(self):
        return sorted(set(dir(self.__wrapped__)) | set(_ALLOCATING))

    def __repr__(self) -> str:
        b = self._backend()
        if not isinstance(self.__wrapped__, types.ModuleType):  # (the simulator's names itself)
            return repr(self.__wrapped__)
        return f"<wb.xp: {self.__wrapped__.__name__} on the {b.name if b else 'closed'} backend>"


def _requested_bytes(name: str, args, kwargs) -> int | None:
    """The bytes creation function ``name`` was asked for (None where unclear)."""
    given = dict(zip(_ALLOCATING[name], args), **kwargs)
    try:
        if name.endswith("_like"):
            a = given["a"]
            shape = given.get("shape") or np.shape(a)
            dtype = given.get("dtype") or getattr(a, "dtype", None) or np.asarray(a).dtype
        else:
            shape, dtype = given["shape"], given.get("dtype")
            if dtype is None:
                dtype = np.asarray(given["fill_value"]).dtype if name == "full" else np.float64
        shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
        count = 1
        for extent in shape:
            count *= int(extent)
        return count * np.dtype(dtype).itemsize
    except Exception:  # the explanation must never hide the error itself
        return None


_MODULES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def xp() -> ArrayModule:
    """``wb.xp`` for the active backend (one per backend instance)."""
    b = backend()
    entry = _MODULES.get(b)
    if entry is None or entry.__wrapped__ is not b.xp:
        entry = _MODULES[b] = ArrayModule(b)
    return entry
