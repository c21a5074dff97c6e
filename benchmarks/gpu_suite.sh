#!/usr/bin/env bash
# Everything that needs a GPU, in one go: the gpu-marked tests, the notebooks
# under nbval on the GPU, and the GPU benchmarks. Logs go to $OUT (or ./build/gpu).
#   bash benchmarks/gpu_suite.sh            # from the repository root
set -uo pipefail
out=${OUT:-build/gpu}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 WORKBENCH_BACKEND=cupy
py=${PYTHON:-python3}
status=0
nvidia-smi -L | tee "$out/device.txt"
echo "== gpu tests"
$py -m pytest -q -p no:cacheprovider -m gpu -rs tests 2>&1 | tee "$out/pytest-gpu.log" | tail -40 || status=1
echo "== notebooks under nbval on the GPU"
$py -m pytest -q -p no:cacheprovider --nbval --nbval-sanitize-with notebooks/sanitize.cfg notebooks 2>&1 \
  | tee "$out/nbval-gpu.log" | tail -25 || status=1
echo "== benchmarks"
for b in ${BENCHMARKS:-launch_overhead cell_turnaround memory bench_accuracy occupancy_check kernel_library python_kernels rings streams}; do
  [ -f "benchmarks/$b.py" ] || continue
  echo "-- $b"
  timeout 300 $py "benchmarks/$b.py" 2>&1 | tee "$out/bench-$b.log" | tail -30 || status=1
done
exit $status
