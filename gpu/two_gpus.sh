#!/usr/bin/env bash
# The two-GPU checks of issues 14 and 18 on a machine with two GPUs (nvidia-h200-x2), from the
# repository root: the gpu-marked stream tests (the peer copy between two devices among them),
# benchmarks/streams.py (peer access and copy bandwidth matrices, host<->device per device),
# the gpu-marked tuning tests and benchmarks/tuning.py --quick (its "2 GPUs vs 1" row tunes 64
# configurations on a Dask cluster of one worker per GPU). About a minute; the wheels in .whl
# (../shared/device/wheels.sh platformdirs pcpp nvtx optuna cmaes dask distributed) installed first.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
set -o pipefail; status=0
nvidia-smi -L; nvidia-smi topo -m 2>&1 | head -4
echo "== stream tests"
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu -rs tests/test_streams.py tests/test_backend_streams.py 2>&1 | tail -5 || status=1
echo "== benchmarks/streams.py"
timeout 120 python3 benchmarks/streams.py 2>&1 | tail -32 || status=1
echo "== tuning tests"
timeout 170 python3 -m pytest -q -p no:cacheprovider -m gpu -rs tests/test_tuning.py 2>&1 | tail -5 || status=1
echo "== benchmarks/tuning.py --quick"
timeout 130 python3 benchmarks/tuning.py --quick 2>&1 | tail -16 || status=1
exit $status
