#!/usr/bin/env bash
# Issue 12, the whole-call C path (FastCall in backends/native/launch.c), on the GPU machine, from
# the repository root: its tests and the launch and timing tests, then benchmarks/launch_overhead.py
# twice (the host's speed varies between runs) and benchmarks/bench_accuracy.py; with FULL=1 every
# gpu-marked test, bench_accuracy timed by events, memory.py and cell_turnaround.py after. Logs in $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/shim && printf 'import numpy as np\nif not hasattr(np, "row_stack"): np.row_stack = np.vstack\n' > /tmp/shim/sitecustomize.py
# (cupti-python, for the fallback collector's test, where its wheels were carried in .whlx/c13)
[ -d .whlx/c13 ] && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/c13 .whlx/c13/*.whl
export PYTHONPATH=/tmp/shim:/tmp/site:/tmp/c13:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
set -o pipefail; status=0
nvidia-smi -L | tee "$OUT/hot-device.txt"
python3 -c "import workbench as wb; b = wb.backend(); print(b.launch_path(), '|', b.timing_source())" \
    2>&1 | tee -a "$OUT/hot-device.txt"
timeout 300 python3 -m pytest -q -m gpu tests/test_fast_call.py tests/test_timing_sources.py \
    tests/test_kernels.py 2>&1 | tail -25 | tee "$OUT/hot-tests.log" || status=1
timeout 200 python3 -m pytest -q tests/test_native_launch.py 2>&1 | tail -5 | tee -a "$OUT/hot-tests.log" || status=1
for run in 1 2; do
    timeout 150 python3 benchmarks/launch_overhead.py 2>&1 | tee "$OUT/hot-launch-$run.log" || status=1
done
timeout 120 python3 benchmarks/bench_accuracy.py 2>&1 | tail -15 | tee "$OUT/hot-accuracy.log" || status=1
if [ -n "$FULL" ]; then  # every gpu-marked test (about 3 minutes) and the other rows
    timeout 300 python3 -m pytest -q -m gpu tests -p no:cacheprovider 2>&1 | tail -30 | tee "$OUT/hot-gpu-tests.log" || status=1
    WORKBENCH_TIMING=events timeout 100 python3 benchmarks/bench_accuracy.py 2>&1 | tail -12 | tee "$OUT/hot-accuracy-events.log" || status=1
    timeout 100 python3 benchmarks/memory.py 2>&1 | tee "$OUT/hot-memory.log" || status=1
    timeout 100 python3 benchmarks/cell_turnaround.py 2>&1 | tee "$OUT/hot-cell.log" || status=1
fi
exit $status
