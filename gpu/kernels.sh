#!/usr/bin/env bash
# The kernel library on a Hopper GPU, from the repository root (about 3 to 4 minutes): a first
# look at each new kernel under a short timeout (a wrong barrier hangs, it does not
# fail), the library's gpu-marked tests, then benchmarks/kernel_library.py: the
# tensor-core rows (hgemm half/bf16 4096^3 and 8192^3 against cuBLAS, attention
# 4x16x4096x128 against torch SDPA flash) and every other row. Logs in $OUT.
[ -d .whl ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
set -o pipefail; status=0
nvidia-smi -L | tee "$OUT/kernels-device.txt"
for check in gemm attention rows; do
    timeout 90 python3 gpu/kernels_smoke.py $check 2>&1 | tail -20 | tee -a "$OUT/kernels-smoke.log" || status=1
done
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider \
    tests/test_kernel_library_hopper.py tests/test_kernel_library_attention.py \
    tests/test_kernel_library.py tests/test_kernel_library_ml.py -k 'not conv and not batch_norm and not dropout' 2>&1 | tail -25 | tee "$OUT/kernels-tests.log" || status=1
timeout 240 python3 benchmarks/kernel_library.py --only gemm_half,gemm_bf16,attention --max-time 0.3 \
    2>&1 | tee "$OUT/kernels-tensor-cores.log" || status=1
timeout 300 python3 benchmarks/kernel_library.py --max-time 0.3 --only "$(python3 -c '
import workbench as wb
print(",".join(n for n, s in wb.kernels.specs().items() if s.family not in ("matmul", "attention")) + ",sgemm")')" \
    2>&1 | tee "$OUT/kernels-rows.log" || status=1
exit $status
