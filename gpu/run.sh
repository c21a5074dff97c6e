#!/usr/bin/env bash
# Every check that needs an NVIDIA GPU, from the repository root of a checkout on the GPU machine.
#
#   gpu/run.sh tests [-k EXPR]        every gpu-marked test (pytest -m gpu tests), then the tests
#                                     that are not gpu-marked but do more where the GPU machine's
#                                     tools are (nvcc, CuPy's classes, CUPTI's headers, a ring's
#                                     fault on the GPU), then the stream tests again timed by
#                                     events (WORKBENCH_TIMING=events)                   ~4 min
#   gpu/run.sh notebooks [-k EXPR]    every notebook under nbval, on the GPU              ~4 min
#   gpu/run.sh bench [NAME...]        the benchmarks with GPU targets, or those NAMEd:
#                                     launch_overhead cell_turnaround memory rings bench_accuracy
#                                     kernel_library streams python_kernels tuning occupancy_check multi_gpu
#                                     profile_vs_ncu (the kernel library's element-wise, reduction
#                                     and row kernels and the probes, 64 blocks counted a launch;
#                                     then the GEMM, convolution and attention rows at --quick size)
#                                     (rings also with WORKBENCH_NATIVE_WORDS=0 and --host-only,
#                                     bench_accuracy also timed by events)         ~22 min for all
#   gpu/run.sh all [-k EXPR]          the three, one after the other                     ~30 min
#
# (-k EXPR, or EXPR alone, is pytest's -k; bench ignores it.) Each part stops at LIMIT_S seconds
# (default 570): a part is one call of the device tool, which allows 10 minutes a command. So
# run the parts as separate calls, and the benchmarks in four: `gpu/run.sh bench
# launch_overhead cell_turnaround memory rings bench_accuracy` (~5 min), `gpu/run.sh bench
# kernel_library` (~5 min), `gpu/run.sh bench streams python_kernels tuning occupancy_check`
# (~4 min) and `gpu/run.sh bench profile_vs_ncu` (~9 min; its tables also in $OUT/profile-*).
# The durations are estimates from the runs of the scripts this one replaced; the
# summary gives each part's own. The test logs are verbose: a test that hangs (a kernel waiting
# on a barrier that never comes) is the last one named when its step times out.
#
# Environment:
#   OUT     where the logs go (default /tmp/out): summary.txt, setup.log and one log per part run
#   BASE    a folder holding an older tree's workbench/ and benchmarks/ (for example
#           `git archive REV workbench benchmarks | tar -x -C .base`, the folder carried along):
#           each benchmark's plain run is followed by the same benchmark of that tree, side by
#           side in the summary
#   LIMIT_S each part's time limit in seconds (default 570)
#
# What it sets up, once in the machine's life (again only when the carried wheels change):
#   * the wheels carried in .whl, installed into /tmp/site. The machine's image has CuPy, NumPy,
#     pandas, matplotlib, pytest, numba-cuda and nvidia-ml-py, not the rest; make them here with
#     `../shared/device/wheels.sh platformdirs pcpp nvtx optuna cmaes dask distributed` (it adds
#     the Jupyter stack) and carry .whl. Each folder .whlx/NAME/ (for example cupti-python's
#     wheels, for the CUPTI collector written in Python) goes into /tmp/site-NAME of its own, so
#     that its versions do not clash with those of .whl.
#   * a sitecustomize.py in /tmp (never in the tree): the image's numba-cuda calls np.row_stack,
#     which its NumPy no longer has; it is given np.vstack's.
#   * whether Dask can start a local cluster here and tune on it; where it cannot, `distributed`
#     is hidden (the Dask tests skip, the notebook's Dask cell prints its one-line reason).
# Everything runs from the source tree (PYTHONPATH starts with the checkout) on the machine's own
# CuPy (WORKBENCH_BACKEND=cupy). On a machine with two GPUs the same commands also run the
# two-GPU rows: the peer copy test, streams.py's peer matrices, tuning.py's "2 GPUs vs 1" row.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-/tmp/out}
SETUP=/tmp/wb-gpu-run
LIMIT_S=${LIMIT_S:-570}
PY=${PYTHON:-python3}
mkdir -p "$OUT" "$SETUP"
export PYTHONUNBUFFERED=1 WORKBENCH_BACKEND=cupy

