#!/usr/bin/env bash
# Issue 15 (rings, host side made cheaper) on the GPU machine, from the repository root:
# the gpu-marked ring tests, notebook 07 under nbval, benchmarks/rings.py (the targets), its
# --host-only mode (Python's part alone), the same two with the ring before this branch where git
# can show it (side by side), and NVML utilisation after everything (a ring left spinning shows).
# About 3 minutes; logs in $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
set -o pipefail; status=0
nvidia-smi -L | tee "$OUT/ring-device.txt"

echo "== gpu tests" | tee "$OUT/ring-tests.log"
timeout 150 python3 -m pytest -q -p no:cacheprovider -rs -m gpu tests/test_rings*.py \
    2>&1 | tail -25 | tee -a "$OUT/ring-tests.log" || status=1

echo "== a faulting handler on the GPU (its own process: the fault ends that CUDA context)" | tee -a "$OUT/ring-tests.log"
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_rings.py::test_a_faulting_handler_raises_kernel_fault \
    2>&1 | tail -5 | tee -a "$OUT/ring-tests.log" || status=1

echo "== notebook 07" | tee "$OUT/ring-nb07.log"
timeout 120 python3 -m pytest -q -p no:cacheprovider --nbval --nbval-sanitize-with notebooks/sanitize.cfg \
    notebooks/07-ring-kernels.ipynb 2>&1 | tail -15 | tee -a "$OUT/ring-nb07.log" || status=1

echo "== benchmark (this branch)" | tee "$OUT/ring-bench.log"
timeout 60 python3 benchmarks/rings.py 2>&1 | tee -a "$OUT/ring-bench.log" || status=1
timeout 60 python3 benchmarks/rings.py --host-only 2>&1 | tee -a "$OUT/ring-bench.log" || status=1
timeout 30 python3 - <<'PY' 2>&1 | tee -a "$OUT/ring-bench.log" || status=1
# the GPU's part of a call(): head published -> answer seen (host clock), and the handler's own time
import sys, numpy as np, workbench as wb
sys.path.insert(0, "benchmarks")
from rings import SOURCE, REQUEST, RESPONSE
with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=4096) as r:
    for _ in range(2000):
        r.call((1.0, 2.0, 0, 0))
    r.reset_stats()
    for _ in range(20000):
        r.call((1.0, 2.0, 0, 0))
    t = np.array(r._single, dtype=np.float64) * 1e-3
    print(f"call transport (publish -> seen) p50 {np.median(t[:, 0]):.2f} us, p99 "
          f"{np.percentile(t[:, 0], 99):.2f} us; handler p50 {np.median(t[:, 1]):.3f} us")
PY

# the ring before this branch, side by side (needs git and the commit in this checkout)
base=af73722
if git cat-file -e "$base:workbench/rings/ring.py" 2>/dev/null; then
    echo "== benchmark (before: $base's ring.py)" | tee -a "$OUT/ring-bench.log"
    rm -rf /tmp/ring-before && mkdir -p /tmp/ring-before && cp -r workbench benchmarks /tmp/ring-before/
    git show "$base:workbench/rings/ring.py" > /tmp/ring-before/workbench/rings/ring.py
    (cd /tmp/ring-before && PYTHONPATH=/tmp/site:/tmp/ring-before timeout 60 python3 benchmarks/rings.py \
        && PYTHONPATH=/tmp/site:/tmp/ring-before timeout 60 python3 benchmarks/rings.py --host-only) \
        2>&1 | tee -a "$OUT/ring-bench.log" || status=1
    echo "== benchmark (this branch again: the machine may drift)" | tee -a "$OUT/ring-bench.log"
    timeout 60 python3 benchmarks/rings.py 2>&1 | tee -a "$OUT/ring-bench.log" || status=1
else
    echo "(no git history here: the before figures are the last H100 run's)" | tee -a "$OUT/ring-bench.log"
fi

echo "== GPU utilisation after (must be 0: no ring left running)" | tee "$OUT/ring-idle.log"
sleep 2
util=$(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits | head -1 | tr -d ' ')
echo "utilization.gpu = $util %" | tee -a "$OUT/ring-idle.log"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee -a "$OUT/ring-idle.log"
[ "$util" = "0" ] || status=1
exit $status
