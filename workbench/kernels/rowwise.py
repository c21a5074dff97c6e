"""Row-wise kernels over the last axis: softmax, log-softmax, layer norm and
cross-entropy, for float32 and float64.

``cu/rowwise.cu`` reduces each row with one reduction over values held in
registers (16-byte vectors, read once, written once). Four kernels:

* ``rowwise_staged_kernel`` for rows of more than 4k (layer norm 2k), up to 16k floats
  (doubles: more than 2k (1k), up to 8k)
  on whole, aligned 16-byte vectors, on Hopper and later GPUs and on the
  simulator (softmax, log-softmax, layer norm): a persistent grid whose
  blocks stream their rows through a ring of shared-memory stages filled by
  the copy engine (``cp.async.bulk``), so that the next rows are always
  being read;
* ``rowwise_kernel``: rows of up to 32k floats loaded straight into
  registers, a warp a row up to 2048 floats, 256 or 512 threads beyond;
* ``cross_entropy_stream_kernel`` for cross-entropy on aligned rows of any
  length: a warp streams its row into a running (max, sum of exp);
* one block a row and two reads for longer rows (softmax in the online form).
"""
from __future__ import annotations

import numpy as np

from ..errors import KernelArgumentError
from ..runtime.session import backend as active_backend
from .library import (KernelSpec, c_type, check_array, check_dtype, compute_capability,
                      module, multiprocessors, note_variant, register)

FAMILY = "rowwise"
DTYPES = ("float32", "float64")

#: The operation codes of ``enum RowOp`` in rowwise.cu.
_SOFTMAX, _LOG_SOFTMAX, _LAYER_NORM, _CROSS_ENTROPY = range(4)
_NAMES = ("softmax", "log_softmax", "layer_norm", "cross_entropy")
#: (threads per row, vectors per thread) by row length in 16-byte vectors: a warp per
#: row up to 512 vectors (2048 floats), then 256 or 512 threads. Measured on an H200
#: (softmax, 2^26 floats): at 2048 floats a block of 256 a row reached 73% of the copy
#: bandwidth, its barrier and short rows leaving too few loads in flight.
_LADDER = ((32, 1), (32, 2), (32, 4), (32, 8), (32, 16), (256, 4), (512, 4), (512, 8),
           (512, 16))
#: rowwise_kernel's instantiations: (vectors per thread, threads per row as a constant,
#: 0 for the launch's), for every row length of the ladder.
_KERNELS = ((1, 0), (2, 0), (4, 0), (8, 0), (16, 32), (16, 512))
#: cross_entropy_stream_kernel's 16-byte vectors a lane has in flight
_STREAM_VPT = 8
_BLOCK = 256          # for warp-per-row launches: 8 rows a block
_LONG_BLOCK = 512     # the long-row kernels

#: rowwise_staged_kernel: (threads, vectors per thread, blocks per SM) by row length in
#: 16-byte vectors, for rows of more than _STAGED_FROM (by operation) and at most
#: _STAGED_TO vectors. Measured on an H200 (2^26 floats): softmax staged 86/88% of the
#: copy bandwidth at 8k/16k floats against 61/77% in registers; at 4k floats the register
#: kernel (256 threads x 4 vectors) 93% against the staged kernel's 81%, at 2k and 32k
#: floats 97 and 87% against 73 and 74%. Layer norm, whose registers are held through two
#: passes, staged 85% at 4k floats against 62% in registers.
_STAGED = ((256, 4, 2), (256, 8, 2), (512, 8, 1))
_STAGED_FROM = {_LAYER_NORM: 512}
_STAGED_FROM_OTHERS = 1024
_STAGED_TO = 4096
#: Shared memory of the stages, per multiprocessor (of 228 KiB on Hopper: the rest is
#: the blocks' static shared memory, the reserve and some L1), and stages at most
#: (ROW_MAX_STAGES in rowwise.cu).
_RING_BYTES = 200 * 1024
_MAX_STAGES = 8

