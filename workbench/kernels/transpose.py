"""Matrix transpose through shared-memory tiles (``cu/transpose.cu``), for
float32 and float64 (rows, cols) arrays."""
from __future__ import annotations

from ..runtime.session import backend as active_backend
from .library import KernelSpec, c_type, check_array, module, register

FAMILY = "transpose"
DTYPES = ("float32", "float64")
_TILE, _BLOCK = 64, (32, 8)
_INT_LIMIT = 2**31 - 1

INSTANTIATE = tuple(f"transpose_kernel<{t}, {i}>" for t in ("float", "double")
                    for i in ("int", "long long"))


def transpose(x):
    """The transpose of a 2-D array, as a new contiguous (cols, rows) array."""
    check_array("transpose", "x", x, DTYPES, ndim=2)
    rows, cols = (int(s) for s in x.shape)
    out = active_backend().xp.empty((cols, rows), dtype=x.dtype)
    if out.size:
        tiles = -(-rows // _TILE) * -(-cols // _TILE)
        index = "int" if rows * cols + _TILE * max(rows, cols) <= _INT_LIMIT else "long long"
        b = active_backend()
        pair = 2 * x.dtype.itemsize
        pairs = (rows % 2 == 0 and cols % 2 == 0
                 and b.device_pointer(x) % pair == 0 and b.device_pointer(out) % pair == 0)
        module(FAMILY)[f"transpose_kernel<{c_type(x.dtype)}, {index}>"](
            x, out, rows, cols, int(pairs), grid=tiles, block=_BLOCK)
    return out


def _example(size, dtype, rng):
    """A (rows, cols) matrix of about ``size`` elements, neither side a multiple of 32."""
    if size < 64:
        shape = (1, size)
    else:
        rows = max(1, int(round(size ** 0.5)))
        shape = (rows, max(1, size // rows))
    return (rng.standard_normal(shape).astype(dtype),), shape[0] * shape[1]


def _library_transpose(x):
    return active_backend().xp.ascontiguousarray(x.T)


register(KernelSpec("transpose", FAMILY, DTYPES, 8.0, 0.0, "tiled transpose (64x64 padded tiles, two elements a thread per access)",
                    transpose, lambda x: x.T.copy(), _library_transpose, _example))
