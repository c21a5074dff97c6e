"""Row-wise kernels over the last axis: softmax, log-softmax, layer norm and
cross-entropy, for float32 and float64.

``cu/rowwise.cu`` runs one warp per row for rows of up to
:data:`WARP_ROW_LIMIT` columns and one block per row beyond; softmax is the
one-pass online form (running maximum and rescaled sum).
"""
from __future__ import annotations

import numpy as np

from ..errors import KernelArgumentError
from ..runtime.session import backend as active_backend
from .library import (KernelSpec, c_type, check_array, check_dtype, module, multiprocessors,
                      register)

FAMILY = "rowwise"
DTYPES = ("float32", "float64")

#: Rows up to this many columns get one warp each; longer rows one block each.
WARP_ROW_LIMIT = 1024
_WARP_BLOCK = 256   # 8 rows per block
_ROW_BLOCK = 512
_CACHED_BLOCK = 512
#: Values per thread of softmax_cached_kernel, by dtype (the largest keeps a
#: row of 32768 floats or 16384 doubles in registers, without spills).
_CACHED_VPT = {"float": (4, 8, 16, 32, 64), "double": (4, 8, 16, 32)}

_FLAGS = ("false", "true")
INSTANTIATE = (
    tuple(f"softmax_kernel<{t}, {log}, {warp}>" for t in ("float", "double")
          for log in _FLAGS for warp in _FLAGS)
    + tuple(f"{k}<{t}, {warp}>" for k in ("layer_norm_kernel", "cross_entropy_kernel")
            for t in ("float", "double") for warp in _FLAGS)
    + tuple(f"softmax_cached_kernel<{t}, {log}, {vpt}>" for t, counts in _CACHED_VPT.items()
            for log in _FLAGS for vpt in counts))


