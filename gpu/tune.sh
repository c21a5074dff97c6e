#!/usr/bin/env bash
# Autotuning on the GPU machine (from the repository root): which optional packages import, the
# tests of tests/test_tuning.py (gpu-marked variants: known optimum, failures, cache and wb.tuned,
# templates against NumPy, energy per launch from NVML; the Dask tests on simulator workers),
# notebooks/10-autotuning.ipynb under nbval on the GPU, and benchmarks/tuning.py (TPE vs random,
# tuner overhead, the 2-GPU row). About 3 minutes; logs under $OUT.
#
# The machine lacks Optuna and Dask: fetch their wheels first, from the checkout,
#   ../shared/device/wheels.sh optuna cmaes dask distributed
# (the line below installs everything in .whl). If Dask cannot start a cluster here, the Dask
# parts are skipped (the tests skip, the notebook's Dask cell prints the one-line reason).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
status=0

echo "== packages and device" | tee "$OUT/tune-probe.log"
timeout 120 python3 - <<'PY' 2>&1 | tee -a "$OUT/tune-probe.log"
import importlib
for name in ("optuna", "cmaes", "scipy", "dask", "distributed", "dask_cuda", "cupy"):
    try:
        m = importlib.import_module(name)
        print(f"{name}: {getattr(m, '__version__', '?')}")
    except Exception as exc:
        print(f"{name}: not importable ({type(exc).__name__}: {exc})")
import workbench as wb
from workbench.tuning.task import energy_available
b = wb.backend()
print("backend:", b.name, "devices:", b.device_count(), b.device_properties().name)
print("energy counter (NVML):", energy_available())
PY

echo "== can Dask start a local cluster and tune on it?" | tee "$OUT/tune-dask-probe.log"
# a file, not stdin: Dask's worker processes start by importing the main module
cat > /tmp/tune_dask_probe.py <<'PY'
import numpy as np
import workbench as wb
from distributed import Client
src = r'''
extern "C" __global__ void spin(float* out, long long base)
{ long long s = clock64(); while (clock64() - s < base * blockDim.x / 32) { } out[blockIdx.x] = 1.0f; }
'''
if __name__ == "__main__":
    with wb.tuning.local_cluster(1) as cluster, Client(cluster) as client:
        client.wait_for_workers(1, timeout=60)
        r = wb.tune(src, (np.zeros(2, np.float32), np.int64(20000)), space={"block": [32, 64, 128]},
                    grid=2, client=client, cache=False, progress=False)
        print(type(cluster).__name__, r)
        print(r.to_pandas()[["block", "status", "reason", "median_s", "device"]])
        assert [row["status"] for row in r.rows] == ["ok"] * 3, r.to_pandas()
    print("DASK_OK")
PY
timeout 90 python3 /tmp/tune_dask_probe.py 2>&1 | tee -a "$OUT/tune-dask-probe.log"
if ! grep -q DASK_OK "$OUT/tune-dask-probe.log"; then
  echo "Dask cannot run here: the Dask parts below are skipped" | tee -a "$OUT/tune-dask-probe.log"
  mkdir -p /tmp/nodask
  echo 'raise ModuleNotFoundError("hidden by gpu/tune.sh: Dask could not start a cluster here (see tune-dask-probe.log)")' > /tmp/nodask/distributed.py
  export PYTHONPATH=/tmp/nodask:$PYTHONPATH
fi

echo "== tests/test_tuning.py"
timeout 180 python3 -m pytest -q -p no:cacheprovider -rs tests/test_tuning.py 2>&1 | tee "$OUT/tune-tests.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== notebooks/10-autotuning.ipynb under nbval (GPU)"
timeout 240 python3 -m pytest -q -p no:cacheprovider --nbval --nbval-sanitize-with notebooks/sanitize.cfg \
  notebooks/10-autotuning.ipynb 2>&1 | tee "$OUT/tune-notebook.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== benchmarks/tuning.py"
timeout 180 python3 benchmarks/tuning.py 2>&1 | tee "$OUT/tune-benchmark.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "tune.sh: exit $status"
exit $status