# Not gpu-marked (CI runs them on the simulator), but on the GPU machine they also check what
# only it has: nvcc's builds, the C allocator and launcher against CuPy's own classes, the CUPTI
# collector built against its headers, CuPy's NVRTC wrapper, and a ring's handler faulting on the
# GPU (in a process of its own: the fault ends that CUDA context).
MACHINE_TESTS=(tests/capabilities/test_programs.py tests/capabilities/test_program_cache.py tests/backends/test_native_allocations.py
               tests/backends/test_native_launch.py tests/backends/test_cupti_native.py tests/backends/test_nvrtc.py
               tests/capabilities/test_rings.py::test_a_faulting_handler_raises_kernel_fault
               tests/capabilities/test_ring_misuse.py::test_after_a_fault_the_ring_says_what_was_lost_and_that_it_stopped)

# The benchmarks, most wanted first (a part that runs out of time drops the last):
# name|time limit in s|environment|arguments. BASE reruns the rows with neither.
# profile_vs_ncu's first run: every library kernel but the GEMM, convolution and attention ones
PROFILED=dropout,add,scale,axpy,fma,fma_chain,relu,leaky_relu,gelu,gelu_erf,sigmoid,tanh,softplus
PROFILED+=,silu,sgd_momentum,adam,adamw,max_pool2d,avg_pool2d,sum,mean,max,min,argmax,dot,norm
PROFILED+=,softmax,log_softmax,layer_norm,cross_entropy,transpose,batch_norm,probes
BENCHMARKS=(
    "launch_overhead|150||" "cell_turnaround|100||" "memory|150||"
    "rings|90||" "rings|90|WORKBENCH_NATIVE_WORDS=0|"
    "rings|30||--host-only" "rings|30|WORKBENCH_NATIVE_WORDS=0|--host-only"
    "bench_accuracy|120||" "bench_accuracy|100|WORKBENCH_TIMING=events|"
    "kernel_library|480||--max-time 0.3"
    "streams|120||" "python_kernels|150||" "tuning|180||" "occupancy_check|120||" "multi_gpu|200||"
    "profile_vs_ncu|330||--max-blocks 64 --only $PROFILED --out $OUT/profile-library"
    "profile_vs_ncu|200||--quick --only attention,sgemm,hgemm,conv2d,conv2d_im2col --out $OUT/profile-quick"
)

usage() {
    sed -n '2,19p' "$0" >&2
    exit 2
}

