#!/usr/bin/env bash
# Issue 15, round trip and small batches (branch wt-ringlat) on the GPU machine, from the
# repository root: the gpu-marked ring tests, notebook 07 under nbval, benchmarks/rings.py with the
# C host path (backends/native/words.c) and without it (WORKBENCH_NATIVE_WORDS=0: the Python path,
# as on main), --host-only both ways, the ring of main (e6b15b5) where git can show it, a
# transport probe (gpu/ringlat_probe.py: head+read vs LL request, release seq vs LL answer), and
# NVML utilisation after everything (a ring left spinning shows). About 3-4 minutes; logs in $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
set -o pipefail; status=0
nvidia-smi -L | tee "$OUT/ringlat-device.txt"; (git log --oneline -1 2>/dev/null || echo "no git here") | tee -a "$OUT/ringlat-device.txt"
python3 -c "from workbench.backends import native_words as n; print('C words module:', n.module(), n.unavailable_reason())" \
    2>&1 | tee -a "$OUT/ringlat-device.txt"

echo "== transport probe" | tee "$OUT/ringlat-probe.log"
timeout 60 python3 gpu/ringlat_probe.py 20000 2>&1 | tee -a "$OUT/ringlat-probe.log" || status=1

echo "== call(): transport alone (C: request out -> answer seen) and handler time, 20000 calls" | tee -a "$OUT/ringlat-probe.log"
timeout 40 python3 - <<'PY' 2>&1 | tee -a "$OUT/ringlat-probe.log" || status=1
import sys, time, numpy as np, workbench as wb
sys.path.insert(0, "benchmarks")
from rings import SOURCE, REQUEST, RESPONSE
with wb.ring(SOURCE, request=REQUEST, response=RESPONSE, capacity=4096) as r:
    print("C words module in use:", r._native is not None)
    for _ in range(2000):
        r.call((1.0, 2.0, 0, 0))
    r.reset_stats()
    wall = np.empty(20000)
    for i in range(20000):
        t0 = time.perf_counter_ns()
        a = r.call((1.0, 2.0, i, 0))
        wall[i] = time.perf_counter_ns() - t0
        assert a["id"] == i and a["sum"] == 3.0, a
    t = np.array(r._single, dtype=np.float64).reshape(-1, 2) * 1e-3
    print(f"call transport p50 {np.median(t[:, 0]):.2f} us p90 {np.percentile(t[:, 0], 90):.2f} "
          f"p99 {np.percentile(t[:, 0], 99):.2f}; whole call() p50 {np.median(wall) * 1e-3:.2f} us "
          f"p99 {np.percentile(wall, 99) * 1e-3:.2f}; handler p50 {np.median(t[:, 1]):.3f} us")
PY

B="$OUT/ringlat-bench.log"
echo "== benchmark (this branch, C host path)" | tee "$B"
timeout 60 python3 benchmarks/rings.py 2>&1 | tee -a "$B" || status=1
echo "== benchmark (this branch, WORKBENCH_NATIVE_WORDS=0: Python host path)" | tee -a "$B"
WORKBENCH_NATIVE_WORDS=0 timeout 60 python3 benchmarks/rings.py 2>&1 | tee -a "$B" || status=1
echo "== benchmark (this branch, C host path, host_poll_window=32: a warp watches the host's head)" | tee -a "$B"
timeout 60 python3 benchmarks/rings.py --host-poll-window 32 2>&1 | tee -a "$B" || status=1
echo "== host side alone: C path, then Python path" | tee -a "$B"
timeout 20 python3 benchmarks/rings.py --host-only 2>&1 | tee -a "$B" || status=1
WORKBENCH_NATIVE_WORDS=0 timeout 20 python3 benchmarks/rings.py --host-only 2>&1 | tee -a "$B" || status=1
base=e6b15b5
if git cat-file -e "$base:workbench/rings/ring.py" 2>/dev/null; then
    echo "== benchmark (main, $base)" | tee -a "$B"
    rm -rf /tmp/ring-main && mkdir -p /tmp/ring-main \
        && git archive "$base" workbench benchmarks | tar -x -C /tmp/ring-main \
        && (cd /tmp/ring-main && PYTHONPATH=/tmp/site:/tmp/ring-main timeout 60 python3 benchmarks/rings.py) \
        2>&1 | tee -a "$B" || status=1
else
    echo "(no git history here: WORKBENCH_NATIVE_WORDS=0 above is main's host path)" | tee -a "$B"
fi
echo "== benchmark (this branch, C host path, again: the machine may drift)" | tee -a "$B"
timeout 60 python3 benchmarks/rings.py 2>&1 | tee -a "$B" || status=1

echo "== gpu tests" | tee "$OUT/ringlat-tests.log"
timeout 30 python3 -m pytest -q -p no:cacheprovider tests/test_native_words.py 2>&1 | tail -3 | tee -a "$OUT/ringlat-tests.log" || status=1
timeout 150 python3 -m pytest -q -p no:cacheprovider -rs -m gpu tests/test_rings*.py \
    2>&1 | tail -25 | tee -a "$OUT/ringlat-tests.log" || status=1
echo "== a faulting handler on the GPU (its own process: the fault ends that CUDA context)" | tee -a "$OUT/ringlat-tests.log"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_rings.py::test_a_faulting_handler_raises_kernel_fault \
    2>&1 | tail -5 | tee -a "$OUT/ringlat-tests.log" || status=1

echo "== notebook 07" | tee "$OUT/ringlat-nb07.log"
timeout 100 python3 -m pytest -q -p no:cacheprovider --nbval --nbval-sanitize-with notebooks/sanitize.cfg \
    notebooks/07-ring-kernels.ipynb 2>&1 | tail -15 | tee -a "$OUT/ringlat-nb07.log" || status=1

echo "== GPU utilisation after (must be 0: no ring left running)" | tee "$OUT/ringlat-idle.log"
sleep 2
util=$(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits | head -1 | tr -d ' ')
echo "utilization.gpu = $util %" | tee -a "$OUT/ringlat-idle.log"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee -a "$OUT/ringlat-idle.log"
[ "$util" = "0" ] || status=1
exit $status
