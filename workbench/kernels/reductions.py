"""Reductions of a whole array to one value: sum, mean, max, min, argmax, dot
and norm, for float32 and float64 arrays of any shape and length.

Two launches (``cu/reductions.cu``): a grid-stride pass of a few blocks per
multiprocessor writes one partial per block, then one block combines them.
Each returns a 0-d device array (``argmax``: int64, a flat index).
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentValueError, KernelArgumentError
from ..runtime.session import backend as active_backend
from .library import KernelSpec, c_type, check_dtype, grid_1d, module, register

FAMILY = "reductions"
DTYPES = ("float32", "float64")
_BLOCK = 256
_FINAL_BLOCK = 256

#: The codes of ``enum ReduceOp`` in reductions.cu.
_SUM, _MAX, _MIN, _ARGMAX, _DOT, _SUMSQ = range(6)

INSTANTIATE = tuple(f"{kernel}<{t}, {op}>" for kernel in ("reduce_partial", "reduce_final")
                    for t in ("float", "double") for op in range(6))


def _reduce(name: str, op: int, inputs: dict, *, scale=None, take_sqrt=False, identity=True):
    dtype = check_dtype(name, inputs, DTYPES)
    arrays = list(inputs.values())
    x = arrays[0]
    y = arrays[1] if len(arrays) > 1 else x
    if len(arrays) > 1 and x.size != y.size:
        raise KernelArgumentError(f"wb.kernels.{name}(): x has {x.size} elements and y has "
                                  f"{y.size}; they must have as many.")
    n = int(x.size)
    if n == 0 and not identity:
        raise ArgumentValueError(
            f"wb.kernels.{name}(): the array is empty and {name} has no identity "
            f"(as NumPy's {name} of an empty array).")
    xp = active_backend().xp
    width = 4 if dtype == np.float32 else 2
    blocks = grid_1d(n, _BLOCK, per_thread=width, blocks_per_sm=8)
    partial_values = xp.empty(blocks, dtype=dtype)
    partial_indices = xp.empty(blocks, dtype=np.int64)
    result = xp.empty(1, dtype=dtype)
    result_index = xp.empty(1, dtype=np.int64)
    compiled = module(FAMILY)
    t = c_type(dtype)
    compiled[f"reduce_partial<{t}, {op}>"](x, y, n, partial_values, partial_indices,
                                           grid=blocks, block=_BLOCK)
    factor = (1.0 / n if n else float("nan")) if scale == "mean" else 1.0
    compiled[f"reduce_final<{t}, {op}>"](partial_values, partial_indices, blocks, result,
                                         result_index, factor, int(take_sqrt),
                                         grid=1, block=_FINAL_BLOCK)
    return (result_index if op == _ARGMAX else result).reshape(())


def sum(x):
    """The sum of every element (0-d device array)."""
    return _reduce("sum", _SUM, {"x": x})


def mean(x):
    """The mean of every element (NaN for an empty array)."""
    return _reduce("mean", _SUM, {"x": x}, scale="mean")


def max(x):
    """The largest element (NaN if any is NaN); an empty array raises ValueError."""
    return _reduce("max", _MAX, {"x": x}, identity=False)


def min(x):
    """The smallest element (NaN if any is NaN); an empty array raises ValueError."""
    return _reduce("min", _MIN, {"x": x}, identity=False)


def argmax(x):
    """The flat index of the largest element (the first one on ties), int64."""
    return _reduce("argmax", _ARGMAX, {"x": x}, identity=False)


def dot(x, y):
    """The dot product of two arrays with as many elements."""
    return _reduce("dot", _DOT, {"x": x, "y": y})


def norm(x):
    """The Euclidean norm ``sqrt(sum(x * x))`` of every element."""
    return _reduce("norm", _SUMSQ, {"x": x}, take_sqrt=True)


def _xp():
    return active_backend().xp


def _one(size, dtype, rng):
    return (rng.standard_normal(size).astype(dtype),), size


def _two(size, dtype, rng):
    return (rng.standard_normal(size).astype(dtype), rng.standard_normal(size).astype(dtype)), size


def _exact(function):
    """A reference accumulated in float64, returned in the input's dtype."""
    def reference(*arrays):
        return np.asarray(function(*(a.astype(np.float64) for a in arrays))).astype(arrays[0].dtype)
    return reference


def _spec(function, description, *, inputs, flops, reference, equivalent):
    register(KernelSpec(name=function.__name__, family=FAMILY, dtypes=DTYPES,
                        bytes_per_element=4.0 * inputs, flops_per_element=flops,
                        description=description, function=function, reference=reference,
                        library_equivalent=equivalent, example=_two if inputs == 2 else _one))


# For the roofline a reduction's "elements" are its input elements (one output in all).
_spec(sum, "sum of all elements", inputs=1, flops=1, reference=_exact(np.sum),
      equivalent=lambda x: _xp().sum(x))
_spec(mean, "mean of all elements", inputs=1, flops=1,
      reference=_exact(lambda x: np.mean(x) if x.size else np.nan),
      equivalent=lambda x: _xp().mean(x))
_spec(max, "largest element", inputs=1, flops=1, reference=np.max,
      equivalent=lambda x: _xp().max(x))
_spec(min, "smallest element", inputs=1, flops=1, reference=np.min,
      equivalent=lambda x: _xp().min(x))
_spec(argmax, "flat index of the largest element", inputs=1, flops=1,
      reference=lambda x: np.asarray(np.argmax(x), dtype=np.int64),
      equivalent=lambda x: _xp().argmax(x))
_spec(dot, "sum of x * y", inputs=2, flops=2, reference=_exact(lambda x, y: np.dot(x.ravel(), y.ravel())),
      equivalent=lambda x, y: _xp().dot(x.ravel(), y.ravel()))
_spec(norm, "Euclidean norm", inputs=1, flops=2, reference=_exact(lambda x: np.sqrt(np.sum(x * x))),
      equivalent=lambda x: _xp().linalg.norm(x.ravel()))
