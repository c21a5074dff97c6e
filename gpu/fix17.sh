#!/usr/bin/env bash
# fix17 on the GPU machine (from the repository root): the whole-program and profiling tests after
# the review fixes (process groups, bounded output, build cache dependencies, the dynamic shared
# memory opt-in, CUDA_VISIBLE_DEVICES for the active device, temporary folders removed), with the
# gpu-marked tests of tests/test_programs.py and tests/test_profiling.py. About 3 minutes; logs
# under $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
status=0

echo "== programs, their runtime, cache and device"
timeout 200 python3 -m pytest -q -p no:cacheprovider -rs tests/test_programs.py tests/test_program_runtime.py \
  tests/test_program_cache.py tests/test_program_device.py tests/test_subprocesses.py 2>&1 | tee "$OUT/fix17-programs.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== profiling (ncu on the GPU; no temporary folder left behind)"
before=$(ls -d /tmp/workbench-ncu-* /tmp/workbench-nsys-* 2>/dev/null | wc -l)
timeout 240 python3 -m pytest -q -p no:cacheprovider -rs tests/test_profiling.py tests/test_profiling_files.py 2>&1 | tee "$OUT/fix17-profiling.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
after=$(ls -d /tmp/workbench-ncu-* /tmp/workbench-nsys-* 2>/dev/null | wc -l)
echo "profiler temporary folders in /tmp: before $before, after $after" | tee -a "$OUT/fix17-profiling.log"
[ "$after" -le "$before" ] || status=1

echo "== a program on the active device (device 0 of a CUDA_VISIBLE_DEVICES list)"
timeout 60 python3 - <<'PY' 2>&1 | tee "$OUT/fix17-device.log"
import workbench as wb
from workbench.runtime.session import backend
b = backend()
print("backend", b.name, "device", b.current_device(), "child env", b.child_environment())
src = r'''
#include <cstdio>
int main() { int d = -1, n = 0; cudaGetDevice(&d); cudaGetDeviceCount(&n);
             cudaDeviceProp p; cudaGetDeviceProperties(&p, d); printf("%d %d %s\n", d, n, p.name); }
'''
print(wb.program(src, echo=False).stdout.strip())
PY
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status
