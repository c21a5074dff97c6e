"""Matrix multiplication: ``sgemm`` (float32 on the CUDA cores) and ``hgemm``
(half inputs, float32 accumulation, on the tensor cores), both ``C = A @ B``
for row-major matrices of any size (``cu/matmul.cu``).
"""
from __future__ import annotations

import numpy as np

from ..errors import KernelArgumentError
from ..runtime.session import backend as active_backend
from .library import KernelSpec, check_array, module, register

FAMILY = "matmul"
INSTANTIATE = ("hgemm<__half>", "hgemm<unsigned short>")
_THREADS = 256
#: Block tiles (rows, columns of C): sgemm's SG_BM x SG_BN, hgemm's HG_BM x HG_BN.
_SGEMM_TILE = (128, 128)
_HGEMM_TILE = (128, 256)
#: hgemm's pipeline: HG_STAGES slices of A (128 x (32 + 8) halves) and B (32 x (256 + 8)).
_HGEMM_SHARED = 4 * (128 * 40 + 32 * 264) * 2


def _aligned(arrays, nbytes: int) -> bool:
    """True when every array starts at a multiple of ``nbytes``."""
    b = active_backend()
    return all(a.size == 0 or b.device_pointer(a) % nbytes == 0 for a in arrays)


def _operands(name: str, a, b, dtypes):
    """Check ``a`` (M x K) and ``b`` (K x N); return ``M, N, K``."""
    check_array(name, "a", a, dtypes, ndim=2)
    check_array(name, "b", b, dtypes, ndim=2)
    if a.dtype != b.dtype:
        raise KernelArgumentError(f"wb.kernels.{name}(): a is {a.dtype} but b is {b.dtype}; "
                                  f"convert one with .astype('{a.dtype}').")
    if a.shape[1] != b.shape[0]:
        raise KernelArgumentError(
            f"wb.kernels.{name}(): a is {tuple(a.shape)} and b is {tuple(b.shape)}: the columns "
            f"of a ({a.shape[1]}) must equal the rows of b ({b.shape[0]}) for a @ b.")
    return int(a.shape[0]), int(b.shape[1]), int(a.shape[1])


def _output(name: str, out, M: int, N: int):
    """``out`` checked to be a float32 M x N device array, or a new one."""
    if out is None:
        return active_backend().xp.empty((M, N), dtype=np.float32)
    check_array(name, "out", out, ("float32",), ndim=2)
    if tuple(out.shape) != (M, N):
        raise KernelArgumentError(f"wb.kernels.{name}(): out has shape {tuple(out.shape)}; "
                                  f"a @ b has shape {(M, N)}.")
    return out


def _launch(kernel_name: str, a, b, c, M: int, N: int, K: int, vector_width: int,
            tile: tuple, shared_mem: int = 0):
    if M == 0 or N == 0:
        return c
    vec = int(K % vector_width == 0 and N % vector_width == 0
              and _aligned((a, b, c), 16))
    grid = (-(-N // tile[1]), -(-M // tile[0]))
    module(FAMILY)[kernel_name](a, b, c, M, N, K, vec, grid=grid, block=_THREADS,
                                shared_mem=shared_mem)
    return c


def sgemm(a, b, out=None):
    """``a @ b`` for float32 device matrices ``a`` (M x K) and ``b`` (K x N):
    a float32 M x N device array (a new one, or ``out``), computed by a tiled
    CUDA C kernel (128 x 128 block tiles, 8 x 8 outputs per thread, no tensor
    cores)."""
    M, N, K = _operands("sgemm", a, b, ("float32",))
    return _launch("sgemm_f32", a, b, _output("sgemm", out, M, N), M, N, K, 4, _SGEMM_TILE)


def hgemm(a, b, out=None, inputs: str = "float16"):
    """``a @ b`` for half-precision device matrices ``a`` (M x K) and ``b``
    (K x N), accumulated in float32: a float32 M x N device array (new, or
    ``out``). On a GPU it runs on the tensor cores (mma.sync); on the CPU
    simulator, which has none, the same kernel is a plain loop with the same
    arithmetic (inputs converted to float, float accumulation).

    ``inputs="float16"``: ``a`` and ``b`` are float16 arrays.
    ``inputs="bfloat16"``: they are uint16 arrays holding bfloat16 bit patterns
    (NumPy and CuPy have no bfloat16 dtype; :func:`bfloat16_bits` makes them)."""
    if inputs == "float16":
        M, N, K = _operands("hgemm", a, b, ("float16",))
        kernel = "hgemm<__half>"
    elif inputs == "bfloat16":
        M, N, K = _operands("hgemm", a, b, ("uint16",))
        kernel = "hgemm<unsigned short>"
    else:
        raise ValueError(f"wb.kernels.hgemm(): inputs is 'float16' or 'bfloat16', got {inputs!r}.")
    return _launch(kernel, a, b, _output("hgemm", out, M, N), M, N, K, 8, _HGEMM_TILE, _HGEMM_SHARED)


def bfloat16_bits(values) -> np.ndarray:
    """Host float values rounded to bfloat16 (to nearest, ties to even), as
    the uint16 bit patterns :func:`hgemm` takes with ``inputs="bfloat16"``."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bfloat16_values(bits) -> np.ndarray:
    """float32 values of bfloat16 bit patterns (uint16)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def matmul_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in float64 on the host, returned as float32."""
    return (np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)).astype(np.float32)


def _matmul_library(a, b):
    """The backend's own product of the same inputs (cuBLAS on a GPU). Half
    inputs give a half product (cuBLAS's tensor-core GEMM, float32
    accumulation): asking for a float32 result would make CuPy convert the
    inputs and run the float32 GEMM instead."""
    return active_backend().xp.matmul(a, b)


def _square_sides(size: int) -> tuple:
    """A problem of about ``size`` output elements: M x K @ K x N with
    uneven sides (so that edges are exercised), clamped at 4096."""
    n = max(int(round(np.sqrt(max(size, 0)))), 0)
    n = min(n, 4096)
    if size == 0:
        return 0, 0, 0
    if n <= 1:
        return 1, 1, 1
    return n, max(n - 3, 1), max(n + 5, 1)


def _example(size: int, dtype, rng):
    M, N, K = _square_sides(size)
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    return (a, b), M * N


#: The roofline figures per output element depend on K: they are given for the
#: 4096 x 4096 x 4096 product the benchmark measures (2 K flops per output; A, B
#: and C each moved once).
_K = 4096

register(KernelSpec(
    name="sgemm", family=FAMILY, dtypes=("float32",),
    bytes_per_element=3 * 4, flops_per_element=2.0 * _K,
    description="C = A @ B, float32, tiled CUDA C: 128x128 block tiles in shared memory, "
                "8x8 register tiles per thread, float4 loads, double buffering; no tensor cores.",
    function=sgemm, reference=matmul_reference, library_equivalent=_matmul_library,
    example=_example, rtol=1e-4, atol=1e-4))

register(KernelSpec(
    name="hgemm", family=FAMILY, dtypes=("float16",),
    bytes_per_element=2 * 2 + 4, flops_per_element=2.0 * _K,
    description="C = A @ B, half in (or bfloat16 bits: inputs='bfloat16'), float32 accumulate "
                "and out, on the tensor cores (mma.sync m16n8k16 with ldmatrix, 128x256 block "
                "tiles, 64x64 warp tiles, a 4-slice cp.async pipeline). On the CPU simulator (no tensor cores) the "
                "same kernel is a plain loop converting the inputs to float.",
    function=hgemm, reference=matmul_reference, library_equivalent=_matmul_library,
    example=_example, rtol=1e-3, atol=1e-3))
