"""``wb.doctor()``: one table of this machine's checks, each with a status
and a one-line fix, quick by default; ``%cuda_doctor`` and ``python -m
workbench doctor`` show the same."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import time

import numpy as np
import pytest

import workbench as wb
from workbench.backends import nvidia_gpu_present
from workbench.checkup import STATUSES, gpu, host, tools
from workbench.profiling import tools as profilers
from workbench.programs import toolkit

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROWS = ["backend", "GPU and driver", "MIG", "clocks", "CuPy", "NVRTC", "CUDA toolkit (nvcc)",
        "CUPTI", "Nsight Compute (ncu)", "performance counters", "Nsight Systems (nsys)",
        "compute-sanitizer", "C++ compiler (simulator)", "C compiler (C modules)",
        "C module: launcher", "C module: memory tracking", "C module: CUPTI records",
        "C module: ring words", "simulator worker", "host memory", "Numba", "Triton", "Optuna",
        "Dask"]
no_gpu = pytest.mark.skipif(nvidia_gpu_present(), reason="this machine has an NVIDIA GPU")


def _installed(name: str) -> bool:
    try:
        importlib.metadata.version(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def _mem_total() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))


@pytest.fixture(scope="module")
def checkup():
    start = time.perf_counter()
    result = wb.doctor()
    result.seconds = time.perf_counter() - start
    return result


def test_every_row_is_there_with_a_status_and_a_one_line_fix(checkup):
    assert [c.name for c in checkup] == ROWS
    for c in checkup:
        assert c.status in STATUSES, c
        assert c.found.strip() and "\n" not in c.found, c
        assert c.fix.strip() and "\n" not in c.fix, c
    assert checkup.seconds < 20  # nothing slow by default: no compile, probes side by side


@no_gpu
def test_statuses_on_a_machine_without_a_gpu(checkup):
    status = {c.name: c.status for c in checkup}
    assert "simulator" in checkup["backend"].found and status["backend"] == "ok"
    for name in ("GPU and driver", "MIG", "clocks", "performance counters"):
        assert status[name] == "missing", checkup[name]
    assert checkup["GPU and driver"].found.startswith("no NVIDIA GPU found")
    cupy = any(_installed(n) for n in ("cupy-cuda13x", "cupy-cuda12x", "cupy"))
    assert status["CuPy"] == ("ok" if cupy else "missing")
    nvrtc = wb.backend().versions().get("nvrtc")
    assert status["NVRTC"] == ("ok" if nvrtc else "missing")
    if nvrtc:
        assert f"NVRTC {nvrtc}" in checkup["NVRTC"].found and "sm_90" in checkup["NVRTC"].found
    assert status["CUDA toolkit (nvcc)"] == ("ok" if toolkit.find_nvcc() else "missing")
    for tool, name in (("ncu", "Nsight Compute (ncu)"), ("nsys", "Nsight Systems (nsys)")):
        assert status[name] == ("ok" if profilers.find(tool) else "missing")
    gxx = shutil.which(os.environ.get("WBSIM_CXX", "g++"))
    assert status["C++ compiler (simulator)"] == ("ok" if gxx else "missing")
    cc = shutil.which(os.environ.get("CC", "cc").split()[0] if os.environ.get("CC") else "cc")
    headers = pathlib.Path(sysconfig.get_paths()["include"], "Python.h").exists()
    assert status["C compiler (C modules)"] == ("missing" if not cc else "ok" if headers else "warning")
    for name in ("C module: launcher", "C module: memory tracking", "C module: CUPTI records"):
        assert status[name] == "ok" and "not needed here" in checkup[name].found
    assert status["C module: ring words"] == "ok"
    assert status["simulator worker"] == "ok"
    simulated = wb.backend().memory_info()[1]
    assert status["host memory"] == ("warning" if simulated > _mem_total() else "ok")
    for name, package in (("Numba", "numba"), ("Triton", "triton"), ("Optuna", "optuna"),
                          ("Dask", "dask")):
        assert status[name] in (("ok", "warning") if _installed(package) else ("missing",)), name
        if status[name] == "missing":
            assert "pip install 'cuda-workbench[" in checkup[name].fix


def test_the_fixes_say_what_to_do(checkup):
    for c in checkup:
        if c.status == "ok":
            assert c.fix == "nothing to do"
        else:
            assert c.fix != "nothing to do", c
    if checkup["host memory"].status == "warning":  # the fix is code that works as written
        fix = checkup["host memory"].fix
        assert fix.startswith("wb.backend('simulator', memory_bytes=")


def test_the_table_shows_itself_as_text_html_and_pandas(checkup):
    text = repr(checkup)
    assert text.splitlines()[0].startswith("wb.doctor(): ")
    for c in checkup:
        assert c.name in text
        if c.status != "ok":
            assert f"fix: {c.fix}" in text
    html = checkup._repr_html_()
    assert html.count("<tr>") == len(ROWS) + 1 and "<th" in html
    frame = checkup.to_pandas()
    assert list(frame.columns) == ["check", "status", "found", "fix"]
    assert frame["check"].tolist() == ROWS
    assert frame.set_index("check")["status"].to_dict() == {c.name: c.status for c in checkup}
    counts = checkup.counts()
    assert sum(counts.values()) == len(ROWS)
    with pytest.raises(KeyError, match="no check named 'GPU'"):
        checkup["GPU"]


def test_a_probe_that_fails_or_hangs_is_a_row_not_a_crash(monkeypatch):
    def broken():
        raise OSError("cannot read /dev/something")

    def hangs():
        time.sleep(30)

    monkeypatch.setattr(host, "check_cc", broken)
    monkeypatch.setattr(host, "check_cxx", hangs)
    start = time.perf_counter()
    result = wb.doctor(timeout_s=1.0)
    assert time.perf_counter() - start < 15
    assert result["C compiler (C modules)"].status == "error"
    assert "OSError: cannot read /dev/something" in result["C compiler (C modules)"].found
    assert result["C++ compiler (simulator)"].status == "error"
    assert "no answer within 1 s" in result["C++ compiler (simulator)"].found
    assert [c.name for c in result] == ROWS


def test_cuda_doctor_magic_and_the_command_line(shell, capsys):
    capsys.readouterr()
    shell.run_line_magic("cuda_doctor", "")
    out = capsys.readouterr().out
    assert out.startswith("wb.doctor(): ") and "C++ compiler (simulator)" in out
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "workbench", "doctor"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.stdout.startswith("wb.doctor(): "), proc.stderr
    assert proc.returncode == (1 if " error" in proc.stdout.splitlines()[0] else 0)


def test_deep_compiles_and_runs_a_kernel():
    result = wb.doctor(deep=True)
    row = result["compile and run"]
    assert row.status == "ok" and "result matches NumPy" in row.found
    assert "doctor_axpy" not in wb.modules  # the doctor's kernel stays out of the user's modules
    assert result["simulator worker"].found.startswith("built")


# -- the decisions, on what a GPU machine's NVML and driver would say ------------------------

def _gpu(**fields):
    device = gpu.Device("NVIDIA H200", (9, 0), 141 << 30, fields.pop("mig", False),
                        fields.pop("slowdowns", []))
    return gpu.Gpus(driver="580.65.06", cuda=fields.pop("cuda", (13, 0)), devices=[device])


def test_the_driver_setting_of_the_counters(tmp_path, monkeypatch):
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    assert tools.counters_restricted(str(params)) is True
    params.write_text("RmProfilingAdminOnly: 0\n")
    assert tools.counters_restricted(str(params)) is False
    assert tools.counters_restricted(str(tmp_path / "none")) is None
    monkeypatch.setattr(tools, "counters_restricted", lambda: True)
    monkeypatch.setattr(tools, "_is_administrator", lambda: False)
    row = tools.check_counters(_gpu(), deep=False)
    assert row.status == "warning" and "ERR_NVGPUCTRPERM" in row.found
    assert "NVreg_RestrictProfilingToAdminUsers=0" in row.fix
    monkeypatch.setattr(tools, "_is_administrator", lambda: True)
    assert tools.check_counters(_gpu(), deep=False).status == "ok"
    monkeypatch.setattr(tools, "counters_restricted", lambda: False)
    assert tools.check_counters(_gpu(), deep=False).status == "ok"


def test_versions_against_the_driver(monkeypatch):
    monkeypatch.setattr(gpu, "cupy_packages", lambda: {"cupy-cuda13x": "13.6.0"})
    row = gpu.check_cupy(_gpu(cuda=(12, 8)))
    assert row.status == "error" and "built for CUDA 13" in row.found and "12.8" in row.found
    monkeypatch.setattr(gpu, "cupy_packages", lambda: {"cupy-cuda12x": "13.6.0",
                                                       "cupy-cuda13x": "13.6.0"})
    assert gpu.check_cupy(_gpu()).status == "error"
    row = gpu.check_nvrtc(_gpu(cuda=(12, 8)), {"nvrtc": "13.0"})
    assert row.status == "error" and "newer than the driver" in row.found
    row = gpu.check_nvrtc(_gpu(cuda=(13, 0)), {"nvrtc": "13.2"})
    assert row.status == "ok" and "machine code runs" in row.found and "sm_90" in row.found


def test_mig_and_slowed_clocks_are_warnings():
    assert gpu.check_mig(_gpu(mig=True)).status == "warning"
    assert gpu.check_mig(_gpu()).status == "ok"
    row = gpu.check_clocks(_gpu(slowdowns=["hardware thermal slowdown"]))
    assert row.status == "warning" and "thermal" in row.found
    assert gpu.check_clocks(_gpu()).status == "ok"


# -- on a GPU machine -------------------------------------------------------------------------

@pytest.mark.gpu
def test_the_gpu_rows_are_answered():
    result = wb.doctor()
    row = result["GPU and driver"]
    assert row.status == "ok" and "driver" in row.found and "CUDA" in row.found
    assert result["CuPy"].status == "ok" and "sees the GPU" in result["CuPy"].found
    major, minor = wb.compute_capability()
    assert result["NVRTC"].status == "ok" and f"compiles for sm_{major}{minor}" in result["NVRTC"].found
    for name in ("MIG", "clocks", "CUPTI", "performance counters", "C module: launcher"):
        assert result[name].status in ("ok", "warning"), result[name]
    assert "not needed here" not in result["C module: launcher"].found


@pytest.mark.gpu
def test_the_counter_check_agrees_with_ncu():
    if profilers.find("ncu") is None:
        pytest.skip("Nsight Compute (ncu) is not installed")
    said = wb.doctor()["performance counters"]
    kernel = tools.tiny_kernel()
    x, y = wb.to_device(np.ones(256, np.float32)), wb.to_device(np.ones(256, np.float32))
    try:
        wb.profile(kernel, np.float32(2.0), x, y, np.int32(256), grid=1, block=256)
        readable = True
    except wb.ProfilerUnavailable as exc:
        assert "ERR_NVGPUCTRPERM" in str(exc), exc
        readable = False
    assert said.status == ("ok" if readable else "warning"), said
    deep = wb.doctor(deep=True)
    assert deep["performance counters"].status == said.status
    assert deep["compile and run"].status == "ok"
    assert deep["C module: launcher"].found.startswith("built")


def test_every_c_module_row_names_a_source_that_exists():
    from workbench.checkup import host
    for label, source, *_ in host.C_MODULES:
        assert source.is_file(), f"the doctor's '{label}' row reads {source}, which is not there"
