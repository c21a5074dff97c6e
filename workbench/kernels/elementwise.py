"""Elementwise kernels: add, scale, axpy, fma, a multiply-add chain and the
activations relu, leaky relu, gelu (tanh and erf forms), sigmoid, tanh,
softplus and silu, for float32 and float64 arrays of any shape.

All but the chain are one CUDA template, ``map_kernel<T, OP>`` in
``cu/elementwise.cu``: a grid-stride loop with four 16-byte vector loads in
flight per thread (two per input for two or three inputs). The multiply-add
chain, compute-bound, has ``fma_chain_kernel<T>``: independent chains side by
side and its loads one step ahead.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ArgumentValueError, KernelArgumentError
from ..runtime.session import backend as active_backend
from .library import KernelSpec, c_type, check_dtype, grid_1d, module, register

FAMILY = "elementwise"
DTYPES = ("float32", "float64")
_BLOCK = 256
#: fma_chain_kernel's blocks resident on a multiprocessor (64 registers a thread).
_CHAIN_BLOCKS_PER_SM = 4

#: The operation codes of ``enum MapOp`` in elementwise.cu.
_OPS = {"add": 0, "scale": 1, "axpy": 2, "fma": 3, "relu": 10, "leaky_relu": 11, "gelu": 12,
        "gelu_erf": 13, "sigmoid": 14, "tanh": 15, "softplus": 16, "silu": 17}
#: The inputs of map_kernel's operations that read more than one.
_INPUTS = {"add": 2, "axpy": 2, "fma": 3}


def _map_blocks_per_sm(name: str, dtype) -> int:
    """Blocks of map_kernel resident on a multiprocessor: its launch bounds'
    promise (``MapBlocks`` in elementwise.cu)."""
    if np.dtype(dtype).itemsize == 8:
        return 4
    return 5 if name == "fma" else 6

INSTANTIATE = (tuple(f"map_kernel<{t}, {op}>" for t in ("float", "double") for op in _OPS.values())
               + ("fma_chain_kernel<float>", "fma_chain_kernel<double>"))


def _map(name: str, inputs: dict, p0=0.0, p1=0.0, steps: int | None = None):
    dtype = check_dtype(name, inputs, DTYPES)
    arrays = list(inputs.values())
    shape = tuple(arrays[0].shape)
    for what, a in list(inputs.items())[1:]:
        if tuple(a.shape) != shape:
            raise KernelArgumentError(
                f"wb.kernels.{name}(): {what} has shape {tuple(a.shape)} but "
                f"{next(iter(inputs))} has shape {shape}; the arrays must have the same shape "
                f"(this kernel does not broadcast).")
    xp = active_backend().xp
    out = xp.empty(shape, dtype=dtype)
    n = int(out.size)
    if n == 0:
        return out
    a = arrays[0]
    b = arrays[1] if len(arrays) > 1 else a
    c = arrays[2] if len(arrays) > 2 else a
    width = 4 if dtype == np.float32 else 2
    if steps is not None:
        kernel = module(FAMILY)[f"fma_chain_kernel<{c_type(dtype)}>"]
        kernel(a, out, n, float(p0), float(p1), int(steps), block=_BLOCK,
               grid=grid_1d(n, _BLOCK, per_thread=4 * width, blocks_per_sm=_CHAIN_BLOCKS_PER_SM))
        return out
    kernel = module(FAMILY)[f"map_kernel<{c_type(dtype)}, {_OPS[name]}>"]
    vectors = 4 if _INPUTS.get(name, 1) == 1 else 2
    kernel(a, b, c, out, n, float(p0), float(p1), block=_BLOCK,
           grid=grid_1d(n, _BLOCK, per_thread=vectors * width, blocks_per_sm=_map_blocks_per_sm(name, dtype)))
    return out


def add(x, y):
    """``x + y`` (same shape and dtype)."""
    return _map("add", {"x": x, "y": y})


def scale(x, alpha: float):
    """``alpha * x``."""
    return _map("scale", {"x": x}, p0=alpha)


def axpy(alpha: float, x, y):
    """``alpha * x + y`` in a new array (one fused multiply-add per element)."""
    return _map("axpy", {"x": x, "y": y}, p0=alpha)


def fma(a, b, c):
    """``a * b + c`` with one rounding (fused multiply-add)."""
    return _map("fma", {"a": a, "b": b, "c": c})


def fma_chain(x, a: float, b: float, steps: int):
    """``steps`` dependent multiply-adds per element: ``y = x``, then
    ``y = y * a + b`` ``steps`` times. Its arithmetic intensity grows with
    ``steps``: a knob that walks a kernel across the roofline."""
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ArgumentValueError(
            f"wb.kernels.fma_chain(): steps must be an int >= 0, got {steps!r}.")
    return _map("fma_chain", {"x": x}, p0=a, p1=b, steps=int(steps))


def relu(x):
    """``max(x, 0)``."""
    return _map("relu", {"x": x})


def leaky_relu(x, slope: float = 0.01):
    """``x`` where positive, else ``slope * x``."""
    return _map("leaky_relu", {"x": x}, p0=slope)


def gelu(x):
    """GELU, tanh form: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    return _map("gelu", {"x": x})


