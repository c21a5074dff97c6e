"""2-D convolution, NCHW, float32 (``cu/conv.cu``): ``conv2d`` reads the image
directly (an implicit matrix product, no im2col matrix in memory) and
``conv2d_im2col`` writes the im2col matrix of each image and multiplies it with
the library's ``sgemm``. Both take ``x`` (N, C, H, W) and ``w`` (K, C, R, S)
and return ``y`` (N, K, P, Q) with ``P = (H + 2 padding - R) // stride + 1``.
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentValueError, KernelArgumentError
from ..runtime.session import backend as active_backend
from .library import KernelSpec, check_array, module, register
from .matmul import sgemm

FAMILY = "conv"
_TILE = 128
_THREADS = 256
#: Filter sizes with a kernel of their own (the others use the <0, 0> kernel).
_FILTERS = ((1, 1), (3, 3), (5, 5), (7, 7))

INSTANTIATE = tuple(f"conv2d_direct<{r}, {s}>" for r, s in _FILTERS + ((0, 0),))


def _geometry(name: str, x, w, stride, padding):
    """Check the arguments; return ``(N, C, H, W, K, R, S, P, Q)``."""
    check_array(name, "x", x, ("float32",), ndim=4)
    check_array(name, "w", w, ("float32",), ndim=4)
    for what, value, least in (("stride", stride, 1), ("padding", padding, 0)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < least:
            raise ArgumentValueError(
                f"wb.kernels.{name}(): {what} must be an int >= {least}, got {value!r}.")
    N, C, H, W = (int(d) for d in x.shape)
    K, Cw, R, S = (int(d) for d in w.shape)
    if Cw != C:
        raise KernelArgumentError(
            f"wb.kernels.{name}(): x has {C} channels (shape {tuple(x.shape)}, NCHW) but w has "
            f"{Cw} (shape {tuple(w.shape)}, KCRS); they must match.")
    if R == 0 or S == 0:
        raise ArgumentValueError(
            f"wb.kernels.{name}(): the filter is {R} x {S}; it needs at least 1 x 1.")
    P = (H + 2 * padding - R) // stride + 1
    Q = (W + 2 * padding - S) // stride + 1
    if H + 2 * padding < R or W + 2 * padding < S:
        raise ArgumentValueError(
            f"wb.kernels.{name}(): a {R} x {S} filter does not fit in a {H} x {W} image with "
            f"padding {padding}; use a smaller filter or more padding.")
    if N * P * Q >= 2 ** 31 or N * C * H * W >= 2 ** 31 or K * P * Q * N >= 2 ** 31:
        raise ArgumentValueError(f"wb.kernels.{name}(): x {tuple(x.shape)} is too large for 32-bit "
                                 f"indices; split the batch into smaller ones.")
    return N, C, H, W, K, R, S, P, Q


def conv2d(x, w, stride: int = 1, padding: int = 0):
    """Convolution (cross-correlation, as in deep learning) of float32 NCHW
    ``x`` with float32 KCRS filters ``w``: a new (N, K, P, Q) device array,
    zero padding, the same ``stride`` in both directions."""
    N, C, H, W, K, R, S, P, Q = _geometry("conv2d", x, w, stride, padding)
    y = active_backend().xp.empty((N, K, P, Q), dtype=np.float32)
    if y.size == 0:
        return y
    vec = int((C * R * S) % 4 == 0 and active_backend().device_pointer(w) % 16 == 0)
    grid = ((N * P * Q + _TILE - 1) // _TILE, (K + _TILE - 1) // _TILE)
    name = f"conv2d_direct<{R}, {S}>" if (R, S) in _FILTERS else "conv2d_direct<0, 0>"
    module(FAMILY)[name](x, w, y, N, C, H, W, K, R, S, P, Q, int(stride), int(padding),
                                    vec, grid=grid, block=_THREADS)
    return y


def conv2d_im2col(x, w, stride: int = 1, padding: int = 0):
    """The same convolution as :func:`conv2d`, as im2col + ``sgemm``: the
    (C R S) x (N P Q) matrix of input patches is written out, multiplied by
    ``w.reshape(K, C R S)`` with the library's ``sgemm``, and the K x (N P Q)
    product reordered to (N, K, P, Q)."""
    N, C, H, W, K, R, S, P, Q = _geometry("conv2d_im2col", x, w, stride, padding)
    xp = active_backend().xp
    y = xp.empty((N, K, P, Q), dtype=np.float32)
    if y.size == 0:
        return y
    crs, npq = C * R * S, N * P * Q
    cols = xp.empty((crs, npq), dtype=np.float32)
    kernels = module(FAMILY)
    if cols.size:
        kernels["im2col"](x, cols, N, C, H, W, R, S, P, Q, int(stride), int(padding),
                          grid=(min(-(-npq // _THREADS), 1024), min(crs, 65535)), block=_THREADS)
    product = sgemm(w.reshape(K, crs), cols)
    kernels["nkpq_from_knpq"](product, y, N, K, P * Q,
                              grid=(min(-(-(P * Q) // _THREADS), 1024), min(N * K, 65535)),
                              block=_THREADS)
    return y


def conv2d_reference(x, w, stride: int = 1, padding: int = 0) -> np.ndarray:
    """The convolution in float64 NumPy (a sum of shifted products, one per
    filter tap), returned as float32."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    N, C, H, W = x.shape
    K, _, R, S = w.shape
    P = (H + 2 * padding - R) // stride + 1
    Q = (W + 2 * padding - S) // stride + 1
    xpad = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    y = np.zeros((N, K, P, Q))
    for r in range(R):
        for s in range(S):
            patch = xpad[:, :, r:r + stride * (P - 1) + 1:stride, s:s + stride * (Q - 1) + 1:stride]
            y += np.einsum("kc,ncpq->nkpq", w[:, :, r, s], patch)
    return y.astype(np.float32)