def _rows(name: str, x) -> tuple[int, int]:
    if x.ndim == 0:
        raise KernelArgumentError(f"wb.kernels.{name}(): x is a 0-d array; pass at least one "
                                  f"dimension (the row), e.g. x.reshape(1, -1).")
    cols = int(x.shape[-1])
    return (int(x.size) // cols if cols else 0), cols


def _launch(kernel: str, template_args: str, rows: int, cols: int, *args):
    """Launch ``kernel<template_args, WARP>`` with WARP chosen by the row length."""
    warp = cols <= WARP_ROW_LIMIT
    full = f"{kernel}<{template_args}, {_FLAGS[warp]}>"
    if warp:
        rows_per_block = _WARP_BLOCK // 32
        grid = min((rows + rows_per_block - 1) // rows_per_block, 32 * multiprocessors())
        block = _WARP_BLOCK
    else:
        grid, block = min(rows, 32 * multiprocessors()), _ROW_BLOCK
    module(FAMILY)[full](*args, grid=max(grid, 1), block=block)


def _softmax(name: str, x, log: bool):
    dtype = check_dtype(name, {"x": x}, DTYPES)
    rows, cols = _rows(name, x)
    y = active_backend().xp.empty(x.shape, dtype=dtype)
    if not (rows and cols):
        return y
    t = c_type(dtype)
    if cols > WARP_ROW_LIMIT:
        vpt = next((v for v in _CACHED_VPT[t] if v * _CACHED_BLOCK >= cols), None)
        if vpt is not None:
            kernel = module(FAMILY)[f"softmax_cached_kernel<{t}, {_FLAGS[log]}, {vpt}>"]
            kernel(x, y, rows, cols, grid=min(rows, 32 * multiprocessors()), block=_CACHED_BLOCK)
            return y
    _launch("softmax_kernel", f"{t}, {_FLAGS[log]}", rows, cols, x, y, rows, cols)
    return y


def softmax(x):
    """``exp(x - max) / sum(exp(x - max))`` along the last axis."""
    return _softmax("softmax", x, log=False)


def log_softmax(x):
    """``x - max - log(sum(exp(x - max)))`` along the last axis."""
    return _softmax("log_softmax", x, log=True)


def layer_norm(x, gamma, beta, eps: float = 1e-5):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` along the last axis
    (``gamma`` and ``beta``: one value per column)."""
    dtype = check_dtype("layer_norm", {"x": x, "gamma": gamma, "beta": beta}, DTYPES)
    rows, cols = _rows("layer_norm", x)
    for what, a in (("gamma", gamma), ("beta", beta)):
        if tuple(a.shape) != (cols,):
            raise KernelArgumentError(
                f"wb.kernels.layer_norm(): {what} has shape {tuple(a.shape)}; it must have one "
                f"value per column of x, shape ({cols},).")
    y = active_backend().xp.empty(x.shape, dtype=dtype)
    if rows and cols:
        _launch("layer_norm_kernel", c_type(dtype), rows, cols, x, gamma, beta, y, rows, cols, float(eps))
    return y


def cross_entropy(logits, targets):
    """Per-row loss ``logsumexp(logits[i]) - logits[i, targets[i]]`` of a
    (rows, classes) array and ``rows`` integer class indices; take ``.mean()``
    for the mean loss. A target outside ``0..classes-1`` gives NaN."""
    dtype = check_dtype("cross_entropy", {"logits": logits}, DTYPES)
    check_array("cross_entropy", "targets", targets, ("int64", "int32"), ndim=1)
    check_array("cross_entropy", "logits", logits, ndim=2)
    rows, cols = int(logits.shape[0]), int(logits.shape[1])
    if targets.shape[0] != rows:
        raise KernelArgumentError(f"wb.kernels.cross_entropy(): targets has {targets.shape[0]} "
                                  f"entries but logits has {rows} rows; give one class per row.")
    if rows and not cols:
        raise KernelArgumentError("wb.kernels.cross_entropy(): logits has no classes (0 columns).")
    xp = active_backend().xp
    losses = xp.empty(rows, dtype=dtype)
    if rows:
        if targets.dtype != np.int64:
            targets = targets.astype(np.int64)
        _launch("cross_entropy_kernel", c_type(dtype), rows, cols, logits, targets, losses, rows, cols)
    return losses


# -- references and examples ----------------------------------------------------

def _softmax_reference(x):
    z = x.astype(np.float64)
    z = np.exp(z - z.max(axis=-1, keepdims=True)) if z.size else z
    return (z / z.sum(axis=-1, keepdims=True)).astype(x.dtype)


def _log_softmax_reference(x):
    z = x.astype(np.float64)
    if z.size:
        m = z.max(axis=-1, keepdims=True)
        z = z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))
    return z.astype(x.dtype)


def _layer_norm_reference(x, gamma, beta, eps=1e-5):
    z = x.astype(np.float64)
    if z.size:
        z = (z - z.mean(axis=-1, keepdims=True)) / np.sqrt(z.var(axis=-1, keepdims=True) + eps)
    return (z * gamma + beta).astype(x.dtype)


def _cross_entropy_reference(logits, targets):
    rows = logits.shape[0]
    if not rows:
        return np.empty(0, dtype=logits.dtype)
    return (-_log_softmax_reference(logits.astype(np.float64))[np.arange(rows), targets]
            ).astype(logits.dtype)


def _shape(size: int) -> tuple[int, int]:
    """A (rows, cols) of about ``size`` elements: rows of up to 4096 columns;
    sizes below 64 give one row."""
    if size < 64:
        return 1, size
    cols = int(min(4096, max(1, round(size ** 0.5))))
    return max(1, size // cols), cols


def _matrix(size, dtype, rng):
    rows, cols = _shape(size)
    return (rng.standard_normal((rows, cols)).astype(dtype) * 3,), rows * cols


def _layer_norm_example(size, dtype, rng):
    (x,), elements = _matrix(size, dtype, rng)
    cols = x.shape[1]
    return (x, rng.standard_normal(cols).astype(dtype), rng.standard_normal(cols).astype(dtype),
            1e-5), elements


def _cross_entropy_example(size, dtype, rng):
    (x,), elements = _matrix(size, dtype, rng)
    if x.shape[1] == 0:
        x = x.reshape(0, 1)
    return (x, rng.integers(0, x.shape[1], x.shape[0]).astype(np.int64)), x.size


def _xp():
    return active_backend().xp


def _library_softmax(x):
    e = _xp().exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


register(KernelSpec("softmax", FAMILY, DTYPES, 8.0, 5.0, "row-wise softmax (online, one pass)",
                    softmax, _softmax_reference, _library_softmax, _matrix))
register(KernelSpec("log_softmax", FAMILY, DTYPES, 8.0, 5.0, "row-wise log-softmax",
                    log_softmax, _log_softmax_reference, None, _matrix))
register(KernelSpec("layer_norm", FAMILY, DTYPES, 8.0, 7.0, "row-wise layer norm with gamma, beta",
                    layer_norm, _layer_norm_reference, None, _layer_norm_example))
# elements: the logits (each read once; one loss per row is written)
register(KernelSpec("cross_entropy", FAMILY, DTYPES, 4.0, 4.0,
                    "per-row cross-entropy loss of logits and class indices",
                    cross_entropy, _cross_entropy_reference, None, _cross_entropy_example))