part=${1:-}
[ $# -gt 0 ] && shift
kexpr=""
names=()
case "$part" in
    tests|notebooks|all)
        if [ "${1:-}" = "-k" ]; then kexpr=${2:-}; [ $# -ge 2 ] || usage; shift 2
        elif [ $# -gt 0 ]; then kexpr=$1; shift; fi
        [ $# -eq 0 ] || usage ;;
    bench) names=("$@") ;;
    *) usage ;;
esac
known=$(printf '%s\n' "${BENCHMARKS[@]}" | cut -d'|' -f1 | uniq)
for wanted in "${names[@]}"; do
    if ! grep -qx "$wanted" <<<"$known"; then
        echo "no benchmark named $wanted; the names: $(paste -sd' ' <<<"$known")" >&2
        exit 2
    fi
done

SUMMARY="$OUT/summary.txt"
status=0
note() { echo "$*" | tee -a "$SUMMARY"; }
fail() { status=1; note "$@"; }

# -- set-up, once in the machine's life -------------------------------------------------------
setup() {
    local log="$OUT/setup.log" key dir site
    key=$(find .whl .whlx -name '*.whl' -printf '%p %s\n' 2>/dev/null | sort | md5sum | cut -c1-32)
    if [ "$(cat "$SETUP/installed" 2>/dev/null)" = "$key" ]; then
        echo "== wheels: installed earlier in this machine's life" >>"$log"
    else
        rm -rf /tmp/site /tmp/site-* "${SETUP:?}"/*
        mkdir -p "$SETUP/py"
        if compgen -G ".whl/*.whl" >/dev/null; then
            echo "== wheels: .whl -> /tmp/site" >>"$log"
            "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
                --target /tmp/site .whl/*.whl >>"$log" 2>&1 || { fail "setup: pip could not install .whl (setup.log)"; return 1; }
        else
            echo "== wheels: none in .whl (Jupyter, nbval and the extras are missing: see gpu/run.sh)" >>"$log"
        fi
        for dir in .whlx/*/; do
            if ! compgen -G "$dir*.whl" >/dev/null; then continue; fi
            site=/tmp/site-$(basename "$dir")
            echo "== wheels: $dir -> $site" >>"$log"
            "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
                --target "$site" "$dir"*.whl >>"$log" 2>&1 || { fail "setup: pip could not install $dir (setup.log)"; return 1; }
        done
        cat >"$SETUP/py/sitecustomize.py" <<'PY'
# Written by gpu/run.sh for the GPU machine's Python: the image's numba-cuda calls np.row_stack,
# which its NumPy no longer has. Then the image's own sitecustomize, if there is one, runs.
# Any Python that inherits PYTHONPATH imports this, ncu's own embedded one too, for which the
# image's NumPy is not built: there it must do nothing and never raise.
import os as _os
import sys as _sys

try:
    import numpy as _np
    if not hasattr(_np, "row_stack"):
        _np.row_stack = _np.vstack
except Exception:  # noqa: BLE001 - a Python this NumPy was not built for (ncu's)
    pass
_here = _os.path.dirname(_os.path.abspath(__file__))
for _entry in _sys.path:
    _path = _os.path.join(_os.path.abspath(_entry or "."), "sitecustomize.py")
    if _os.path.dirname(_path) != _here and _os.path.isfile(_path):
        try:
            with open(_path) as _file:
                exec(compile(_file.read(), _path, "exec"), {"__name__": "sitecustomize", "__file__": _path})
        except Exception:  # noqa: BLE001 - the same: not this Python's
            pass
        break
PY
        echo "$key" >"$SETUP/installed"
    fi
    use_site
    if [ ! -f "$SETUP/dask-probed" ]; then probe_dask >>"$log" 2>&1; use_site; fi
    describe >>"$log" 2>&1
    note "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | paste -sd';')"
    note "$(grep -m1 '^backend:' "$log" || echo 'backend: not made (setup.log)')"
    note "$(grep -m1 '^missing:' "$log" || echo 'missing: nothing')"
}

# SITE_PATH: what the set-up put on the path, after the tree (the Dask stub before the wheels)
use_site() {
    local site
    SITE_PATH=$SETUP/py
    [ -d "$SETUP/nodask" ] && SITE_PATH=$SITE_PATH:$SETUP/nodask
    [ -d /tmp/site ] && SITE_PATH=$SITE_PATH:/tmp/site
    for site in /tmp/site-*; do [ -d "$site" ] && SITE_PATH=$SITE_PATH:$site; done
    export PYTHONPATH=$ROOT:$SITE_PATH
}

probe_dask() {
    touch "$SETUP/dask-probed"
    "$PY" -c "import distributed" 2>/dev/null || { echo "== Dask: not installed"; return; }
    echo "== can Dask start a local cluster and tune on it?"
    # a file, not stdin: Dask's worker processes start by importing the main module
    cat >"$SETUP/dask_probe.py" <<'PY'
import numpy as np
import workbench as wb
from distributed import Client
SOURCE = r'''
extern "C" __global__ void spin(float* out, long long base)
{ long long s = clock64(); while (clock64() - s < base * blockDim.x / 32) { } out[blockIdx.x] = 1.0f; }
'''
if __name__ == "__main__":
    with wb.tuning.local_cluster(1) as cluster, Client(cluster) as client:
        client.wait_for_workers(1, timeout=60)
        r = wb.tune(SOURCE, (np.zeros(2, np.float32), np.int64(20000)), space={"block": [32, 64, 128]},
                    grid=2, client=client, cache=False, progress=False)
        assert [row["status"] for row in r.rows] == ["ok"] * 3, r.to_pandas()
    print("DASK_OK")
PY
    if timeout -k 10 90 "$PY" "$SETUP/dask_probe.py" 2>&1 | tee "$SETUP/dask_probe.log" | grep -q DASK_OK; then
        echo "Dask: a local cluster tunes here"
    else
        tail -5 "$SETUP/dask_probe.log"
        echo "Dask cannot run here: distributed is hidden (its tests skip)"
        mkdir -p "$SETUP/nodask"
        echo 'raise ModuleNotFoundError("hidden by gpu/run.sh: Dask could not start a cluster on this machine")' \
            >"$SETUP/nodask/distributed.py"
    fi
}

describe() {
    echo "== machine"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '(no git here)')"
    timeout 30 nvidia-smi -L
    timeout 30 nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader
    for t in nvcc ncu nsys g++ stdbuf; do printf '%-7s %s\n' "$t" "$(command -v $t || echo missing)"; done
    timeout 30 nvcc --version | tail -1
    timeout 60 ncu --version 2>/dev/null | tail -1
    timeout 120 "$PY" - <<'PY'
import importlib
import sys
import warnings
warnings.simplefilter("ignore")  # (a package's deprecated __version__, say)
print("python:", sys.version.split()[0])
missing = []
for name in ("cupy", "IPython", "ipykernel", "ipywidgets", "nbval", "nbclient", "platformdirs", "pcpp",
             "jsonschema", "nvtx", "numba", "triton", "optuna", "cmaes", "scipy", "dask", "distributed",
             "cupti"):
    try:
        m = importlib.import_module(name)
        print(f"  {name} {getattr(m, '__version__', '')}")
    except Exception as exc:  # noqa: BLE001 - one line each, whatever it is
        print(f"  {name}: not importable ({type(exc).__name__}: {exc})")
        missing.append(name)
print("missing:", " ".join(missing) if missing else "nothing")
import workbench as wb
print("backend:", wb.backend().describe(), "| devices:", wb.backend().device_count())
# (informative lines: a module moved or renamed prints its error here and nothing fails)
for what, line in (("C words module", "from workbench.backends import native_words as m; "
                    "r = m.module() is not None or m.unavailable_reason()"),
                   ("C allocator", "from workbench.backends.gpu import allocations as m; "
                    "r = m.implementation()"),
                   ("profilers", "r = wb.profiling.tools_status()"),
                   ("energy counter (NVML)", "from workbench.tuning.task import energy_available; "
                    "r = energy_available()")):
    scope = {"wb": wb}
    try:
        exec(line, scope)
        print(f"{what}: {scope['r']}")
    except Exception as exc:  # noqa: BLE001
        print(f"{what}: ? ({type(exc).__name__}: {exc})")
PY
}

