#!/usr/bin/env bash
# Issue 12, memory tracking in C on the GPU machine (from the repository root): which allocator
# is installed (C: native/allocations.c, or the Python fallback and why), the gpu-marked memory
# tests and the C allocator's own tests (stand-in pool and CuPy's classes), the memory-related
# tests of other files (as gpu/mem.sh), a probe of the allocator (C memory objects, garbage
# cycles, the previous allocator back exactly), and benchmarks/memory.py (target: "added" <= 2 µs).
# About 3 minutes; logs in $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
set -o pipefail; status=0

echo "== build" | tee "$OUT/memc-build.log"
timeout 120 python3 - <<'PY' 2>&1 | tee -a "$OUT/memc-build.log" || status=1
from workbench.backends import native_build
built, why = native_build.build(native_build.NATIVE_DIR / "allocations.c", "_wb_allocations",
                                "WORKBENCH_NATIVE_ALLOCATIONS")
print("allocations.c:", "built" if built else f"NOT built: {why}")
PY

echo "== tests" | tee "$OUT/memc-tests.log"
timeout 120 python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
    tests/test_memory.py tests/test_memory_tracking.py tests/test_memory_units.py \
    2>&1 | tail -30 | tee -a "$OUT/memc-tests.log" || status=1
timeout 60 python3 -m pytest -q -p no:cacheprovider -rs tests/test_native_allocations.py \
    2>&1 | tail -15 | tee -a "$OUT/memc-tests.log" || status=1
# other files' tests that allocate under tracking, hit out-of-memory or set a pool limit
timeout 90 python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
    tests/test_streams.py tests/test_languages.py tests/test_conformance_small.py tests/test_backend_streams.py \
    -k "tracked or pinned_and_managed or never_fit or pool_limit" \
    2>&1 | tail -20 | tee -a "$OUT/memc-tests.log" || status=1

echo "== probe" | tee "$OUT/memc-probe.log"
timeout 60 python3 - <<'PY' 2>&1 | tee -a "$OUT/memc-probe.log" || status=1
import gc
import cupy, workbench as wb
from cupy.cuda import memory_hook
from workbench.backends import cupy_allocations
from workbench.memory.tracker import tracker
print("cupy", cupy.__version__, "backend", wb.backend().describe())
before = cupy.cuda.get_allocator()
pool = cupy.get_default_memory_pool()
wb.memory.tracking(True)
print("allocator:", cupy_allocations.implementation(), "| installed:", cupy.cuda.get_allocator(),
      "| memory hooks:", memory_hook.get_memory_hooks())
a = cupy.arange(1000, dtype=cupy.float32)
print("memory object:", type(a.data.mem), "is BaseMemory:", isinstance(a.data.mem, cupy.cuda.memory.BaseMemory))
assert tracker().in_use == pool.used_bytes(), (tracker().in_use, pool.used_bytes())
class Holder: pass
used = pool.used_bytes()
h = Holder(); h.x = cupy.ones(1 << 20, cupy.uint8); h.me = h; del h   # an array in a garbage cycle
gc.collect()
assert pool.used_bytes() == used and tracker().in_use == used, (pool.used_bytes(), used)
b = (a * 2).sum()                                  # temporaries: allocated and freed by CuPy
assert float(b) == 999 * 1000, float(b)
assert tracker().in_use == pool.used_bytes(), (tracker().in_use, pool.used_bytes())
print(wb.memory.live_rows()[:2])
wb.memory.tracking(False)
assert cupy.cuda.get_allocator() is before, "previous allocator restored"
del a
print("pool used after the free:", pool.used_bytes(), "total:", pool.total_bytes())
print("probe OK")
PY

echo "== benchmark" | tee "$OUT/memc-bench.log"
timeout 150 python3 benchmarks/memory.py --n 50000 2>&1 | tee -a "$OUT/memc-bench.log" || status=1
exit $status
