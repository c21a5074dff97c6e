#!/usr/bin/env bash
# Issue 15, round trip and small batches (branch wt-ringlat) on the GPU machine, from the
# repository root: a transport probe (gpu/ringlat_probe.py: head+read vs LL request, release seq
# vs LL answer), a call() probe (gpu/ringlat_calls.py: call() in several rings and loops),
# benchmarks/rings.py of this branch and of main (e6b15b5, where git can show it) alternately,
# twice each, --host-only, the C module's tests, the gpu-marked ring tests, notebook 07 under
# nbval, and NVML utilisation after everything (a ring left spinning shows). About 3-4 minutes;
# logs in $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
set -o pipefail; status=0
nvidia-smi -L | tee "$OUT/ringlat-device.txt"; (git log --oneline -1 2>/dev/null || echo "no git here") | tee -a "$OUT/ringlat-device.txt"
python3 -c "from workbench.backends import native_words as n; print('C words module:', n.module(), n.unavailable_reason())" \
    2>&1 | tee -a "$OUT/ringlat-device.txt"

echo "== transport probe" | tee "$OUT/ringlat-probe.log"
timeout 60 python3 gpu/ringlat_probe.py 20000 2>&1 | tee -a "$OUT/ringlat-probe.log" || status=1

echo "== call() probe: default ring (3 call warps), gaps between calls, call_warps 1 and 4, capacity 65536 before/after 8M messages, one block" | tee -a "$OUT/ringlat-probe.log"
timeout 60 python3 gpu/ringlat_calls.py 10000 2>&1 | tee -a "$OUT/ringlat-probe.log" || status=1

# benchmarks/rings.py: this branch, main (e6b15b5), this branch again, main again (the machine
# drifts: alternate). Main measures its round trip in the throughput ring after the throughput
# run: this branch's row "round trip p50 in this ring, after the throughput run" is its match;
# this branch's target rows measure a fresh ring of the defaults.
B="$OUT/ringlat-bench.log"; : > "$B"
base=e6b15b5
main_ok=0
if git cat-file -e "$base:workbench/rings/ring.py" 2>/dev/null; then
    rm -rf /tmp/ring-main && mkdir -p /tmp/ring-main \
        && git archive "$base" workbench benchmarks | tar -x -C /tmp/ring-main && main_ok=1
fi
for round in 1 2; do
    echo "== benchmark (this branch, round $round)" | tee -a "$B"
    timeout 50 python3 benchmarks/rings.py 2>&1 | tee -a "$B" || status=1
    if [ $main_ok = 1 ]; then
        echo "== benchmark (main, $base, round $round)" | tee -a "$B"
        (cd /tmp/ring-main && PYTHONPATH=/tmp/site:/tmp/ring-main timeout 50 python3 benchmarks/rings.py) \
            2>&1 | tee -a "$B" || status=1
    else
        echo "(no git history here: main's benchmark not run)" | tee -a "$B"
    fi
done
echo "== host side alone (C path)" | tee -a "$B"
timeout 20 python3 benchmarks/rings.py --host-only 2>&1 | tee -a "$B" || status=1

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
