#!/usr/bin/env bash
# Issue 15, the rings' waits in C, on the GPU machine, from the repository root: the gpu-marked
# ring tests, notebook 07 under nbval, benchmarks/rings.py with the C waits
# (backends/native/words.c) and without them (WORKBENCH_NATIVE_WORDS=0: the Python path),
# --host-only both ways, an older tree's benchmark where RING_BASE names one, and NVML
# utilisation after everything (a ring left spinning shows). About 4 minutes; logs in $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
set -o pipefail; status=0
nvidia-smi -L | tee "$OUT/ring-device.txt"
python3 -c "from workbench.backends import native_words as n; print('C words module:', n.module(), n.unavailable_reason())" \
    2>&1 | tee -a "$OUT/ring-device.txt"

B="$OUT/ring-bench.log"
echo "== benchmark (C waits)" | tee "$B"
timeout 45 python3 benchmarks/rings.py 2>&1 | tee -a "$B" || status=1
echo "== benchmark (WORKBENCH_NATIVE_WORDS=0: Python waits)" | tee -a "$B"
WORKBENCH_NATIVE_WORDS=0 timeout 45 python3 benchmarks/rings.py 2>&1 | tee -a "$B" || status=1
echo "== host side alone: C path, then Python path" | tee -a "$B"
timeout 20 python3 benchmarks/rings.py --host-only 2>&1 | tee -a "$B" || status=1
WORKBENCH_NATIVE_WORDS=0 timeout 20 python3 benchmarks/rings.py --host-only 2>&1 | tee -a "$B" || status=1
# RING_BASE: a folder holding an older tree's workbench/ and benchmarks/ (git archive REV
# workbench benchmarks), measured in the same run for a side-by-side figure
if [ -n "${RING_BASE:-}" ] && [ -d "$RING_BASE/workbench" ]; then
    echo "== benchmark (the older tree in $RING_BASE)" | tee -a "$B"
    (cd "$RING_BASE" && PYTHONPATH=/tmp/site:$PWD timeout 45 python3 benchmarks/rings.py) \
        2>&1 | tee -a "$B" || status=1
fi
echo "== benchmark (C waits, again: the machine may drift)" | tee -a "$B"
timeout 45 python3 benchmarks/rings.py 2>&1 | tee -a "$B" || status=1

echo "== gpu tests" | tee "$OUT/ring-tests.log"
timeout 240 python3 -m pytest -q -p no:cacheprovider -rs -m gpu tests/test_rings*.py tests/test_native_words.py \
    2>&1 | tail -25 | tee -a "$OUT/ring-tests.log" || status=1
echo "== a faulting handler on the GPU (its own process: the fault ends that CUDA context)" | tee -a "$OUT/ring-tests.log"
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_rings.py -k test_a_faulting_handler_raises_kernel_fault \
    2>&1 | tail -5 | tee -a "$OUT/ring-tests.log" || status=1

echo "== notebook 07" | tee "$OUT/ring-nb07.log"
timeout 100 python3 -m pytest -q -p no:cacheprovider --nbval --nbval-sanitize-with notebooks/sanitize.cfg \
    notebooks/07-ring-kernels.ipynb 2>&1 | tail -15 | tee -a "$OUT/ring-nb07.log" || status=1

echo "== GPU utilisation after (must be 0: no ring left running)" | tee "$OUT/ring-idle.log"
sleep 2
util=$(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits | head -1 | tr -d ' ')
echo "utilization.gpu = $util %" | tee -a "$OUT/ring-idle.log"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv | tee -a "$OUT/ring-idle.log"
[ "$util" = "0" ] || status=1
exit $status
