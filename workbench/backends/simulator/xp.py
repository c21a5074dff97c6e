"""Arrays in the simulator's device memory and ``wb.xp``, the NumPy-like
namespace whose creation functions return them.

A :class:`DeviceArray` is a NumPy array whose memory lies in the shared
arena, so kernels in the worker process read and write it directly. It is a
plain ``ndarray`` subclass: everything NumPy does works on it; ufuncs
(``x * 2``, ``x + y``, ``np.sqrt(x)``) give device arrays again, as on CuPy,
and ``.get()`` returns a host copy as CuPy's does.
"""
from __future__ import annotations

import types

import numpy as np

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # NumPy 1.x
    byte_bounds = np.byte_bounds


class DeviceArray(np.ndarray):
    """An array in the simulated device's memory (see module docstring)."""

    _arena = None  # set on the subclass made per backend

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        plain_in = tuple(x.view(np.ndarray) if isinstance(x, DeviceArray) else x for x in inputs)
        if out is not None:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, DeviceArray) else o
                                  for o in out)
        result = getattr(ufunc, method)(*plain_in, **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        arena_cls = type(self)
        if isinstance(result, tuple):
            return tuple(_to_arena(arena_cls, r) for r in result)
        return _to_arena(arena_cls, result)

    def copy(self, order="C"):
        return _to_arena(type(self), np.asarray(self).copy(order=order), force=True)

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        """NumPy's ``astype``, the result in device memory (``subok`` is only
        accepted: the result is always a device array, as on CuPy)."""
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        return _to_arena(type(self), np.asarray(self).astype(dtype, order=order, casting=casting),
                         force=True)

    def get(self):
        """A NumPy copy on the host (CuPy's spelling of ``wb.to_host``)."""
        return np.array(self.view(np.ndarray), copy=True)

    def __repr__(self):
        return "device_" + repr(self.view(np.ndarray)).replace("\n", "\n       ")

    def __reduce__(self):  # pickles as a host array
        return np.ndarray.__reduce__(self.view(np.ndarray))


def _to_arena(cls, value, force: bool = False):
    """``value`` in arena memory (unchanged if it is a scalar or already there)."""
    if not isinstance(value, np.ndarray) or value.ndim == 0:
        return value
    arena = cls._arena
    if not force and in_arena(arena, value):
        return value.view(cls)
    dest = empty_in(cls, value.shape, value.dtype)
    np.copyto(dest.view(np.ndarray), value, casting="unsafe")
    return dest


def in_arena(arena, array) -> bool:
    """True when all of ``array``'s memory lies in ``arena``."""
    if not isinstance(array, np.ndarray) or arena is None:
        return False
    addr = array.__array_interface__["data"][0]
    if array.size == 0:
        return arena.contains(addr, 0) if addr else False
    lo, hi = byte_bounds(array)
    return arena.contains(lo, hi - lo)


def empty_in(cls, shape, dtype=float, order="C"):
    """An uninitialised array of ``cls`` (a DeviceArray subclass) in its arena."""
    dtype = np.dtype(dtype)
    shape = (shape,) if np.isscalar(shape) else tuple(int(s) for s in shape)
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    address, block = cls._arena.allocate(count * dtype.itemsize)
    raw = np.asarray(block)[: count * dtype.itemsize]
    arr = raw.view(dtype).reshape(shape, order=order if order in ("C", "F") else "C")
    return arr.view(cls)


def _filled(cls, shape, dtype, value, order="C"):
    """An array of ``cls`` in its arena, every element ``value`` (or ``value``
    broadcast, as NumPy's ``full`` takes it)."""
    out = empty_in(cls, shape, dtype, order)
    np.copyto(out.view(np.ndarray), value, casting="unsafe")
    return out


def _like(a, dtype, shape) -> tuple:
    """``(shape, dtype)`` of a ``*_like`` call on ``a``."""
    return (np.shape(a) if shape is None else shape,
            (a.dtype if isinstance(a, np.ndarray) else np.asarray(a).dtype) if dtype is None else dtype)


_CREATION = ("zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
             "arange", "linspace", "logspace", "eye", "identity", "array", "asarray",
             "ascontiguousarray", "asanyarray", "copy", "frombuffer", "fromfunction", "tri",
             "diag", "meshgrid", "concatenate", "stack", "vstack", "hstack", "where", "tile",
             "repeat", "cumsum", "sort", "argsort", "clip", "dot", "matmul", "outer")


class ArrayNamespace(types.SimpleNamespace):
    """NumPy, with creation functions that return :class:`DeviceArray`.

    Anything not overridden is NumPy's own attribute, so ``xp.float32``,
    ``xp.allclose`` or ``xp.pi`` work as in NumPy.
    """

    def __init__(self, array_class):
        super().__init__()
        self._cls = array_class
        for name in _CREATION:
            setattr(self, name, self._wrap(getattr(np, name)))
        # made in device memory and filled there: no host array first (twice the memory)
        self.empty = lambda shape, dtype=float, order="C": empty_in(array_class, shape, dtype, order)
        self.zeros = lambda shape, dtype=float, order="C": _filled(array_class, shape, dtype, 0, order)
        self.ones = lambda shape, dtype=float, order="C": _filled(array_class, shape, dtype, 1, order)
        self.full = lambda shape, fill_value, dtype=None, order="C": _filled(
            array_class, shape, np.asarray(fill_value).dtype if dtype is None else dtype,
            fill_value, order)
        self.empty_like = lambda a, dtype=None, order="K", subok=True, shape=None: empty_in(
            array_class, *_like(a, dtype, shape))
        self.zeros_like = lambda a, dtype=None, order="K", subok=True, shape=None: _filled(
            array_class, *_like(a, dtype, shape), 0)
        self.ones_like = lambda a, dtype=None, order="K", subok=True, shape=None: _filled(
            array_class, *_like(a, dtype, shape), 1)
        self.full_like = lambda a, fill_value, dtype=None, order="K", subok=True, shape=None: _filled(
            array_class, *_like(a, dtype, shape), fill_value)
        self.random = _RandomNamespace(self)

    def _wrap(self, func):
        cls = self._cls
        # converting functions keep arrays already in device memory as they are
        force = func.__name__ not in ("asarray", "asanyarray", "ascontiguousarray")

        def wrapped(*args, **kwargs):
            return _wrap_result(cls, func(*args, **kwargs), force)
        wrapped.__name__ = func.__name__
        wrapped.__doc__ = func.__doc__
        return wrapped

    def asnumpy(self, array):
        """A host NumPy copy (CuPy's ``cupy.asnumpy``)."""
        return np.array(np.asarray(array).view(np.ndarray), copy=True)

    def get_array_module(self, *arrays):
        return self

    def __getattr__(self, name):
        return getattr(np, name)

    def __repr__(self):
        return "<wb.xp: NumPy with arrays in the simulator's device memory>"

    def __dir__(self):
        return sorted(set(dir(np)) | set(self.__dict__))


def _wrap_result(cls, value, force=True):
    if isinstance(value, np.ndarray) and value.ndim > 0:
        return _to_arena(cls, value, force=force)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
        return type(value)(_to_arena(cls, v, force=True) for v in value)
    return value


class _RandomNamespace:
    """``xp.random``: NumPy's random functions, results in device memory."""

    def __init__(self, xp):
        self._xp = xp

    def __getattr__(self, name):
        attr = getattr(np.random, name)
        if not callable(attr) or isinstance(attr, type):
            return attr
        cls = self._xp._cls

        def wrapped(*args, **kwargs):
            dtype = kwargs.pop("dtype", None) if name in ("random", "rand", "randn", "standard_normal",
                                                        "uniform", "normal") else None
            value = attr(*args, **kwargs)
            if dtype is not None and isinstance(value, np.ndarray):
                value = value.astype(dtype)
            return _wrap_result(cls, value)
        return wrapped