_VARIANTS = {
    "staged": "rows streamed through shared memory by the copy engine (cp.async.bulk + "
              "mbarrier ring, persistent grid), one reduction a row: rows over 4k (layer norm "
              "2k), up to 16k floats on Hopper",
    "registers": "row in registers (16-byte vectors, read once), one reduction a row: a warp "
                 "per row up to 2048 floats, 256 or 512 threads up to 32768",
    "long": "block per row, two reads (longer rows)",
    "stream": "a warp streams each row into a running (max, sum of exp), nothing kept: "
              "cross-entropy on aligned 16-byte vectors",
}

_FLAGS = ("false", "true")
INSTANTIATE = (
    tuple(f"rowwise_kernel<{t}, {op}, {vpt}, {group}>" for t in ("float", "double")
          for op in range(4) for vpt, group in _KERNELS)
    + tuple(f"cross_entropy_stream_kernel<{t}, {_STREAM_VPT}>" for t in ("float", "double"))
    + tuple(f"rowwise_staged_kernel<{t}, {op}, {threads}, {vpt}>" for t in ("float", "double")
            for op in range(4) for threads, vpt, _ in _STAGED)
    + tuple(f"softmax_kernel<{t}, {log}>" for t in ("float", "double") for log in _FLAGS)
    + tuple(f"{k}<{t}>" for k in ("layer_norm_kernel", "cross_entropy_kernel")
            for t in ("float", "double")))


