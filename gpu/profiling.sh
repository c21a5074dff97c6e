#!/usr/bin/env bash
# Profiling on the GPU machine (from the repository root): which profilers exist, the gpu-marked
# tests of tests/test_profiling.py (ncu on a copy kernel, an FMA loop, a %%ncu cell, a program
# built with nvcc), and a raw ncu CSV of a copy kernel for tests/data/ (-> $OUT/ncu_copy_raw.csv).
# About 2 minutes; logs under $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
status=0

echo "== tools" | tee "$OUT/profiling-tools.log"
{
  echo "command -v ncu nsys nvcc:"; command -v ncu nsys nvcc
  echo "ncu --version:"; timeout 60 ncu --version
  echo "nvcc --version:"; timeout 30 nvcc --version | tail -2
  ncu_path=$(command -v ncu || true)
  dirs=""
  [ -n "$ncu_path" ] && dirs="$(dirname "$(readlink -f "$ncu_path")")/extras/python"
  dirs="$dirs $(ls -d /usr/local/cuda*/nsight-compute*/extras/python /opt/nvidia/nsight-compute/*/extras/python 2>/dev/null | tr '\n' ' ')"
  echo "ncu_report candidates: $dirs"
  for d in $dirs; do
    [ -f "$d/ncu_report.py" ] || continue
    PYTHONPATH="$d:$PYTHONPATH" timeout 60 python3 -c "import ncu_report; print('ncu_report importable from $d:', ncu_report.__file__)" && break
  done
  timeout 120 python3 -c "import workbench as wb; print('tools_status:', wb.profiling.tools_status())"
  timeout 60 python3 -c "import nvtx; print('nvtx', nvtx.__file__)" || echo "nvtx: not importable"
} 2>&1 | tee -a "$OUT/profiling-tools.log"

echo "== tests/test_profiling.py"
timeout 240 python3 -m pytest -q -p no:cacheprovider -rs tests/test_profiling.py 2>&1 | tee "$OUT/profiling-tests.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== a raw ncu CSV of a copy kernel (fixture for tests/data/ncu_raw_sample.csv)"
timeout 120 python3 - <<'PY' 2>&1 | tee "$OUT/profiling-sample.log"
import os, shutil, subprocess
import numpy as np
import workbench as wb
from workbench.profiling import tools
src = r'''
extern "C" __global__ void copy_kernel(const float* __restrict__ x, float* __restrict__ y, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }
extern "C" __global__ void fma_kernel(float* out, int iterations, float a, float b)
{
    float x0 = threadIdx.x * 1e-7f, x1 = x0 + 0.1f, x2 = x0 + 0.2f, x3 = x0 + 0.3f;
    for (int i = 0; i < iterations; ++i) {
        x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b); }
    out[blockIdx.x * blockDim.x + threadIdx.x] = (x0 + x1) + (x2 + x3);
}
'''
m = wb.compile(src)
n = 1 << 24
x = wb.to_device(np.ones(n, np.float32)); y = wb.allocate(n)
out = os.environ["OUT"]
copy = wb.profile(m["copy_kernel"], x, y, np.int32(n), grid=n // 256, block=256)
print(copy)
blocks = 4 * wb.backend().device_properties().multiprocessors
o = wb.allocate(blocks * 256)
fma = wb.profile(m["fma_kernel"], o, np.int32(4096), np.float32(0.999), np.float32(1e-3), grid=blocks, block=256)
print(fma)
ncu = tools.find("ncu")
with open(os.path.join(out, "ncu_copy_raw.csv"), "w") as f:
    for i, rep in enumerate((copy, fma)):
        text = subprocess.run([ncu, "--import", rep.path, "--csv", "--page", "raw", "--print-units", "base",
                               "--print-kernel-base", "function"], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "LC_ALL": "C"}).stdout
        lines = text.splitlines()
        start = next(j for j, ln in enumerate(lines) if ln.startswith('"ID"'))
        # one header and units row, then the copy and the FMA launch (IDs renumbered 0, 1)
        body = lines[start:] if i == 0 else lines[start + 2:]
        if i == 1:
            body = ['"1"' + ln[ln.index(","):] for ln in body]
        f.write("\n".join(body) + "\n")
shutil.copy(copy.path, os.path.join(out, "copy.ncu-rep"))
print(open(os.path.join(out, "ncu_copy_raw.csv")).read()[:3000])
print("details page of the copy kernel:")
print(subprocess.run([ncu, "--import", copy.path, "--csv"], capture_output=True, text=True, timeout=120).stdout[:3000])
PY
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "profiling.sh: exit $status"
exit $status
