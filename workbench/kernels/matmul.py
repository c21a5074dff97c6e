"""Matrix multiplication: ``sgemm`` (float32 on the CUDA cores) and ``hgemm``
(half or bfloat16 inputs, float32 accumulation, on the tensor cores), both
``C = A @ B`` for row-major matrices of any size.

``hgemm`` has two variants: on a Hopper GPU (compute capability 9.0) the
warp-specialised wgmma + TMA kernel of ``cu/matmul.sm90.cu`` (built for
``sm_90a``; :mod:`.tensor_maps` makes its tensor maps), elsewhere, and for
shapes TMA cannot describe, the ``mma.sync`` kernel of ``cu/matmul.cu``
(which the CPU simulator runs as a plain loop).
"""
from __future__ import annotations

import warnings

import numpy as np

from ..errors import ArgumentValueError, CompileError, KernelArgumentError
from ..runtime.session import backend as active_backend
from .library import (KernelSpec, check_array, compute_capability, module, multiprocessors,
                      note_variant, register)
from .tensor_maps import TensorMapCache, TensorMapUnavailable, encode_tiled

FAMILY = "matmul"
_INPUT_TYPES = {"float16": "__half", "bfloat16": "unsigned short"}
_OUTPUT_TYPES = {"float32": "float", "float16": "__half", "bfloat16": "unsigned short"}
_OUTPUT_DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}
_COMBINATIONS = (("float16", "float32"), ("float16", "float16"),
                 ("bfloat16", "float32"), ("bfloat16", "bfloat16"))
INSTANTIATE = tuple(f"hgemm<{_INPUT_TYPES[i]}, {_OUTPUT_TYPES[o]}>" for i, o in _COMBINATIONS)
SM90_INSTANTIATE = tuple(f"hgemm_sm90<{_INPUT_TYPES[i]}, {_OUTPUT_TYPES[o]}>" for i, o in _COMBINATIONS)
#: The Hopper kernel: 128 x 256 tiles, 64-deep slices, 4 of them in flight, 3 warpgroups.
_SM90_TILE = (128, 256)
_SM90_THREADS = 384
_SM90_SHARED = 4 * (128 * 64 + 64 * 256) * 2 + 1024
_VARIANTS = {"sm90": "wgmma + TMA, warp-specialised (sm_90a)",
             "mma": "mma.sync + ldmatrix, cp.async pipeline",
             "simulator": "plain loop (CPU simulator)"}
_map_caches: dict = {}   # backend instance id -> (backend, TensorMapCache)
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


def _output(name: str, out, M: int, N: int, dtype=np.float32):
    """``out`` checked to be an M x N device array of ``dtype``, or a new one."""
    if out is None:
        return active_backend().xp.empty((M, N), dtype=dtype)
    check_array(name, "out", out, (np.dtype(dtype).name,), ndim=2)
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


def hgemm(a, b, out=None, inputs: str = "float16", out_dtype: str = "float32",
          variant: str = "auto"):
    """``a @ b`` for half-precision device matrices ``a`` (M x K) and ``b``
    (K x N), accumulated in float32: an M x N device array (new, or ``out``)
    of ``out_dtype``: ``"float32"``, or the input type (``"float16"`` /
    ``"bfloat16"``, rounded to nearest even, as cuBLAS returns).

    ``inputs="float16"``: ``a`` and ``b`` are float16 arrays.
    ``inputs="bfloat16"``: they are uint16 arrays holding bfloat16 bit patterns
    (NumPy and CuPy have no bfloat16 dtype; :func:`bfloat16_bits` makes them),
    and a bfloat16 output is such an array too.

    ``variant="auto"`` runs the Hopper kernel (wgmma + TMA) on a device of
    compute capability 9.0 when K and N are multiples of 8 and the arrays
    16-byte aligned, else the mma.sync kernel; the CPU simulator, which has no
    tensor cores, runs the latter as a plain loop with the same arithmetic.
    ``"sm90"`` or ``"mma"`` ask for one (``"sm90"`` raises where it cannot
    run). ``wb.kernels.catalog()`` shows which variant the last call ran."""
    if inputs not in _INPUT_TYPES:
        raise ArgumentValueError(
            f"wb.kernels.hgemm(): inputs is 'float16' or 'bfloat16', got {inputs!r}.")
    if out_dtype not in ("float32", inputs):
        raise ArgumentValueError(f"wb.kernels.hgemm(): out_dtype is 'float32' or the input type "
                                 f"{inputs!r}, got {out_dtype!r}.")
    if variant not in ("auto", "sm90", "mma"):
        raise ArgumentValueError(
            f"wb.kernels.hgemm(): variant is 'auto', 'sm90' or 'mma', got {variant!r}.")
    M, N, K = _operands("hgemm", a, b, ("float16",) if inputs == "float16" else ("uint16",))
    c = _output("hgemm", out, M, N, _OUTPUT_DTYPES[out_dtype])
    types = f"{_INPUT_TYPES[inputs]}, {_OUTPUT_TYPES[out_dtype]}"
    reason = "asked for mma" if variant == "mma" else sm90_refusal(
        compute_capability(), M, N, K, _aligned((a, b), 16) and _aligned((c,), 8))
    if reason is None:
        try:
            return _launch_sm90(f"hgemm_sm90<{types}>", inputs, a, b, c, M, N, K)
        except (CompileError, TensorMapUnavailable) as exc:
            if variant == "sm90":
                raise
            reason = f"the Hopper kernel is unavailable here: {str(exc).splitlines()[0]}"
            warnings.warn(f"wb.kernels.hgemm(): {reason}; running the mma.sync kernel",
                          RuntimeWarning, stacklevel=2)
    elif variant == "sm90":
        raise ArgumentValueError(f"wb.kernels.hgemm(variant='sm90'): {reason}.")
    note_variant("hgemm", _VARIANTS["simulator" if active_backend().simulated else "mma"])
    return _launch(f"hgemm<{types}>", a, b, c, M, N, K, 8, _HGEMM_TILE, _HGEMM_SHARED)


