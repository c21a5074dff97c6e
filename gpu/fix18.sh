#!/usr/bin/env bash
# Issue 18 review fixes on the GPU machine (from the repository root): the tuning tests on CuPy
# (gpu-marked variants: cache hit, wb.tuned, energy per launch), the cache tests, notebook 10
# under nbval, and a probe: a tune under -D SHIFT=0 is not used by wb.tuned of a kernel compiled
# with SHIFT=7, which runs with SHIFT=7, on CuPy arrays (no host copy). About 2 minutes; logs in $OUT.
# Needs Optuna/Dask wheels in .whl as gpu/tune.sh does (without them those parts skip).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
set -o pipefail; status=0

echo "== tests" | tee "$OUT/fix18-tests.log"
timeout 150 python3 -m pytest -q -p no:cacheprovider -rs tests/test_tuning.py tests/test_tuning_cache.py \
    2>&1 | tail -25 | tee -a "$OUT/fix18-tests.log" || status=1

echo "== probe" | tee "$OUT/fix18-probe.log"
timeout 60 python3 - <<'PY' 2>&1 | tee -a "$OUT/fix18-probe.log" || status=1
import numpy as np, workbench as wb
from workbench.tuning import cache
SRC = r'''
#ifndef SHIFT
#define SHIFT 0
#endif
extern "C" __global__ void shifted(float* out, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = (float)(i + SHIFT); }
'''
n = 1 << 16
ref = lambda s: (lambda out, n: np.arange(n, dtype=np.float32) + s)
r = wb.tune(SRC, (np.zeros(n, np.float32), np.int32(n)), space={"block": [64, 128, 256]}, n=n,
            defines=["SHIFT=0"], reference=ref(0), progress=False, cache="refresh")
print(r)
tk = wb.tuned(wb.compile(SRC, defines=["SHIFT=7"])["shifted"], block=128)
out = wb.to_device(np.zeros(n, np.float32))
tk(out, np.int32(n), n=n)
ok = np.array_equal(wb.to_host(out), np.arange(n, dtype=np.float32) + 7) and tk.config is None
print("SHIFT=7 kernel ran with SHIFT=7, untuned:", ok)
tk0 = wb.tuned(wb.compile(SRC, defines=["SHIFT=0"])["shifted"])
tk0(out, np.int32(n), n=n)
print("SHIFT=0 kernel tuned:", tk0.note)
raise SystemExit(0 if ok and tk0.config == r.best else 1)
PY

echo "== notebook 10" | tee "$OUT/fix18-nb.log"
timeout 150 python3 -m pytest -q -p no:cacheprovider --nbval --nbval-sanitize-with notebooks/sanitize.cfg \
    notebooks/10-autotuning.ipynb 2>&1 | tail -15 | tee -a "$OUT/fix18-nb.log" || status=1
exit $status
