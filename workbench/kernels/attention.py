"""Fused scaled-dot-product attention (``cu/attention.cu``), FlashAttention-2 style:
``softmax(scale * q @ k^T [+ causal mask]) @ v`` without storing the scores, for
half or bfloat16 inputs (float32 accumulation), head dimensions 64 and 128.

``q`` is (..., Sq, D), ``k`` and ``v`` (..., Sk, D) with the same leading
dimensions (batch, heads...); the result has ``q``'s shape and dtype. On a GPU
of compute capability 8.0 or later each block of 8 warps takes 128 query rows
through tiles of 64 keys on the tensor cores (mma.sync with ldmatrix, online
softmax in registers); the CPU simulator runs one query row per thread with the
same online softmax.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ArgumentValueError, KernelArgumentError
from ..runtime.session import backend as active_backend
from .library import KernelSpec, check_array, module, note_variant, register
from .matmul import bfloat16_bits

FAMILY = "attention"
HEAD_DIMS = (64, 128)
_TYPES = {"float16": ("__half", np.float16), "bfloat16": ("unsigned short", np.uint16)}
INSTANTIATE = tuple(f"attention_kernel<{t}, {d}>" for t, _ in _TYPES.values() for d in HEAD_DIMS)
_ROWS, _KEYS, _THREADS, _PAD = 128, 64, 256, 8


def _shared_bytes(d: int) -> int:
    """Q's 128 rows and two buffers each of K and V's 64 rows, padded rows of 2-byte values."""
    return (_ROWS + 4 * _KEYS) * (d + _PAD) * 2


def attention(q, k, v, causal: bool = False, scale: float | None = None,
              inputs: str = "float16", out=None):
    """``softmax(scale * q @ k^T) @ v`` over the last two axes of device
    arrays ``q`` (..., Sq, D), ``k`` and ``v`` (..., Sk, D), D = 64 or 128;
    ``scale`` defaults to ``1 / sqrt(D)``. ``causal=True`` lets query ``i``
    see keys ``0..i`` only (top-left aligned, as PyTorch's ``is_causal``).

    ``inputs="float16"``: float16 arrays; ``inputs="bfloat16"``: uint16
    arrays of bfloat16 bit patterns (``wb.kernels.matmul.bfloat16_bits``
    makes them); the result is of the same kind (new, or ``out``)."""
    if inputs not in _TYPES:
        raise ArgumentValueError(
            f"wb.kernels.attention(): inputs is 'float16' or 'bfloat16', got {inputs!r}.")
    ctype, dtype = _TYPES[inputs]
    name = "attention"
    for what, a in (("q", q), ("k", k), ("v", v)):
        check_array(name, what, a, (np.dtype(dtype).name,))
        if a.ndim < 2:
            raise KernelArgumentError(f"wb.kernels.{name}(): {what} has shape {tuple(a.shape)}; it "
                                      f"must be (..., sequence, head dimension).")
    D = int(q.shape[-1])
    if D not in HEAD_DIMS:
        raise KernelArgumentError(f"wb.kernels.{name}(): the head dimension (last axis of q) is "
                                  f"{D}; this kernel takes {' or '.join(map(str, HEAD_DIMS))}.")
    if tuple(k.shape) != tuple(v.shape) or k.shape[:-2] != q.shape[:-2] or k.shape[-1] != D:
        raise KernelArgumentError(
            f"wb.kernels.{name}(): q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)} "
            f"do not fit: k and v must have one shape (..., Sk, {D}) with q's leading dimensions.")
    Sq, Sk = int(q.shape[-2]), int(k.shape[-2])
    heads = int(np.prod(q.shape[:-2], dtype=np.int64))
    if Sk == 0 and Sq and heads:
        raise ArgumentValueError(
            f"wb.kernels.{name}(): k and v hold no keys (Sk = 0): softmax over "
            f"nothing is undefined.")
    b = active_backend()
    if out is None:
        out = b.xp.empty(q.shape, dtype=dtype)
    else:
        check_array(name, "out", out, (np.dtype(dtype).name,))
        if tuple(out.shape) != tuple(q.shape):
            raise KernelArgumentError(f"wb.kernels.{name}(): out has shape {tuple(out.shape)}; "
                                      f"the result has q's shape {tuple(q.shape)}.")
    if not (Sq and heads):
        return out
    if any(b.device_pointer(a) % 16 for a in (q, k, v)) or b.device_pointer(out) % 4:
        raise KernelArgumentError(f"wb.kernels.{name}(): q, k and v must start on a 16-byte "
                                  f"boundary (out on 4 bytes): pass a fresh copy "
                                  f"(wb.xp.ascontiguousarray or .copy()) of an offset view.")
    if heads > 65535:
        raise KernelArgumentError(f"wb.kernels.{name}(): {heads} (batch x heads) slices; at most "
                                  f"65535 per call.")
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    kernel = module(FAMILY)[f"attention_kernel<{ctype}, {D}>"]
    kernel(q, k, v, out, Sq, Sk, scale * math.log2(math.e), int(bool(causal)),
           grid=(-(-Sq // _ROWS), heads), block=_THREADS, shared_mem=_shared_bytes(D))
    note_variant(name, "one row per thread (CPU simulator)" if b.simulated
                 else "mma.sync + ldmatrix, 128 x 64 tiles, online softmax")
    return out


def _floats(a, inputs: str) -> np.ndarray:
    a = np.asarray(a)
    if inputs == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def attention_reference(q, k, v, causal=False, scale=None, inputs="float16"):
    """The same attention in float64 NumPy on host arrays, returned as a
    float64 array (compare with the kernel's result converted to float)."""
    q, k, v = (_floats(a, inputs) for a in (q, k, v))
    D = q.shape[-1]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    scores = np.einsum("...qd,...kd->...qk", q, k) * scale
    if causal:
        Sq, Sk = scores.shape[-2:]
        scores = np.where(np.arange(Sk)[None, :] > np.arange(Sq)[:, None], -np.inf, scores)
    if scores.size:
        scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v


def _reference_in_dtype(q, k, v, causal=False, scale=None, inputs="float16"):
    """The float64 reference rounded to the result's dtype (for the catalog's checks)."""
    exact = attention_reference(q, k, v, causal, scale, inputs)
    if inputs == "bfloat16":
        return bfloat16_bits(exact.astype(np.float32))
    return exact.astype(np.float16)


def _library_attention(q, k, v, causal=False, scale=None, inputs="float16"):
    """The same product through the backend's array operations (three passes
    over the Sq x Sk scores, which it stores), in float32 (float16 inputs)."""
    if inputs != "float16":
        raise ArgumentValueError("the array-operation attention takes float16 inputs only")
    xp = active_backend().xp
    qf, kf, vf = (a.astype(np.float32) for a in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = xp.matmul(qf, xp.swapaxes(kf, -1, -2)) * np.float32(scale)
    if causal:
        Sq, Sk = scores.shape[-2:]
        scores = xp.where(xp.arange(Sk)[None, :] > xp.arange(Sq)[:, None], -np.inf, scores)
    scores = xp.exp(scores - scores.max(axis=-1, keepdims=True))
    return (xp.matmul(scores / scores.sum(axis=-1, keepdims=True), vf)).astype(q.dtype)


#: The roofline figures are for the benchmark's shape, sequences of 4096 keys: per
#: output element 4 Sk flops (Q K^T and P V, 2 Sk D each per row of D outputs).
_SK = 4096


def _example(size: int, dtype, rng):
    """One batch of 2 heads, head dimension 64, a sequence of about size / 128 (not a
    multiple of the tiles), causal."""
    s = max(int(size) // 128, 1) if size > 0 else 0
    shape = (1, 2, s, 64)
    q, k, v = (rng.standard_normal(shape).astype(np.float16) for _ in range(3))
    return (q, k, v, True), q.size


register(KernelSpec(
    name="attention", family=FAMILY, dtypes=("float16",),
    bytes_per_element=4 * 2, flops_per_element=4.0 * _SK,
    description="fused attention softmax(q k^T / sqrt(D)) v, causal or not, D = 64 or 128, half "
                "in (or bfloat16 bits: inputs='bfloat16'), float32 accumulate: FlashAttention-2 "
                "online softmax, 8 warps x 16 query rows, 64-key tiles double-buffered with "
                "cp.async, mma.sync m16n8k16 + ldmatrix, scores never stored.",
    function=attention, reference=_reference_in_dtype, library_equivalent=_library_attention,
    example=_example, rtol=2e-3, atol=2e-3,
    variants=("mma.sync + ldmatrix, 128 x 64 tiles, online softmax",
              "one row per thread (CPU simulator)"),
    roofline="PyTorch's scaled_dot_product_attention, flash backend (the benchmark's GPU rows)"))