# -- running and counting ------------------------------------------------------------------------
part_start=$SECONDS
left() { echo $((LIMIT_S - (SECONDS - part_start))); }
smaller() { [ "$1" -lt "$2" ] && echo "$1" || echo "$2"; }

# pytest_step LOG LABEL LIMIT ARGS...: one pytest run, its result line in the summary
pytest_step() {
    local log=$1 label=$2 limit rc from result
    limit=$(smaller "$3" "$(left)")
    shift 3
    if [ "$limit" -le 10 ]; then fail "  $label: not run (the part's time limit)"; return; fi
    from=$(($(wc -l <"$log") + 1))
    echo "== $label" >>"$log"
    timeout -k 10 "$limit" "$PY" -m pytest -v -p no:cacheprovider -rfEs "$@" >>"$log" 2>&1
    rc=$?
    result=$(tail -n +"$from" "$log" | grep -E '[0-9]+ (passed|failed|errors?|skipped|deselected)|no tests ran' | tail -1 | sed 's/^=* *//; s/ *=*$//')
    case $rc in
        0) note "  $label: $result" ;;
        5) note "  $label: none selected" ;;
        124|137) fail "  $label: TIMED OUT after ${limit}s (${result:-no result line})"
                 tail -n +"$from" "$log" | grep -E '::' | tail -1 | sed 's/^/      last: /' >>"$SUMMARY" ;;
        *) fail "  $label: FAILED: ${result:-exit $rc}"
           tail -n +"$from" "$log" | grep -E '^(FAILED|ERROR) ' | head -15 | sed 's/^/      /' >>"$SUMMARY" ;;
    esac
}

gpu_idle() {
    local util
    sleep 2
    # the GPUs this part was given (nvidia-smi does not read CUDA_VISIBLE_DEVICES; with every GPU
    # visible, GPU 0, where its launches go by default), the busiest of them
    util=$(nvidia-smi -i "${CUDA_VISIBLE_DEVICES:-0}" --query-gpu=utilization.gpu \
               --format=csv,noheader,nounits 2>/dev/null | tr -d ' ' | sort -n | tail -1)
    if [ "$util" = "0" ]; then note "  GPU idle after the part: yes"
    else fail "  GPU idle after the part: NO (utilization.gpu ${util:-?} %: a kernel left running?)"
        nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >>"$OUT/$1.log" 2>&1
    fi
}

profiler_folders() {
    find /tmp -maxdepth 1 \( -name 'workbench-ncu-*' -o -name 'workbench-nsys-*' \) | wc -l
}

run_tests() {
    local log="$OUT/tests.log" k=() before after
    : >"$log"
    [ -n "$kexpr" ] && k=(-k "$kexpr")
    note "tests${kexpr:+ (-k $kexpr)}:"
    before=$(profiler_folders)
    pytest_step "$log" "gpu-marked" 500 -m gpu tests "${k[@]}"
    pytest_step "$log" "not gpu-marked, using this machine's tools" 120 -m "not gpu" "${MACHINE_TESTS[@]}" "${k[@]}"
    WORKBENCH_TIMING=events pytest_step "$log" "streams timed by events" 150 \
        -m gpu tests/core/test_streams.py tests/core/test_stream_rules.py "${k[@]}"
    after=$(profiler_folders)
    if [ "$after" -le "$before" ]; then note "  profilers' temporary folders left in /tmp: none"
    else fail "  profilers' temporary folders left in /tmp: $((after - before))"; fi
    gpu_idle tests
}