def _rows(name: str, x) -> tuple[int, int]:
    if x.ndim == 0:
        raise KernelArgumentError(f"wb.kernels.{name}(): x is a 0-d array; pass at least one "
                                  f"dimension (the row), e.g. x.reshape(1, -1).")
    cols = int(x.shape[-1])
    return (int(x.size) // cols if cols else 0), cols


def row_layout(cols: int, dtype) -> tuple[int, int] | None:
    """``(threads per row, 16-byte vectors per thread)`` of rowwise_kernel for
    rows of ``cols`` values of ``dtype``; None past what registers hold."""
    width = 16 // np.dtype(dtype).itemsize
    vectors = -(-cols // width)
    return next(((g, v) for g, v in _LADDER if g * v >= vectors), None)


def staged_layout(cols: int, dtype, op: int = _SOFTMAX) -> tuple[int, int, int, int] | None:
    """``(threads, vectors per thread, blocks per SM, stages)`` of
    rowwise_staged_kernel for rows of ``cols`` values of ``dtype`` (whole
    16-byte vectors) and the operation ``op``; None for rows it does not take."""
    itemsize = np.dtype(dtype).itemsize
    width = 16 // itemsize
    if cols % width:
        return None
    vectors = cols // width
    if not _STAGED_FROM.get(op, _STAGED_FROM_OTHERS) < vectors <= _STAGED_TO:
        return None
    for threads, vpt, per_sm in _STAGED:
        if threads * vpt >= vectors:
            stages = min(_MAX_STAGES, _RING_BYTES // per_sm // (cols * itemsize))
            return (threads, vpt, per_sm, stages) if stages else None
    return None


def _staged_here() -> bool:
    """Whether rowwise_staged_kernel may run: Hopper or later (the copy engine), or
    the simulator (which imitates its copies)."""
    capability = compute_capability()
    return capability is None or capability >= (9, 0)


def _launch_rows(op: int, x, y, rows: int, cols: int, gamma=None, beta=None, targets=None,
                 eps: float = 0.0) -> bool:
    """Launch the staged kernel or rowwise_kernel for ``op``; False when the rows are
    too long for either."""
    layout = row_layout(cols, x.dtype)
    if layout is None:
        return False
    vec = int(_whole_vectors(cols, x, y, gamma, beta))
    staged = (staged_layout(cols, x.dtype, op) if vec and _staged_here() and op != _CROSS_ENTROPY
              else None)
    ctype = c_type(x.dtype)
    if staged is not None:
        threads, vpt, per_sm, stages = staged
        kernel = module(FAMILY)[f"rowwise_staged_kernel<{ctype}, {op}, {threads}, {vpt}>"]
        kernel(x, gamma, beta, targets, y, rows, cols, stages, float(eps),
               grid=max(min(rows, per_sm * multiprocessors()), 1), block=threads,
               shared_mem=stages * cols * x.dtype.itemsize)
        note_variant(_NAMES[op], _VARIANTS["staged"])
        return True
    group, vpt = layout
    block = _BLOCK if group == 32 else group
    grid = min(-(-rows // (block // group)), 32 * multiprocessors())
    kernel = module(FAMILY)[f"rowwise_kernel<{ctype}, {op}, {vpt}, {group if vpt == 16 else 0}>"]
    kernel(x, gamma, beta, targets, y, rows, cols, group, vec, float(eps),
           grid=max(grid, 1), block=block)
    note_variant(_NAMES[op], _VARIANTS["registers"])
    return True


def _whole_vectors(cols: int, *arrays) -> bool:
    """Whether rows of ``cols`` values of these arrays (None: left out) are whole
    16-byte vectors on 16-byte boundaries."""
    b = active_backend()
    arrays = [a for a in arrays if a is not None]
    return (cols % (16 // arrays[0].dtype.itemsize) == 0
            and all(b.device_pointer(a) % 16 == 0 for a in arrays))


def _launch_long(op: int, kernel: str, rows: int, *args):
    """One block per row, for rows longer than registers hold."""
    module(FAMILY)[kernel](*args, grid=max(min(rows, 32 * multiprocessors()), 1),
                           block=_LONG_BLOCK)
    note_variant(_NAMES[op], _VARIANTS["long"])


def _softmax(name: str, x, log: bool):
    dtype = check_dtype(name, {"x": x}, DTYPES)
    rows, cols = _rows(name, x)
    y = active_backend().xp.empty(x.shape, dtype=dtype)
    if not (rows and cols):
        return y
    op = _LOG_SOFTMAX if log else _SOFTMAX
    if not _launch_rows(op, x, y, rows, cols):
        _launch_long(op, f"softmax_kernel<{c_type(dtype)}, {_FLAGS[log]}>", rows, x, y, rows, cols)
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
    if rows and cols and not _launch_rows(_LAYER_NORM, x, y, rows, cols, gamma, beta, eps=eps):
        _launch_long(_LAYER_NORM, f"layer_norm_kernel<{c_type(dtype)}>", rows, x, gamma, beta, y,
                     rows, cols, float(eps))
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
        if cols < 2 ** 31 and _whole_vectors(cols, logits):   # (the kernel counts in int)
            module(FAMILY)[f"cross_entropy_stream_kernel<{c_type(dtype)}, {_STREAM_VPT}>"](
                logits, targets, losses, rows, cols, block=_BLOCK,
                grid=max(1, min(-(-rows // (_BLOCK // 32)), 8 * multiprocessors())))
            note_variant("cross_entropy", _VARIANTS["stream"])
        elif not _launch_rows(_CROSS_ENTROPY, logits, losses, rows, cols, targets=targets):
            _launch_long(_CROSS_ENTROPY, f"cross_entropy_kernel<{c_type(dtype)}>", rows, logits,
                         targets, losses, rows, cols)
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


_VARIANT_LIST = tuple(_VARIANTS.values())
register(KernelSpec("softmax", FAMILY, DTYPES, 8.0, 5.0, "row-wise softmax, one read and one "
                    "write per element", softmax, _softmax_reference, _library_softmax, _matrix,
                    variants=_VARIANT_LIST))
register(KernelSpec("log_softmax", FAMILY, DTYPES, 8.0, 5.0, "row-wise log-softmax",
                    log_softmax, _log_softmax_reference, None, _matrix, variants=_VARIANT_LIST))
register(KernelSpec("layer_norm", FAMILY, DTYPES, 8.0, 7.0, "row-wise layer norm with gamma, "
                    "beta (mean, then variance about it, both over registers)",
                    layer_norm, _layer_norm_reference, None, _layer_norm_example,
                    variants=_VARIANT_LIST,
                    roofline="copy bandwidth; gamma and beta (one row) come from L2, not counted"))
# elements: the logits (each read once; one loss per row is written)
register(KernelSpec("cross_entropy", FAMILY, DTYPES, 4.0, 4.0,
                    "per-row cross-entropy loss of logits and class indices",
                    cross_entropy, _cross_entropy_reference, None, _cross_entropy_example,
                    variants=_VARIANT_LIST,
                    roofline="copy bandwidth, bytes read only (a read-only stream can run "
                             "somewhat above the copy's read-plus-write rate)"))
