"""Batch normalisation over the channels of (N, C, H, W) or (N, C) arrays,
float32 and float64 (``cu/batchnorm.cu``), with PyTorch's semantics:
training normalises with the batch statistics and updates the running ones
in place; inference normalises with the running statistics.
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentValueError, KernelArgumentError
from ..runtime.session import backend as active_backend
from .library import (KernelSpec, c_type, check_array, check_dtype, grid_1d, module,
                      multiprocessors, register)

FAMILY = "batchnorm"
DTYPES = ("float32", "float64")
_BLOCK = 256

INSTANTIATE = tuple(name for t in ("float", "double")
                    for name in (f"bn_partial<{t}, 0>", f"bn_partial<{t}, 1>", f"bn_finalize<{t}>",
                                 f"bn_scale<{t}>", f"bn_apply<{t}>", f"bn_apply_flat<{t}>"))


def batch_norm(x, weight, bias, running_mean, running_var, training: bool = True,
               momentum: float = 0.1, eps: float = 1e-5):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` per channel of ``x``
    (N, C, H, W) or (N, C); ``weight``, ``bias``, ``running_mean`` and
    ``running_var`` have C elements and the dtype of ``x``.

    ``training=True``: mean and (biased) variance of the batch, and the running
    statistics updated in place, ``running = (1 - momentum) running + momentum
    batch`` (the unbiased variance for ``running_var``). ``training=False``:
    the running statistics, unchanged. Returns a new device array.
    """
    name = "batch_norm"
    check_array(name, "x", x, DTYPES, ndim=(2, 4))
    dtype = check_dtype(name, {"x": x, "weight": weight, "bias": bias,
                               "running_mean": running_mean, "running_var": running_var}, DTYPES)
    N, C = int(x.shape[0]), int(x.shape[1])
    HW = int(np.prod(x.shape[2:], dtype=np.int64))
    for what, a in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if tuple(a.shape) != (C,):
            raise KernelArgumentError(f"wb.kernels.{name}(): {what} has shape {tuple(a.shape)}; "
                                      f"x has {C} channels (shape {tuple(x.shape)}), so it must "
                                      f"have shape ({C},).")
    if not 0.0 <= float(momentum) <= 1.0 or not float(eps) >= 0.0:
        raise ArgumentValueError(
            f"wb.kernels.{name}(): momentum must be in [0, 1] and eps >= 0, got "
            f"momentum={momentum!r}, eps={eps!r}.")
    if training and N * HW == 0 and C > 0:
        raise ArgumentValueError(
            f"wb.kernels.{name}(): training needs at least one value per channel "
            f"to compute batch statistics; x has shape {tuple(x.shape)}.")
    xp = active_backend().xp
    y = xp.empty(tuple(x.shape), dtype=dtype)
    if C == 0:
        return y
    if N * HW >= 2 ** 31:
        raise ArgumentValueError(
            f"wb.kernels.{name}(): {N * HW} values per channel is too many for "
            f"32-bit indices; normalise the batch in parts.")
    kernels = module(FAMILY)
    t = c_type(dtype)
    per_channel = (C + _BLOCK - 1) // _BLOCK
    if training:
        count = N * HW
        # enough blocks to fill the device, each thread summing at least 8 values
        chunks = max(1, min(-(-count // (_BLOCK * 8)), -(-8 * multiprocessors() // C)))
        partial = xp.empty((C, chunks), dtype=np.float64)
        mean64 = xp.empty((C,), dtype=np.float64)
        mean, var = xp.empty((C,), dtype=dtype), xp.empty((C,), dtype=dtype)
        kernels[f"bn_partial<{t}, 0>"](x, partial, mean64, N, C, HW, chunks, grid=(chunks, C),
                                       block=_BLOCK)
        kernels["bn_mean"](partial, mean64, C, chunks, float(count), grid=per_channel, block=_BLOCK)
        kernels[f"bn_partial<{t}, 1>"](x, partial, mean64, N, C, HW, chunks, grid=(chunks, C),
                                       block=_BLOCK)
        kernels[f"bn_finalize<{t}>"](partial, mean64, mean, var, running_mean, running_var, C,
                                     chunks, float(count), float(momentum), grid=per_channel,
                                     block=_BLOCK)
    else:
        mean, var = running_mean, running_var
    scale = xp.empty((C,), dtype=dtype)
    kernels[f"bn_scale<{t}>"](var, weight, scale, C, float(eps), grid=per_channel, block=_BLOCK)
    if y.size and (HW >= _BLOCK or y.size >= 2 ** 31):
        planes = N * C
        grid = (min((HW + _BLOCK - 1) // _BLOCK, 1024), min(planes, 65535))
        kernels[f"bn_apply<{t}>"](x, y, mean, scale, bias, planes, C, HW, grid=grid, block=_BLOCK)
    elif y.size:
        kernels[f"bn_apply_flat<{t}>"](x, y, mean, scale, bias, int(y.size), C, HW,
                                       grid=grid_1d(y.size, _BLOCK), block=_BLOCK)
    return y


def batch_norm_reference(x, weight, bias, running_mean, running_var, training=True,
                         momentum=0.1, eps=1e-5):
    """Batch normalisation in float64 NumPy (the running statistics given
    are not changed: see :func:`running_stats_reference`)."""
    x64 = np.asarray(x, dtype=np.float64)
    shape = (1, -1) + (1,) * (x64.ndim - 2)
    if training:
        axes = (0,) + tuple(range(2, x64.ndim))
        mean, var = x64.mean(axis=axes), x64.var(axis=axes)
    else:
        mean = np.asarray(running_mean, dtype=np.float64)
        var = np.asarray(running_var, dtype=np.float64)
    y = (x64 - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    y = y * np.asarray(weight, np.float64).reshape(shape) + np.asarray(bias, np.float64).reshape(shape)
    return y.astype(np.asarray(x).dtype)


def running_stats_reference(x, running_mean, running_var, momentum=0.1):
    """The running mean and variance after one training step (float64
    arithmetic, the unbiased batch variance), as new arrays."""
    x64 = np.asarray(x, dtype=np.float64)
    axes = (0,) + tuple(range(2, x64.ndim))
    count = x64.size // max(x64.shape[1], 1)
    var = x64.var(axis=axes)
    unbiased = var * count / (count - 1) if count > 1 else var
    dtype = np.asarray(running_mean).dtype
    new_mean = (1 - momentum) * np.asarray(running_mean, np.float64) + momentum * x64.mean(axis=axes)
    new_var = (1 - momentum) * np.asarray(running_var, np.float64) + momentum * unbiased
    return new_mean.astype(dtype), new_var.astype(dtype)


def _batch_norm_library(x, weight, bias, running_mean, running_var, training=True,
                        momentum=0.1, eps=1e-5):
    """Through the backend's array operations (reductions and broadcasting);
    the running statistics are not updated."""
    xp = active_backend().xp
    shape = (1, -1) + (1,) * (x.ndim - 2)
    axes = (0,) + tuple(range(2, x.ndim))
    mean = x.mean(axis=axes) if training else running_mean
    var = x.var(axis=axes) if training else running_var
    scale = weight / xp.sqrt(var + eps)
    return x * scale.reshape(shape) + (bias - mean * scale).reshape(shape)


def _example(size: int, dtype, rng):
    """Training on an (N, C, H, W) batch of about ``size`` elements, 16
    channels (fewer for tiny sizes), uneven sides."""
    if size <= 0:
        shape = (2, 0, 3, 3)   # no channels (no values per channel is an error in training)
    elif size == 1:
        shape = (2, 1, 1, 1)
    else:
        channels = max(1, min(16, size // 8))
        side = max(1, int(np.sqrt(size / (2 * channels))))
        shape = (2, channels, side, side + 1)
    C = shape[1]
    x = rng.standard_normal(shape, dtype=np.dtype(dtype).type)
    x *= 2
    x += 1
    weight = rng.standard_normal(C).astype(dtype)
    bias = rng.standard_normal(C).astype(dtype)
    running_mean = np.zeros(C, dtype=dtype)
    running_var = np.ones(C, dtype=dtype)
    return (x, weight, bias, running_mean, running_var, True, 0.1, 1e-5), int(np.prod(shape))


register(KernelSpec(
    name="batch_norm", family=FAMILY, dtypes=DTYPES,
    bytes_per_element=4 * 3, flops_per_element=5.0,
    description="Batch normalisation per channel, NCHW or NC: training (batch mean and "
                "variance in two passes with double accumulators, each channel split over "
                "several blocks, fixed summation order; running statistics updated in place) or "
                "inference (running statistics).",
    function=batch_norm, reference=batch_norm_reference,
    library_equivalent=_batch_norm_library, example=_example,
    roofline="copy bandwidth, 12 bytes an element counted (x read for the statistics and "
             "again to normalise, y written); no target: training reads x twice for its "
             "statistics (an exact two-pass variance in double, 16 bytes an element, so at most "
             "75% of that ceiling) with one scalar load in flight a thread, in four launches"))
