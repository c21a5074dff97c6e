#!/usr/bin/env bash
# GPU run for the issue-14 fixes (streams, events, copies, graphs, timeline): the gpu-marked
# and backend-parametrised tests of test_streams.py, test_stream_rules.py and
# test_timing_sources.py on the GPU, then notebook 06 under nbval. About 2-3 minutes; logs
# under $OUT. Run from the repository root on the GPU machine.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
status=0

echo "== GPU and CUPTI" | tee "$OUT/fix14-env.log"
{
  timeout 30 nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  timeout 60 python3 -c "import workbench as wb; print(wb.backend().describe()); print('devices:', wb.backend().device_count())"
  timeout 60 python3 -c "from cupti import cupti; print('cupti.get_timestamp:', hasattr(cupti, 'get_timestamp'))"
} 2>&1 | tee -a "$OUT/fix14-env.log"

echo "== tests on the GPU (CUPTI timing where available)"
timeout 200 python3 -m pytest -v -p no:cacheprovider -m gpu \
  tests/test_streams.py tests/test_stream_rules.py tests/test_timing_sources.py 2>&1 \
  | tee "$OUT/fix14-tests.log" | tail -70
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== the same tests timed by events (WORKBENCH_TIMING=events)"
WORKBENCH_TIMING=events timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/test_streams.py tests/test_stream_rules.py 2>&1 \
  | tee "$OUT/fix14-tests-events.log" | tail -30
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== notebooks/06-streams-and-graphs.ipynb under nbval"
timeout 150 python3 -m pytest -q -p no:cacheprovider --nbval --nbval-current-env \
  --nbval-sanitize-with notebooks/sanitize.cfg notebooks/06-streams-and-graphs.ipynb 2>&1 \
  | tee "$OUT/fix14-nb06.log" | tail -40
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== status $status"
exit $status
