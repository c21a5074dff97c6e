"""2-D max and average pooling over NCHW arrays (``cu/pooling.cu``), float32
and float64, with a kernel size, a stride and zero padding per direction.

The output is (N, C, P, Q) with ``P = (H + 2 padding - kernel) // stride + 1``
(PyTorch's ``max_pool2d`` / ``avg_pool2d`` without ceil mode or dilation).
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentValueError
from ..runtime.session import backend as active_backend
from .library import KernelSpec, c_type, check_array, module, register

FAMILY = "pooling"
DTYPES = ("float32", "float64")

#: Output rows of a block's patch: 8 rows of threads, POOL_ROWS (4) outputs each.
_PATCH_ROWS = 32
#: Square windows known at compile time (unrolled), and 0: any window.
_SIZES = (0, 2, 3)
INSTANTIATE = tuple(f"pool2d<{t}, {op}, {ks}>" for t in ("float", "double") for op in (0, 1)
                    for ks in _SIZES)


def _pair(name: str, what: str, value, least: int) -> tuple[int, int]:
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                 and v >= least for v in pair):
        raise ArgumentValueError(
            f"wb.kernels.{name}(): {what} must be an int >= {least} or a pair of "
            f"them, got {value!r}.")
    return int(pair[0]), int(pair[1])


def _geometry(name, x, kernel_size, stride, padding):
    """Checked arguments: ``(kh, kw), (sh, sw), (ph, pw), (P, Q)``."""
    check_array(name, "x", x, DTYPES, ndim=4)
    kh, kw = _pair(name, "kernel_size", kernel_size, 1)
    sh, sw = _pair(name, "stride", kernel_size if stride is None else stride, 1)
    ph, pw = _pair(name, "padding", padding, 0)
    if ph > kh // 2 or pw > kw // 2:
        raise ArgumentValueError(
            f"wb.kernels.{name}(): padding {(ph, pw)} must be at most half the "
            f"kernel size {(kh, kw)} (so that every window holds image elements).")
    H, W = int(x.shape[2]), int(x.shape[3])
    if H + 2 * ph < kh or W + 2 * pw < kw:
        raise ArgumentValueError(
            f"wb.kernels.{name}(): a {kh} x {kw} window does not fit in a {H} x {W} "
            f"image with padding {(ph, pw)}.")
    P, Q = (H + 2 * ph - kh) // sh + 1, (W + 2 * pw - kw) // sw + 1
    return (kh, kw), (sh, sw), (ph, pw), (P, Q)


def _pool(name, op, x, kernel_size, stride, padding, count_include_pad=True):
    (kh, kw), (sh, sw), (ph, pw), (P, Q) = _geometry(name, x, kernel_size, stride, padding)
    N, C, H, W = (int(d) for d in x.shape)
    y = active_backend().xp.empty((N, C, P, Q), dtype=x.dtype)
    if y.size == 0:
        return y
    square = kh if kh == kw and kh in _SIZES else 0
    kernel = module(FAMILY)[f"pool2d<{c_type(x.dtype)}, {op}, {square}>"]
    if P * Q >= 2 ** 31 or H * W >= 2 ** 31 or -(-P // _PATCH_ROWS) > 65535:
        raise ArgumentValueError(f"wb.kernels.{name}(): images of {H} x {W} are too large for this "
                                 f"kernel's 32-bit indices and grid.")
    grid = (-(-Q // 32), -(-P // _PATCH_ROWS), min(N * C, 65535))
    kernel(x, y, N * C, H, W, P, Q, kh, kw, sh, sw, ph, pw, int(bool(count_include_pad)),
           grid=grid, block=(32, 8))
    return y


def max_pool2d(x, kernel_size, stride=None, padding=0):
    """The maximum of each ``kernel_size`` window of NCHW ``x`` (``stride``
    defaults to ``kernel_size``; padding never wins): a new device array."""
    return _pool("max_pool2d", 1, x, kernel_size, stride, padding)


def avg_pool2d(x, kernel_size, stride=None, padding=0, count_include_pad=True):
    """The mean of each ``kernel_size`` window of NCHW ``x``: divided by the
    window size (padding counted as zeros) or, with ``count_include_pad=False``,
    by the number of image elements in the window."""
    return _pool("avg_pool2d", 0, x, kernel_size, stride, padding, count_include_pad)


def _windows(x, kernel_size, stride, padding, fill):
    """The strided windows of padded ``x`` as one array (N, C, P, Q, kh, kw)."""
    kh, kw = kernel_size if isinstance(kernel_size, (tuple, list)) else (kernel_size,) * 2
    stride = kernel_size if stride is None else stride
    sh, sw = stride if isinstance(stride, (tuple, list)) else (stride,) * 2
    ph, pw = padding if isinstance(padding, (tuple, list)) else (padding,) * 2
    padded = np.pad(np.asarray(x, dtype=np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)),
                    constant_values=fill)
    view = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))
    return view[:, :, ::sh, ::sw], (kh, kw, ph, pw)


def max_pool2d_reference(x, kernel_size, stride=None, padding=0):
    """Max pooling in NumPy (padding as -infinity)."""
    windows, _ = _windows(x, kernel_size, stride, padding, -np.inf)
    return windows.max(axis=(4, 5)).astype(np.asarray(x).dtype)


def avg_pool2d_reference(x, kernel_size, stride=None, padding=0, count_include_pad=True):
    """Average pooling in NumPy, float64 sums."""
    windows, (kh, kw, ph, pw) = _windows(x, kernel_size, stride, padding, 0.0)
    sums = windows.sum(axis=(4, 5))
    if count_include_pad:
        counts = kh * kw
    else:
        ones = np.ones((1, 1) + np.asarray(x).shape[2:])
        counts, _ = _windows(ones, kernel_size, stride, padding, 0.0)
        counts = counts.sum(axis=(4, 5))
    return (sums / counts).astype(np.asarray(x).dtype)


def _max_pool2d_library(x, kernel_size, stride=None, padding=0):
    """Through the backend's array operations: the maximum over the window
    offsets of strided views of the padded array."""
    return _library_pool(x, kernel_size, stride, padding, True)


def _avg_pool2d_library(x, kernel_size, stride=None, padding=0, count_include_pad=True):
    """Through the backend's array operations (sum of strided views; padding counted,
    as with count_include_pad=True)."""
    return _library_pool(x, kernel_size, stride, padding, False)


def _library_pool(x, kernel_size, stride, padding, is_max):
    xp = active_backend().xp
    kh, kw = kernel_size if isinstance(kernel_size, (tuple, list)) else (kernel_size,) * 2
    stride = kernel_size if stride is None else stride
    sh, sw = stride if isinstance(stride, (tuple, list)) else (stride,) * 2
    ph, pw = padding if isinstance(padding, (tuple, list)) else (padding,) * 2
    padded = xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)),
                    constant_values=-np.inf if is_max else 0)
    P, Q = (padded.shape[2] - kh) // sh + 1, (padded.shape[3] - kw) // sw + 1
    out = None
    for r in range(kh):
        for s in range(kw):
            part = padded[:, :, r:r + sh * (P - 1) + 1:sh, s:s + sw * (Q - 1) + 1:sw]
            out = part.copy() if out is None else (xp.maximum(out, part) if is_max else out + part)
    return out if is_max else out / (kh * kw)


def _example(size: int, dtype, rng):
    """A 3 x 3 window, stride 2, padding 1 over an (N, C, H, W) array of about
    ``4 size`` elements (so about ``size`` outputs), uneven sides."""
    if size <= 0:
        shape = (0, 2, 5, 5)
    elif size == 1:
        shape = (1, 1, 1, 1)
    else:
        side = max(2, int(np.sqrt(4 * size / 3)))
        shape = (1, 3, side + 1, side)
    x = rng.standard_normal(shape, dtype=np.dtype(dtype).type)
    P, Q = (shape[2] + 2 - 3) // 2 + 1, (shape[3] + 2 - 3) // 2 + 1
    return (x, 3, 2, 1), shape[0] * shape[1] * P * Q


register(KernelSpec(
    name="max_pool2d", family=FAMILY, dtypes=DTYPES,
    bytes_per_element=4 * (4 + 1), flops_per_element=9.0,
    description="2-D max pooling, NCHW, kernel / stride / padding (padding never wins); "
                "four outputs a thread, 2x2 and 3x3 windows unrolled. Roofline figures for 3x3 "
                "windows, stride 2 (each input read once from memory; the overlap of the "
                "windows comes from the caches).",
    function=max_pool2d, reference=max_pool2d_reference,
    library_equivalent=_max_pool2d_library, example=_example))

register(KernelSpec(
    name="avg_pool2d", family=FAMILY, dtypes=DTYPES,
    bytes_per_element=4 * (4 + 1), flops_per_element=10.0,
    description="2-D average pooling, NCHW, kernel / stride / padding, padding counted or "
                "not (count_include_pad); 2x2 and 3x3 windows unrolled. Roofline figures for "
                "3x3 windows, stride 2.",
    function=avg_pool2d, reference=avg_pool2d_reference,
    library_equivalent=_avg_pool2d_library, example=_example))
