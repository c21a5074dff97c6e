"""A machine without a C++ compiler: the package imports, ``%load_ext`` says
what is missing, kernels built before run from the cache, and a new build
stops with one line (no traceback) that names what to install.

The compiler is hidden as a user without one has it: ``PATH`` holds nothing,
in a new process (the simulator looks for ``g++`` there)."""
from __future__ import annotations

import json
import os
import pathlib
import pickle
import subprocess
import sys
import uuid

import workbench as wb
from workbench.backends.simulator import build
from workbench.errors import CompilerNotFound

ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHED = 'extern "C" __global__ void nocc_twice(float* x) { x[threadIdx.x] *= 2.0f; }'

#: Run in a process without a compiler: the notebook's view of it, as JSON.
SCRIPT = r'''
import json, sys
import numpy as np
from IPython.testing.globalipapp import start_ipython
from IPython.utils.capture import capture_output

cached, fresh = sys.argv[1], sys.argv[2]
ip = start_ipython()
out = {}
with capture_output() as loaded:
    ip.run_line_magic("load_ext", "workbench")
out["load_ext"] = loaded.stdout
with capture_output() as cell:
    result = ip.run_cell("%%cuda -q\n" + cached)
out["cached_error"] = repr(result.error_in_exec)
import workbench as wb
x_host = np.random.default_rng().random(64, dtype=np.float32)
x = wb.to_device(x_host)
ip.user_ns["nocc_twice"](x, grid=1, block=64)
out["cached_ok"] = bool(np.array_equal(wb.to_host(x), 2 * x_host))
with capture_output() as cell:
    result = ip.run_cell("%%cuda\n" + fresh)
out["fresh_error"] = type(result.error_in_exec).__name__
out["fresh_shown"] = cell.stdout + cell.stderr
checkup = wb.doctor()
out["doctor"] = {c.name: [c.status, c.found, c.fix] for c in checkup}
print("RESULT" + json.dumps(out))
'''


def _without_compiler(tmp_path, *args) -> dict:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("WBSIM_CXX", "CC", "CXX")}
    env.update(PATH=str(empty), PYTHONPATH=str(ROOT), WORKBENCH_BACKEND="simulator")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


def test_without_a_compiler_cached_kernels_run_and_a_new_one_says_what_to_install(
        tmp_path, private_simulator):
    private_simulator()
    wb.compile(CACHED)  # built here (or already in the cache), where g++ is found
    fresh = ('extern "C" __global__ void nocc_fresh(float* y) '
             f'{{ y[threadIdx.x] = {uuid.uuid4().int % 10**6}.5f; }}')  # never built before
    seen = _without_compiler(tmp_path, CACHED, fresh)
    install = build.install_command()

    # %load_ext: the backend's line says g++ is missing, the next line what to install
    assert "g++ missing" in seen["load_ext"]
    assert "needs a C++ compiler to build new kernels" in seen["load_ext"]
    assert install in seen["load_ext"]

    # the kernel built before loads from the cache and computes the right numbers
    assert seen["cached_error"] == "None"
    assert seen["cached_ok"] is True

    # a new kernel: one line, no traceback, naming the command and the cache
    assert seen["fresh_error"] == "CompilerNotFound"
    shown = [ln for ln in seen["fresh_shown"].splitlines() if ln.strip()]
    assert len(shown) == 1, shown
    assert shown[0].startswith("CompilerNotFound: The CPU simulator needs a C++ compiler")
    assert f"({install})" in shown[0] and "still run from the cache" in shown[0]
    assert "wb.doctor()" in shown[0]
    assert "Traceback" not in seen["fresh_shown"] and ".py" not in seen["fresh_shown"]

    # the doctor agrees: both compilers missing, each with the command that installs them
    status, found, fix = seen["doctor"]["C++ compiler (simulator)"]
    assert status == "missing" and install in fix and "g++ is not on PATH" in found
    status, found, fix = seen["doctor"]["C compiler (C modules)"]
    assert status == "missing" and install in fix
    assert seen["doctor"]["simulator worker"][0] == "ok"  # built before: still in the cache


def test_the_install_command_follows_the_system():
    linux = build.install_command_for
    assert linux("linux", {"ID": "ubuntu", "ID_LIKE": "debian"}, None) == "sudo apt install g++"
    assert linux("linux", {"ID": "debian"}, None) == "sudo apt install g++"
    assert linux("linux", {"ID": "rocky", "ID_LIKE": "rhel centos fedora"}, None) == \
        "sudo dnf install gcc-c++"
    assert linux("linux", {"ID": "fedora"}, None) == "sudo dnf install gcc-c++"
    assert linux("linux", {"ID": "opensuse-leap", "ID_LIKE": "suse opensuse"}, None) == \
        "sudo zypper install gcc-c++"
    assert linux("linux", {"ID": "gentoo"}, None) == "install g++ with your system's package manager"
    assert linux("darwin", {}, None) == "xcode-select --install"
    assert linux("linux", {"ID": "ubuntu"}, "/opt/conda") == "conda install -c conda-forge cxx-compiler"
    assert build.install_command() in {c for _, c in build._INSTALL_BY_SYSTEM} | {
        "conda install -c conda-forge cxx-compiler", "xcode-select --install",
        "install g++ with your system's package manager"}


def test_every_missing_tool_or_backend_message_points_to_the_doctor():
    for error in (wb.BackendUnavailable("No GPU here."), wb.ProfilerUnavailable("ncu is missing."),
                  CompilerNotFound("No g++.")):
        text = str(error)
        assert text.endswith("(wb.doctor() checks this machine)"), text
        again = pickle.loads(pickle.dumps(error))  # (as from a Dask worker or a child process)
        assert str(again) == text and str(again).count("wb.doctor()") == 1