def sm90_refusal(capability, M: int, N: int, K: int, aligned: bool) -> str | None:
    """Why the Hopper kernel cannot run an M x K @ K x N product on a device of
    ``capability`` (None: the simulator) with operands ``aligned`` (a and b on
    16 bytes, the output on 8); None when it can."""
    if capability is None:
        return "the simulator has no tensor cores"
    if capability != (9, 0):
        return (f"wgmma exists on compute capability 9.0 only (sm_90a), this device is "
                f"{capability[0]}.{capability[1]}")
    if min(M, N, K) == 0:
        return "an empty product"
    if K % 8 or N % 8:
        return f"TMA needs K and N multiples of 8 (16-byte rows), got K={K}, N={N}"
    if not aligned:
        return "TMA needs 16-byte aligned a and b (and an 8-byte aligned out)"
    return None


def _tensor_maps(inputs: str, a, b, M: int, N: int, K: int):
    """The device array holding A's and B's tensor maps (cached by what they describe)."""
    backend = active_backend()
    entry = _map_caches.get(id(backend))
    if entry is None or entry[0] is not backend:
        entry = _map_caches[id(backend)] = (backend, TensorMapCache(backend.to_device))
    pa, pb = backend.device_pointer(a), backend.device_pointer(b)
    # A: boxes of 128 rows x 64 K values; B: boxes of 64 K rows x 64 columns (128-byte rows)
    return entry[1].get((inputs, pa, M, K, pb, N), lambda: np.concatenate([
        encode_tiled(pa, inputs, (M, K), (_SM90_TILE[0], 64)),
        encode_tiled(pb, inputs, (K, N), (64, 64))]))


def _launch_sm90(kernel_name: str, inputs: str, a, b, c, M: int, N: int, K: int):
    compiled = module(FAMILY, variant="sm90", arch="sm_90a", instantiate=SM90_INSTANTIATE)
    maps = _tensor_maps(inputs, a, b, M, N, K)
    tiles = -(-M // _SM90_TILE[0]) * -(-N // _SM90_TILE[1])
    compiled[kernel_name](maps, c, M, N, K, grid=min(tiles, multiprocessors()),
                          block=_SM90_THREADS, shared_mem=_SM90_SHARED)
    note_variant("hgemm", _VARIANTS["sm90"])
    return c


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
    description="C = A @ B, half in (or bfloat16 bits: inputs='bfloat16'), float32 accumulate, "
                "float32 or input-type out, on the tensor cores. Hopper (cc 9.0): wgmma m64n256k16 "
                "fed by TMA, 128x256x64 tiles, a 4-stage mbarrier pipeline, a producer and two "
                "consumer warpgroups, persistent grouped tile order (matmul.sm90.cu). Elsewhere: "
                "mma.sync m16n8k16 with ldmatrix, 128x256 block tiles, a 4-slice cp.async "
                "pipeline. On the CPU simulator (no tensor cores) a plain loop converting the "
                "inputs to float.",
    function=hgemm, reference=matmul_reference, library_equivalent=_matmul_library,
    example=_example, rtol=1e-3, atol=1e-3, variants=tuple(_VARIANTS.values()),
    roofline="the backend's half matmul (cuBLAS); wgmma exists on sm_90a only, so Blackwell "
             "(sm_100, tcgen05) runs the mma.sync kernel"))
