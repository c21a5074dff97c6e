#!/usr/bin/env bash
# Issue 12, memory tracking on the GPU machine (from the repository root): the tests of
# memory tracking on CuPy (gpu-marked variants: the allocator around CuPy's pool, pool counts,
# limits and out-of-memory errors, threads, holders, leaks, timeline), a probe of the allocator
# (installed while tracking, the previous one back exactly, no memory hooks), and
# benchmarks/memory.py. About 2-3 minutes; logs in $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
set -o pipefail; status=0

echo "== tests" | tee "$OUT/mem-tests.log"
timeout 100 python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
    tests/test_memory.py tests/test_memory_tracking.py tests/test_memory_units.py \
    2>&1 | tail -30 | tee -a "$OUT/mem-tests.log" || status=1
# other files' tests that allocate under tracking, hit out-of-memory or set a pool limit
timeout 90 python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
    tests/test_streams.py tests/test_languages.py tests/test_conformance_small.py tests/test_backend_streams.py \
    -k "tracked or pinned_and_managed or never_fit or pool_limit" \
    2>&1 | tail -20 | tee -a "$OUT/mem-tests.log" || status=1

echo "== probe" | tee "$OUT/mem-probe.log"
timeout 40 python3 - <<'PY' 2>&1 | tee -a "$OUT/mem-probe.log" || status=1
import cupy, numpy as np, workbench as wb
from cupy.cuda import memory_hook
from workbench.memory.tracker import tracker
print("cupy", cupy.__version__, "backend", wb.backend().describe())
before = cupy.cuda.get_allocator()
pool = cupy.get_default_memory_pool()
wb.memory.tracking(True)
print("allocator while tracking:", cupy.cuda.get_allocator(), "| memory hooks:", memory_hook.get_memory_hooks())
a = cupy.arange(1000, dtype=cupy.float32)
assert type(a.data.mem).__name__ == "_WatchedMemory", type(a.data.mem)
assert tracker().in_use == pool.used_bytes(), (tracker().in_use, pool.used_bytes())
import gc
class Holder: pass
used = pool.used_bytes()
h = Holder(); h.x = cupy.ones(1 << 20, cupy.uint8); h.me = h; del h   # an array in a garbage cycle
gc.collect()
assert pool.used_bytes() == used and tracker().in_use == used, (pool.used_bytes(), used)
print(wb.memory.live_rows()[:2])
wb.memory.tracking(False)
assert cupy.cuda.get_allocator() is before, "previous allocator restored"
del a
print("pool used after the free:", pool.used_bytes(), "total:", pool.total_bytes())
print("probe OK")
PY

echo "== benchmark" | tee "$OUT/mem-bench.log"
timeout 120 python3 benchmarks/memory.py --n 50000 2>&1 | tee -a "$OUT/mem-bench.log" || status=1
exit $status
