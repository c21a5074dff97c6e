"""Dropout with a counter-based random number generator (``cu/dropout.cu``):
Philox-4x32-10, so that a ``(seed, offset)`` pair gives the same mask on the
GPU, on the simulator and in the NumPy reference, bit for bit.
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentValueError
from ..runtime.session import backend as active_backend
from .library import KernelSpec, c_type, check_array, grid_1d, module, register

FAMILY = "dropout"
DTYPES = ("float32", "float64")
_BLOCK = 256

INSTANTIATE = ("dropout_philox<float>", "dropout_philox<double>")

_U64 = (1 << 64) - 1


def _check(p, seed, offset):
    if not 0.0 <= float(p) <= 1.0:
        raise ArgumentValueError(
            f"wb.kernels.dropout(): p is the probability of dropping an element, "
            f"in [0, 1]; got {p!r}.")
    for what, value in (("seed", seed), ("offset", offset)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not 0 <= value <= _U64:
            raise ArgumentValueError(f"wb.kernels.dropout(): {what} must be an int in [0, 2**64), "
                                     f"got {value!r}.")


def _scale(p: float, dtype) -> float:
    """``1 / (1 - p)`` rounded to ``dtype`` (0 when every element is dropped)."""
    t = np.dtype(dtype).type
    return 0.0 if p >= 1.0 else float(t(1) / (t(1) - t(p)))


def dropout(x, p: float = 0.5, seed: int = 0, offset: int = 0, return_mask: bool = False):
    """``x`` with each element dropped (set to 0) with probability ``p`` and
    the kept ones scaled by ``1 / (1 - p)``: a new device array (and, with
    ``return_mask=True``, the uint8 mask of kept elements).

    The mask is a function of ``(seed, offset)`` and the element's index:
    the same call gives the same mask on every backend; use a new ``offset``
    (e.g. the step number) for a new mask with the same seed."""
    check_array("dropout", "x", x, DTYPES)
    _check(p, seed, offset)
    xp = active_backend().xp
    y = xp.empty(tuple(x.shape), dtype=x.dtype)
    mask = xp.empty(tuple(x.shape), dtype=np.uint8)
    n = int(x.size)
    if n:
        kernel = module(FAMILY)[f"dropout_philox<{c_type(x.dtype)}>"]
        kernel(x, y, mask, n, float(p), _scale(float(p), x.dtype), int(seed), int(offset),
               grid=grid_1d((n + 3) // 4, _BLOCK), block=_BLOCK)
    return (y, mask) if return_mask else y


# -- the same generator in NumPy ----------------------------------------------

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_LOW = np.uint64(0xFFFFFFFF)


def philox4x32_10(counter_low: np.ndarray, counter_high: np.ndarray, offset: int, seed: int) -> np.ndarray:
    """Philox-4x32-10 of the counters ``(low, high, offset low, offset high)``
    (uint64 arrays holding 32-bit words) with key ``seed``: an (n, 4) uint32
    array, the words the CUDA kernel computes."""
    c0 = counter_low.astype(np.uint64)
    c1 = counter_high.astype(np.uint64)
    c2 = np.full_like(c0, offset & 0xFFFFFFFF)
    c3 = np.full_like(c0, (offset >> 32) & 0xFFFFFFFF)
    k0, k1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    for _ in range(10):
        p0 = _M0 * c0          # 32 x 32 -> 64 bits: exact in uint64
        p1 = _M1 * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & _LOW,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & _LOW)
        k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
    return np.stack([c0, c1, c2, c3], axis=1).astype(np.uint32)


def dropout_mask_reference(n: int, p: float, seed: int = 0, offset: int = 0) -> np.ndarray:
    """The keep mask (bool, ``n`` elements) that :func:`dropout` draws."""
    groups = np.arange((n + 3) // 4, dtype=np.uint64)
    words = philox4x32_10(groups & _LOW, groups >> np.uint64(32), offset, seed).reshape(-1)[:n]
    u = (words >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    return u >= np.float32(p)


def dropout_reference(x, p: float = 0.5, seed: int = 0, offset: int = 0, return_mask: bool = False):
    """Dropout in NumPy with the same Philox stream (exactly the kernel's result)."""
    x = np.asarray(x)
    keep = dropout_mask_reference(x.size, p, seed, offset).reshape(x.shape)
    y = np.where(keep, x * x.dtype.type(_scale(float(p), x.dtype)), x.dtype.type(0))
    return (y, keep.astype(np.uint8)) if return_mask else y


def _dropout_library(x, p: float = 0.5, seed: int = 0, offset: int = 0, return_mask: bool = False):
    """Through the backend's array operations: a uniform draw from its own
    generator (not Philox: another mask), a comparison and a multiply."""
    xp = active_backend().xp
    keep = xp.random.random(x.shape) >= p
    return xp.where(keep, x * _scale(float(p), x.dtype), 0).astype(x.dtype)


def _example(size: int, dtype, rng):
    x = rng.standard_normal(max(size, 0) + (3 if size > 4 else 0), dtype=np.dtype(dtype).type)
    return (x, 0.3, 1234, 7), x.size


register(KernelSpec(
    name="dropout", family=FAMILY, dtypes=DTYPES,
    bytes_per_element=4 * 2 + 1, flops_per_element=1.0,
    description="Dropout, any shape: Philox-4x32-10 counter-based random numbers (seed, offset "
                "-> the same mask on every backend and in the NumPy reference), kept elements "
                "scaled by 1/(1-p); optionally returns the uint8 mask.",
    function=dropout, reference=dropout_reference, library_equivalent=_dropout_library,
    example=_example,
    roofline="copy bandwidth, 9 bytes an element (x read, y and the uint8 mask written); no "
             "target: Philox-4x32-10 costs about 25 integer operations an element (ten rounds "
             "of 32-bit multiplies for each group of four), a large share of the issue slots "
             "at full bandwidth"))