def _conv2d_library(x, w, stride: int = 1, padding: int = 0):
    """im2col through array operations and the backend's batched matrix
    product (cuBLAS on a GPU)."""
    xp = active_backend().xp
    N, C, H, W = x.shape
    K, _, R, S = w.shape
    P = (H + 2 * padding - R) // stride + 1
    Q = (W + 2 * padding - S) // stride + 1
    xpad = xp.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    patches = [xpad[:, :, r:r + stride * (P - 1) + 1:stride, s:s + stride * (Q - 1) + 1:stride]
               for r in range(R) for s in range(S)]
    cols = xp.stack(patches, axis=2).reshape(N, C * R * S, P * Q)
    return xp.matmul(w.reshape(K, C * R * S), cols).reshape(N, K, P, Q)


def _example(size: int, dtype, rng):
    """A 3 x 3, padding 1 layer with about ``size`` output elements (uneven
    sides); the benchmark's ResNet layer is N=32, C=K=128, H=W=56."""
    if size <= 0:
        shape, filters = (0, 3, 5, 5), (4, 3, 3, 3)
    elif size == 1:
        shape, filters = (1, 1, 1, 1), (1, 1, 3, 3)
    else:
        side = max(2, min(int(np.sqrt(size / 8)), 224))
        channels = max(1, min(size // (side * side), 128))
        shape, filters = (1, 3, side + 1, side), (channels, 3, 3, 3)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(filters).astype(dtype)
    return (x, w, 1, 1), shape[0] * filters[0] * shape[2] * shape[3]


#: Per output element of the 3 x 3 layer with C = 128 channels the benchmark measures:
#: 2 C R S flops; x, w and y each moved once (about one input element per output).
_CRS = 128 * 9

_DESCRIPTION = ("2-D convolution, NCHW x KCRS -> NKPQ, float32, stride and zero padding; "
                "reference: NumPy float64. Roofline figures for a 3x3 layer with 128 channels.")

register(KernelSpec(
    name="conv2d", family=FAMILY, dtypes=("float32",),
    bytes_per_element=2 * 4, flops_per_element=2.0 * _CRS,
    description=_DESCRIPTION + " Direct: an implicit matrix product that gathers the image "
                               "while loading (sgemm's tiling, no im2col matrix).",
    function=conv2d, reference=conv2d_reference, library_equivalent=_conv2d_library,
    example=_example, rtol=1e-4, atol=1e-4))

register(KernelSpec(
    name="conv2d_im2col", family=FAMILY, dtypes=("float32",),
    bytes_per_element=2 * 4 + 2 * 9 * 4, flops_per_element=2.0 * _CRS,
    description=_DESCRIPTION + " im2col kernel per image, then the library's sgemm.",
    function=conv2d_im2col, reference=conv2d_reference, library_equivalent=_conv2d_library,
    example=_example, rtol=1e-4, atol=1e-4))
