#!/usr/bin/env bash
# GPU run of notebooks/09-programs-and-profiling.ipynb: the notebook under nbval (the same check
# as CI's on the simulator), then executed once more with its outputs kept in
# $OUT/09-programs-and-profiling.gpu.ipynb (+ a text digest) to read the GPU's profile.
# Run from the repository root on the GPU machine; about 2-3 minutes; logs under $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; export PYTHONPATH=/tmp/site:$PWD WORKBENCH_BACKEND=cupy PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export WORKBENCH_CACHE_DIR=/tmp/wb-cache-nb09  # built programs stay off $OUT
status=0
NB=notebooks/09-programs-and-profiling.ipynb

echo "== tools" | tee "$OUT/nb09-tools.log"
{
  for t in nvcc ncu nsys stdbuf g++; do printf '%-7s %s\n' "$t" "$(command -v $t || echo missing)"; done
  timeout 30 nvcc --version | tail -2
  timeout 30 nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  timeout 60 python3 -c "import matplotlib, nbval, nbclient, ipykernel; print('matplotlib', matplotlib.__version__, '| nbval', nbval.__version__)"
  timeout 60 python3 -c "import workbench as wb; print('tools_status:', wb.profiling.tools_status())"
} 2>&1 | tee -a "$OUT/nb09-tools.log"

echo "== $NB under nbval"
timeout 200 python3 -m pytest -v -p no:cacheprovider --nbval --nbval-current-env \
  --nbval-sanitize-with notebooks/sanitize.cfg "$NB" 2>&1 | tee "$OUT/nb09-nbval.log" | tail -60
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== $NB executed, outputs kept"
timeout 150 python3 - "$NB" <<'PY' 2>&1 | tee "$OUT/nb09-outputs.log" | tail -80
import os, sys
import nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
try:
    NotebookClient(nb, timeout=140, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": os.path.dirname(path)}}).execute()
finally:
    nbformat.write(nb, os.path.join(os.environ["OUT"], "09-programs-and-profiling.gpu.ipynb"))
for i, cell in enumerate(nb.cells):
    if cell.cell_type != "code":
        continue
    print(f"--- cell {i}: {cell.source.splitlines()[0][:70]}")
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            print(out.text.rstrip()[:3000])
        elif out.output_type == "error":
            print(f"ERROR {out.ename}: {out.evalue}"[:3000])
        elif "text/plain" in out.get("data", {}):
            print(out.data["text/plain"][:3000])
PY
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "nb09.sh: exit $status"
exit $status