run_notebooks() {
    local log="$OUT/notebooks.log" k=()
    : >"$log"
    [ -n "$kexpr" ] && k=(-k "$kexpr")
    note "notebooks${kexpr:+ (-k $kexpr)}:"
    pytest_step "$log" "under nbval" 560 --nbval --nbval-current-env \
        --nbval-sanitize-with notebooks/sanitize.cfg notebooks "${k[@]}"
    gpu_idle notebooks
}

# tables FILE: the tables a benchmark printed (title, header, rows), nothing else
tables() {
    awk 'prev2 != "" && /^-+( +-+)*$/ { print "  " prev2; print "  " prev1; on = 1; prev2 = prev1 = ""; next }
         on && NF == 0 { on = 0 }
         on { print "  " $0 }
         { prev2 = prev1; prev1 = $0 }' "$1"
}

# bench_one TREE LABEL NAME LIMIT ENV ARGS
bench_one() {
    local tree=$1 label=$2 name=$3 limit envs=$5 args=$6 rc t0=$SECONDS one="$SETUP/bench.out"
    limit=$(smaller "$4" "$(left)")
    if [ ! -f "$tree/benchmarks/$name.py" ]; then note "-- $label: no benchmarks/$name.py there"; return; fi
    if [ "$limit" -le 10 ]; then fail "-- $label: not run (the part's time limit)"; return; fi
    echo "== $label" >>"$OUT/bench.log"
    # shellcheck disable=SC2086 # (envs and args: words on purpose)
    (cd "$tree" && env $envs PYTHONPATH="$tree:$SITE_PATH" timeout -k 10 "$limit" "$PY" "benchmarks/$name.py" $args) >"$one" 2>&1
    rc=$?
    cat "$one" >>"$OUT/bench.log"
    case $rc in
        0) note "-- $label ($((SECONDS - t0)) s)" ;;
        124|137) fail "-- $label: TIMED OUT after ${limit}s" ;;
        *) fail "-- $label: exit $rc ($((SECONDS - t0)) s)"; tail -3 "$one" | sed 's/^/  /' >>"$SUMMARY" ;;
    esac
    tables "$one" >>"$SUMMARY"
}

run_bench() {
    local entry name limit envs args chosen n
    : >"$OUT/bench.log"
    note "benchmarks${BASE:+ (each plain run beside the tree in BASE=$BASE)}:"
    for entry in "${BENCHMARKS[@]}"; do
        IFS='|' read -r name limit envs args <<<"$entry"
        if [ ${#names[@]} -gt 0 ]; then
            chosen=0
            for n in "${names[@]}"; do [ "$n" = "$name" ] && chosen=1; done
            [ "$chosen" = 1 ] || continue
        fi
        bench_one "$ROOT" "$name${envs:+ $envs}${args:+ $args}" "$name" "$limit" "$envs" "$args"
        if [ -n "${BASE:-}" ] && [ -z "$envs$args" ]; then
            bench_one "$(cd "$BASE" && pwd)" "$name (BASE)" "$name" "$limit" "" ""
        fi
    done
    gpu_idle bench
}

: >"$SUMMARY"
note "gpu/run.sh $part${kexpr:+ -k $kexpr}${names[*]:+ ${names[*]}} ($(date -u '+%Y-%m-%d %H:%M UTC'))"
[ -z "${BASE:-}" ] || [ -d "$BASE/workbench" ] || { echo "BASE=$BASE holds no workbench/" >&2; exit 2; }
setup || { cat "$SUMMARY"; exit 1; }
# run_part NAME: one part within its time limit (the first one's counts the set-up too)
run_part() {
    local started=$SECONDS
    case $1 in
        tests) run_tests ;;
        notebooks) run_notebooks ;;
        bench) run_bench ;;
    esac
    note "  ($1: $((SECONDS - started)) s)"
    part_start=$SECONDS
}
case "$part" in
    all) run_part tests; run_part notebooks; run_part bench ;;
    *) run_part "$part" ;;
esac
note "status: $([ $status -eq 0 ] && echo pass || echo FAIL) (logs: $OUT)"
echo
echo "======== summary ($SUMMARY)"
cat "$SUMMARY"
exit $status
