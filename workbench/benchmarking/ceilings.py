"""``wb.ceilings()``: the device's measured bandwidth and compute ceilings.

Measured by the workbench, not taken from a datasheet: a large
device-to-device copy (bytes read plus bytes written per second), an
FMA-bound CUDA C++ kernel, and the array library's best GEMM (cuBLAS through
CuPy on a GPU). Measured once per device and cached on disk, in
``ceilings.json`` under the workbench's cache root (``$WORKBENCH_CACHE_DIR``
or ``~/.cache/cuda-workbench``). On the simulator the same things run on the
CPU and the ceilings are labelled simulated.
"""
from __future__ import annotations

import datetime as _dt
import json
import re
from pathlib import Path

import numpy as np

from ..cache import cache_root, write_atomic
from ..core.compiler import compile as wb_compile
from ..runtime.session import backend as active_backend
from .ceiling_figures import CEILINGS_SCHEMA, Ceilings
from .engine import Plan, device_name, measure as measure_call

_FMA_SOURCE = r"""
extern "C" __global__ void workbench_fma_peak(float* out, int iterations, float a, float b)
{
    // Eight independent FMA chains per thread keep the pipelines full;
    // the sum is stored so that the compiler cannot drop the work.
    float x0 = threadIdx.x * 1e-7f, x1 = x0 + 0.1f, x2 = x0 + 0.2f, x3 = x0 + 0.3f;
    float x4 = x0 + 0.4f, x5 = x0 + 0.5f, x6 = x0 + 0.6f, x7 = x0 + 0.7f;
    #pragma unroll 8
    for (int i = 0; i < iterations; ++i) {
        x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
        x4 = fmaf(x4, a, b); x5 = fmaf(x5, a, b); x6 = fmaf(x6, a, b); x7 = fmaf(x7, a, b);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
}
"""
_FMA_CHAINS = 8

#: Problem sizes: (GPU, simulator).
_COPY_BYTES = (2**30, 64 * 2**20)
_FMA_BLOCKS_PER_SM = (8, None)       # simulator: a fixed small grid below
_FMA_ITERATIONS = (16384, 2048)
_GEMM_N = (8192, 512)
_GEMM_DTYPES = (("float32", "float16"), ("float32",))

#: How each ceiling is timed (a few tenths of a second each).
_PLAN = Plan(max_time=0.2, min_repeat=3, warmup=1, warmup_time=0.01)

_memory_cache: dict[str, "Ceilings"] = {}


def ceilings(*, refresh: bool = False, cache: bool = True) -> Ceilings:
    """The active device's measured ceilings.

    Measured on first use (a few seconds) and cached per device on disk;
    ``refresh=True`` measures again, ``cache=False`` neither reads nor
    writes the cache.
    """
    b = active_backend()
    if cache and not refresh:
        found = cached_for(b)
        if found is not None:
            return found
    path, key = _cache_location(b)
    measured = measure(b)
    if cache:
        _memory_cache[f"{path}|{key}"] = measured
        _write_cache(path, key, measured)
    return measured


def cached() -> Ceilings | None:
    """The active device's ceilings if they were measured before (in this
    session or cached on disk), without measuring."""
    return cached_for(active_backend())


def cached_for(b) -> Ceilings | None:
    """Backend ``b``'s device's ceilings if they were measured before (in this
    session or cached on disk), without measuring."""
    path, key = _cache_location(b)
    memo_key = f"{path}|{key}"
    found = _memory_cache.get(memo_key) or _read_cache(path, key)
    if found is not None:
        _memory_cache[memo_key] = found
    return found


def for_results(b) -> Ceilings | None:
    """The ceilings to keep on a result measured on backend ``b`` now: those
    already measured for its device (:func:`cached_for`), or None. Never
    measures and never fails."""
    try:
        found = cached_for(b)
    except Exception:  # a result must not fail for want of ceilings
        return None
    return found if found is not None and found.device == device_name(b) else None


def measure(b) -> Ceilings:
    """Measure the ceilings of backend ``b``'s current device now (no cache)."""
    simulated = bool(b.simulated)
    pick = 1 if simulated else 0
    xp = b.xp
    props = b.device_properties()

    copy_bytes = _COPY_BYTES[pick]
    try:
        free, _ = b.memory_info()
        copy_bytes = min(copy_bytes, max(free // 4, 2**20))
    except Exception:
        pass
    n = copy_bytes // 4
    src = xp.arange(n, dtype=np.float32)
    dst = xp.empty_like(src)
    copy = measure_call(b, xp.copyto, [(dst, src)], {}, name="copy", plan=_PLAN,
                        bytes=2 * n * 4, record=False)
    del src, dst

    fma_gflops, fma_details = _measure_fma(b, props, pick)

    gemm: dict[str, float] = {}
    size = _GEMM_N[pick]
    rng = np.random.default_rng(0)
    for dtype in _GEMM_DTYPES[pick]:
        a = b.to_device(rng.standard_normal((size, size)).astype(dtype))
        c = b.to_device(rng.standard_normal((size, size)).astype(dtype))
        out = xp.empty((size, size), dtype=dtype)
        r = measure_call(b, xp.matmul, [(a, c)], {"out": out}, name=f"gemm {dtype}", plan=_PLAN,
                         flops=2 * size**3, record=False)
        gemm[dtype] = r.gflops
        del a, c, out

    try:
        versions = {k: str(v) for k, v in b.versions().items()}
    except Exception:
        versions = {}
    return Ceilings(device=props.name, backend=b.name, simulated=simulated,
                    copy_gbps=copy.gbps, fma_gflops=fma_gflops, gemm_gflops=gemm,
                    measured=_dt.datetime.now().isoformat(timespec="seconds"),
                    versions=versions,
                    details={"copy_bytes": 2 * n * 4, "gemm_n": size, **fma_details})


def _measure_fma(b, props, pick: int) -> tuple[float | None, dict]:
    module = wb_compile(_FMA_SOURCE, name="workbench-ceilings")
    kernel = module["workbench_fma_peak"]
    block = 256
    if _FMA_BLOCKS_PER_SM[pick] is None:
        blocks = 4
    else:
        blocks = props.multiprocessors * _FMA_BLOCKS_PER_SM[pick]
    iterations = _FMA_ITERATIONS[pick]
    out = b.allocate((blocks * block,), np.float32)
    flops = 2 * _FMA_CHAINS * iterations * blocks * block
    r = measure_call(b, kernel, [(out, iterations, 0.999999, 1e-6)],
                     {"grid": blocks, "block": block}, name="fma", plan=_PLAN, flops=flops,
                     record=False)
    return r.gflops, {"fma_grid": blocks, "fma_block": block, "fma_iterations": iterations}


def _cache_location(b) -> tuple[Path, str]:
    """The cache file and the key of backend ``b``'s device in it."""
    return cache_root() / "ceilings.json", _device_key(b)


def _device_key(b) -> str:
    props = b.device_properties()
    try:
        driver = b.versions().get("driver", "")
    except Exception:
        driver = ""
    major, minor = props.compute_capability
    raw = f"{CEILINGS_SCHEMA}|{b.name}|{props.name}|sm_{major}{minor}|driver {driver}"
    return re.sub(r"\s+", " ", raw)


def _read_cache(path: Path, key: str) -> Ceilings | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Ceilings.from_dict(data[key])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cache(path: Path, key: str, value: Ceilings) -> None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[key] = value.to_dict()
    write_atomic(path, json.dumps(data, indent=2))
