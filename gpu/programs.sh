#!/usr/bin/env bash
# GPU checks of whole CUDA programs (workbench/programs): the gpu-marked tests of
# tests/test_programs.py through nvcc, then a quick demo program from the command line.
# Run from the repository root on the GPU machine; logs go to $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export WORKBENCH_CACHE_DIR=/tmp/wb-cache-programs  # executables stay off $OUT
{
  echo "== tools"; for t in nvcc ncu nsys stdbuf g++; do printf '%-7s %s\n' "$t" "$(command -v $t || echo missing)"; done
  timeout 30 nvcc --version | tail -2
  timeout 30 nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
} 2>&1 | tee "$OUT/programs-tools.log"

echo "== gpu tests of tests/test_programs.py (nvcc build and runs)"
timeout 200 python3 -m pytest -q -p no:cacheprovider -rs tests/test_programs.py -k "gpu or nvcc" 2>&1 | tee "$OUT/programs-pytest.log" | tail -25

echo "== demo: a textbook program through nvcc, then on the simulator"
cat > /tmp/wb_demo.cu <<'CU'
#include <cstdio>
__global__ void hello(int n) { if (threadIdx.x < n) printf("hello from thread %d\n", threadIdx.x); }
int main() {
    cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);
    printf("%s, compute capability %d.%d\n", p.name, p.major, p.minor);
    hello<<<1, 4>>>(2);
    cudaError_t e = cudaDeviceSynchronize();
    printf("sync: %s\n", cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
CU
timeout 120 python3 - <<'PY' 2>&1 | tee "$OUT/programs-demo.log"
import workbench as wb
src = open("/tmp/wb_demo.cu").read()
for backend in ("gpu", "simulator"):
    run = wb.program(src, backend=backend, options="-O2")
    print(repr(run))
    print("  build:", run.build.command_line)
    print("  toolkit:", run.build.toolkit)
print(wb.program(src, backend="gpu").build.cache_hit and "second build: cache hit")
PY