def gelu_erf(x):
    """GELU, exact form: ``0.5 x (1 + erf(x / sqrt(2)))``."""
    return _map("gelu_erf", {"x": x})


def sigmoid(x):
    """``1 / (1 + exp(-x))``."""
    return _map("sigmoid", {"x": x})


def tanh(x):
    """``tanh(x)``."""
    return _map("tanh", {"x": x})


def softplus(x):
    """``log(1 + exp(x))``, computed without overflow."""
    return _map("softplus", {"x": x})


def silu(x):
    """``x * sigmoid(x)`` (swish)."""
    return _map("silu", {"x": x})


# -- NumPy references (host arrays in, host array out) -------------------------

_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu_erf_reference(x):
    return (0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))).astype(x.dtype)


def _gelu_reference(x):
    k = math.sqrt(2.0 / math.pi)
    return (0.5 * x * (1 + np.tanh(k * (x + 0.044715 * x ** 3)))).astype(x.dtype)


def _softplus_reference(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _fma_chain_reference(x, a, b, steps):
    y = x.copy()
    for _ in range(steps):
        y = y * x.dtype.type(a) + x.dtype.type(b)
    return y


def _unary(size, dtype, rng):
    return (rng.standard_normal(size).astype(dtype),), size


def _binary(size, dtype, rng):
    return (rng.standard_normal(size).astype(dtype), rng.standard_normal(size).astype(dtype)), size


def _xp():
    return active_backend().xp


def _spec(function, description, *, inputs, flops, reference, equivalent=None, example=None,
          roofline=""):
    register(KernelSpec(name=function.__name__, family=FAMILY, dtypes=DTYPES,
                        bytes_per_element=4.0 * (inputs + 1), flops_per_element=flops,
                        description=description, function=function, reference=reference,
                        library_equivalent=equivalent,
                        example=example or (_binary if inputs == 2 else _unary),
                        roofline=roofline))


_spec(add, "x + y", inputs=2, flops=1, reference=lambda x, y: x + y,
      equivalent=lambda x, y: _xp().add(x, y))
_spec(scale, "alpha * x", inputs=1, flops=1, reference=lambda x, alpha: x * x.dtype.type(alpha),
      equivalent=lambda x, alpha: _xp().multiply(x, x.dtype.type(alpha)),
      example=lambda size, dtype, rng: ((rng.standard_normal(size).astype(dtype), 1.5), size))
_spec(axpy, "alpha * x + y", inputs=2, flops=2,
      reference=lambda alpha, x, y: x.dtype.type(alpha) * x + y,
      equivalent=lambda alpha, x, y: x.dtype.type(alpha) * x + y,
      example=lambda size, dtype, rng: ((2.5,) + _binary(size, dtype, rng)[0], size))
_spec(fma, "a * b + c, one rounding", inputs=3, flops=2, reference=lambda a, b, c: a * b + c,
      equivalent=lambda a, b, c: a * b + c,
      example=lambda size, dtype, rng: (tuple(rng.standard_normal(size).astype(dtype)
                                              for _ in range(3)), size))
_spec(fma_chain, "64 dependent multiply-adds per element (y = y * a + b)", inputs=1, flops=128,
      reference=_fma_chain_reference,
      roofline="min(float32 FMA peak, copy bandwidth x 16 FLOP/byte): at 64 steps the kernel sits "
               "at the ridge point of an H100/H200, where both ceilings meet, so it reaches its "
               "roofline only with the memory and the FMA units busy at once: fma_chain_kernel "
               "runs 16 chains side by side a thread and loads a step ahead",
      example=lambda size, dtype, rng: ((rng.uniform(-1, 1, size).astype(dtype), 0.5, 0.25, 64),
                                        size))
_spec(relu, "max(x, 0)", inputs=1, flops=1, reference=lambda x: np.maximum(x, x.dtype.type(0)),
      equivalent=lambda x: _xp().maximum(x, x.dtype.type(0)))
_spec(leaky_relu, "x if x > 0 else slope * x", inputs=1, flops=2,
      reference=lambda x, slope=0.01: np.where(x > 0, x, x * x.dtype.type(slope)),
      example=lambda size, dtype, rng: ((rng.standard_normal(size).astype(dtype), 0.1), size))
_spec(gelu, "GELU, tanh form", inputs=1, flops=9, reference=_gelu_reference)
_spec(gelu_erf, "GELU, erf form", inputs=1, flops=5, reference=_gelu_erf_reference)
_spec(sigmoid, "1 / (1 + exp(-x))", inputs=1, flops=4,
      reference=lambda x: 1 / (1 + np.exp(-x)))
_spec(tanh, "tanh(x)", inputs=1, flops=4, reference=np.tanh, equivalent=lambda x: _xp().tanh(x))
_spec(softplus, "log(1 + exp(x)), overflow-safe", inputs=1, flops=6,
      reference=_softplus_reference)
_spec(silu, "x * sigmoid(x)", inputs=1, flops=4, reference=lambda x: x / (1 + np.exp(-x)))
