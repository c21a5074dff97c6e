#!/usr/bin/env bash
# Issue 14 on a GPU: the gpu-marked stream/graph/memory-kind tests, notebook 06
# under nbval, benchmarks/streams.py and a probe of the pieces each needs.
# Run from the repository root on the GPU machine; logs under $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
set -o pipefail
out=${OUT:-build/gpu}
mkdir -p "$out"
status=0
nvidia-smi -L | tee "$out/streams-device.txt"
echo "== probe"
timeout 60 python3 - <<'PY' 2>&1 | tee "$out/streams-probe.log" || status=1
import numpy as np, workbench as wb
b = wb.backend(); print(b)
print("devices:", b.device_count(), "managed prefetch:", b.managed_prefetch_supported())
k = wb.compile('extern "C" __global__ void f(float* x, float a, int n){int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n) x[i]=a*x[i]+1.0f;}')["f"]
h = wb.pinned((1 << 20,), np.float32); h[...] = 1
d = wb.allocate((1 << 20,), np.float32)
s = wb.Stream(name="probe")
wb.copy(d, h, stream=s); k(d, 2.0, 1 << 20, n=1 << 20, stream=s); wb.copy(h, d, stream=s, sync=True)
print("copy+kernel+copy:", h[:2])
with wb.graph() as g:
    wb.copy(d, h); k(d, 2.0, 1 << 20, n=1 << 20)
g.launch(sync=True); print("graph:", wb.to_host(d)[:2], g)
m = wb.managed((1 << 20,), np.float32); wb.prefetch(m); wb.advise(m, "read_mostly"); print(wb.memory.kinds())
print(wb.timings().tail(6)[["kernel", "kind", "stream", "device", "bytes", "gbps", "ms", "start_ms"]])
print(wb.timeline(last=6))
PY
echo "== gpu tests (streams, backend streams, memory, rings)"
timeout 120 python3 -m pytest -q -p no:cacheprovider -rs -m gpu tests/test_streams.py tests/test_backend_streams.py \
  tests/test_memory.py tests/test_rings.py 2>&1 | tee "$out/streams-pytest.log" | tail -30 || status=1
echo "== notebook 06 under nbval"
timeout 90 python3 -m pytest -q -p no:cacheprovider --nbval --nbval-sanitize-with notebooks/sanitize.cfg \
  notebooks/06-streams-and-graphs.ipynb 2>&1 | tee "$out/streams-nbval.log" | tail -20 || status=1
echo "== benchmarks/streams.py"
timeout 120 python3 benchmarks/streams.py 2>&1 | tee "$out/streams-bench.log" | tail -45 || status=1
exit $status
