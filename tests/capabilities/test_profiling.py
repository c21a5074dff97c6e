"""Profiling with Nsight Compute / Nsight Systems, and NVTX ranges.

Without a GPU (CI): the one-line messages where a profiler cannot run, the
reading of ncu's CSV export (a stored sample) and of an nsys SQLite export,
the limiter and the roofline point, the child process that re-creates a
launch or a cell (run on the simulator), and the NVTX hook that leaves the
launch path alone when no profiler is attached. With a GPU and ncu
(``gpu`` marker): ncu on a copy kernel, an FMA-bound kernel, a cell and a
program built with nvcc.
"""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import workbench as wb  # noqa: E402
from workbench.benchmarking.ceilings import Ceilings  # noqa: E402
from workbench.benchmarking import plots  # noqa: E402
from workbench.benchmarking.timeline import Timeline  # noqa: E402
from workbench.profiling import ncu, nsys, ship, tools  # noqa: E402
from workbench.profiling.report import KernelProfile, NcuReport, number, read_csv, short_name  # noqa: E402
from workbench.runtime import nvtx  # noqa: E402
from workbench.runtime.session import session  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# Nsight Compute's raw-page CSV (ncu --import r.ncu-rep --csv --page raw --print-units base) of
# a copy kernel and an FMA kernel, as ncu wrote it on an H100.
SAMPLE = ROOT / "tests" / "data" / "ncu_raw_sample.csv"

COPY = r"""
extern "C" __global__ void copy_kernel(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""

FMA = r"""
extern "C" __global__ void fma_kernel(float* out, int iterations, float a, float b)
{
    float x0 = threadIdx.x * 1e-7f, x1 = x0 + 0.1f, x2 = x0 + 0.2f, x3 = x0 + 0.3f;
    #pragma unroll 4
    for (int i = 0; i < iterations; ++i) {
        x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = (x0 + x1) + (x2 + x3);
}
"""


def _one_line(exc) -> str:
    text = str(exc)
    assert "\n" not in text, text
    return text


# -- where a profiler cannot run: one line that says what to do ------------------------------

def test_a_missing_ncu_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_NCU", str(tmp_path / "no-ncu"))
    assert tools.find("ncu") is None
    with pytest.raises(wb.ProfilerUnavailable) as info:
        wb.profiling.profile_executable(sys.executable, ["-c", "pass"])
    text = _one_line(info.value)
    assert "Nsight Compute (ncu) is not available" in text and "install Nsight Compute" in text
    assert "WORKBENCH_NCU" in text


def test_a_missing_nsys_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_NSYS", str(tmp_path / "no-nsys"))
    with pytest.raises(wb.ProfilerUnavailable) as info:
        wb.profiling.trace_executable(sys.executable, ["-c", "pass"])
    text = _one_line(info.value)
    assert "Nsight Systems (nsys) is not available" in text and "install Nsight Systems" in text


def test_the_simulator_counts_instead_of_tracing(simulator, shell):
    # wb.profile counts the launch (tests/test_simulator_profile.py); a timeline needs a GPU
    module = wb.compile(COPY)
    x, y = wb.to_device(np.ones(64, np.float32)), wb.allocate(64)
    report = wb.profile(module["copy_kernel"], x, y, 64, n=64)
    assert report.simulated and report[0].duration is None
    assert report[0].metrics["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 8
    shell.user_ns.update(copy_kernel=module["copy_kernel"], x=x, y=y)
    result = shell.run_cell("%%nsys\ncopy_kernel(x, y, 64, n=64)")
    assert isinstance(result.error_in_exec, wb.ProfilerUnavailable)
    assert "simulator" in _one_line(result.error_in_exec)


def test_restricted_counters_say_how_to_allow_them(tmp_path, monkeypatch):
    # a stand-in ncu that answers as Nsight Compute does on a machine that keeps the
    # counters to administrators (the profiler is the tool under test, not CUDA)
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\necho '==PROF== Connected to process 1'\n"
                    "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to "
                    "access NVIDIA GPU Performance Counters on the target device 0.'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("WORKBENCH_NCU", str(fake))
    with pytest.raises(wb.ProfilerUnavailable) as info:
        ncu.profile_command([sys.executable, "-c", "pass"], what="a test", folder=str(tmp_path))
    text = _one_line(info.value)
    assert "ERR_NVGPUCTRPERM" in text and "NVreg_RestrictProfilingToAdminUsers=0" in text


def test_a_failing_program_raises_with_its_output(tmp_path, monkeypatch):
    fake = tmp_path / "ncu"  # ncu passes the program's failure on: output, then its exit code
    fake.write_text("#!/bin/sh\necho 'vector add: cudaMalloc failed'\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("WORKBENCH_NCU", str(fake))
    with pytest.raises(wb.ProfileFailed, match=r"exit code 3(.|\n)*cudaMalloc failed"):
        ncu.profile_command(["./prog"], what="prog", folder=str(tmp_path))


# -- reading Nsight Compute's CSV ---------------------------------------------------------------

def test_the_raw_csv_sample_reads_into_one_profile_per_launch():
    report = NcuReport.from_csv(SAMPLE.read_text(), target="sample")
    assert len(report) >= 1
    copy = report["copy_kernel"]
    assert copy.duration is not None and 1e-7 < copy.duration < 1.0  # seconds
    assert copy.memory_pct > 60 and copy.memory_pct > copy.compute_pct
    assert copy.limiter == "memory" and not copy.latency_bound
    assert isinstance(copy.dram_bytes, int) and copy.dram_bytes > 2**20
    assert copy.registers and copy.block[0] * copy.grid[0] >= 2**16
    assert 0 < copy.occupancy_pct <= 100
    assert copy.dram_gbps == pytest.approx(copy.dram_bytes / copy.duration / 1e9)


def test_the_sample_fma_kernel_is_compute_bound_with_its_flops():
    report = NcuReport.from_csv(SAMPLE.read_text(), target="sample")
    if "fma_kernel" not in {k.name for k in report}:
        pytest.skip("the stored sample holds the copy kernel only")
    fma = report["fma_kernel"]
    count = {op: fma.metrics.get(f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum", 0)
             for op in ("fadd", "fmul", "ffma", "dadd", "dmul", "dfma", "hadd", "hmul", "hfma")}
    assert count["ffma"] > 0
    assert fma.flops == sum(2 * n if op.endswith("fma") else n for op, n in count.items())
    assert fma.limiter == "compute" and fma.compute_pct > fma.memory_pct
    assert fma.intensity == pytest.approx(fma.flops / fma.dram_bytes)
    assert fma.gflops == pytest.approx(fma.flops / fma.duration / 1e9)


def test_the_details_page_long_form_reads_too_after_program_output():
    text = textwrap.dedent('''\
        vector add: OK
        ==PROF== Disconnected from process 7
        "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
        "0","7","prog","h","vadd","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","12.50"
        "0","7","prog","h","vadd","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes.sum","Mbyte","12.58"
        "0","7","prog","h","vadd","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","9.10"
        "0","7","prog","h","vadd","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","%","n/a"
        ''')
    (k,) = NcuReport.from_csv(text, target="prog").kernels
    assert k.name == "vadd" and k.block == (256, 1, 1) and k.grid == (4096, 1, 1)
    assert k.duration == pytest.approx(12.5e-6)
    assert k.dram_bytes == 12_580_000
    assert k.memory_pct is None and k.limiter is None  # "n/a": not measured, no guess
    assert k.flops is None and k.intensity is None


def test_numbers_in_base_units():
    assert number("1,048,576", "byte") == 1048576
    assert number("61,568", "nsecond") == pytest.approx(61.568e-6)
    assert number("2.5", "msecond") == pytest.approx(2.5e-3)
    assert number("n/a") is None and number("") is None
    assert read_csv("no csv here\n") == []


def test_the_limiter_is_the_saturated_unit_or_latency():
    assert KernelProfile(0, "k", memory_pct=85.0, compute_pct=20.0).limiter == "memory"
    assert KernelProfile(0, "k", memory_pct=10.0, compute_pct=92.0).limiter == "compute"
    slow = KernelProfile(0, "k", memory_pct=30.0, compute_pct=12.0)
    assert slow.limiter == "latency" and slow.latency_bound
    assert slow.bound() == "latency (memory 30%, compute 12% of peak)"
    assert KernelProfile(0, "k").limiter is None and KernelProfile(0, "k").bound() == "N/A"


def test_a_one_float_copy_on_an_h200_is_latency_bound_not_compute_bound():
    # ncu's figures for copy_kernel (1 << 24 floats) on an H200: the SM throughput (which counts
    # the load/store issue) above the memory throughput, both far from their peaks
    h200 = KernelProfile(0, "copy_kernel", compute_pct=49.79, memory_pct=44.72)
    assert h200.limiter == "latency" and h200.bound() == "latency (memory 45%, compute 50% of peak)"


def test_a_report_shows_itself_as_text_html_and_a_table():
    report = NcuReport.from_csv(SAMPLE.read_text(), target="sample", path="/tmp/r.ncu-rep")
    text = repr(report)
    assert text.startswith("<NcuReport of sample") and "copy_kernel" in text and "memory" in text
    page = report._repr_html_()
    assert "<table" in page and "copy_kernel" in page and "/tmp/r.ncu-rep" in page
    table = report.to_pandas()
    assert list(table["kernel"]) == [k.name for k in report]
    assert {"duration_us", "memory_pct", "compute_pct", "limiter", "occupancy_pct",
            "registers", "dram_bytes", "flops"} <= set(table.columns)


def test_a_profiled_kernel_is_a_point_on_the_roofline():
    k = KernelProfile(0, "saxpy", duration=1e-3, dram_bytes=10**9, flops=2 * 10**8,
                      memory_pct=90.0, compute_pct=5.0)
    report = NcuReport([k, KernelProfile(1, "noflops", duration=1e-3, dram_bytes=100)], target="t")
    (point,) = report.roofline_points()  # a kernel without FLOPs has no point
    assert point["intensity"] == pytest.approx(0.2) and point["gflops"] == pytest.approx(200.0)
    roof = Ceilings(device="test device", backend="test", simulated=False, copy_gbps=1000.0,
                    fma_gflops=4000.0)
    fig = report.plot_roofline(ceilings=roof)
    offsets = [c.get_offsets() for c in fig.axes[0].collections]
    np.testing.assert_allclose(offsets[-1], [[0.2, 200.0]])
    bench = wb.types.BenchResult(name="bench", times=[1e-3, 1e-3], bytes=1e6, flops=4e6)
    ax = plots.plot_roofline([bench, report], roof).axes[0]  # beside benchmark results
    assert len(ax.collections) == 2


def test_the_kernel_filter_matches_the_kernel_only():
    pattern = re.compile(ncu.kernel_filter("scale<float>").removeprefix("regex:"))
    for name in ("scale", "scale<float>", "ns::scale", "scale(float*, int)"):
        assert pattern.search(name), name
    for name in ("scale2", "upscale", "my_scale_kernel"):
        assert not pattern.search(name), name


def test_the_ncu_command_filters_and_exports(tmp_path):
    cmd = ncu.ncu_command("ncu", ["python", "-m", "x"], str(tmp_path / "r"), ["a.sum", "b.pct"],
                          kernel="regex:^k$", launch_skip=1, launch_count=1)
    assert cmd[:2] == ["ncu", "--target-processes"] and cmd[-3:] == ["python", "-m", "x"]
    assert cmd[cmd.index("--metrics") + 1] == "a.sum,b.pct"
    assert cmd[cmd.index("--launch-skip") + 1] == "1" and cmd[cmd.index("--launch-count") + 1] == "1"
    assert "--export" in cmd and "--force-overwrite" in cmd


# -- the plumbing from ncu's command line to the report, with a stand-in ncu --------------------

FAKE_NCU = """#!{python}
# A stand-in for ncu (the tool is what is replaced here, not CUDA): it runs the target as ncu
# would, writes a report file, and answers --import with the stored CSV sample.
import subprocess, sys
args = sys.argv[1:]
if "--import" in args:
    print(open({sample!r}).read())
    sys.exit(0)
with_value = {{"--target-processes", "--metrics", "--export", "--kernel-name", "--launch-skip",
              "--launch-count"}}
options, i = {{}}, 0
while args[i].startswith("--"):
    if args[i] in with_value:
        options[args[i]] = args[i + 1]
        i += 2
    else:
        i += 1
unknown = {unknown!r}
if unknown and unknown in options["--metrics"].split(","):
    print("==ERROR== Failed to find metric " + unknown)
    sys.exit(1)
print("==PROF== Connected to process 1")
sys.stdout.flush()
rc = subprocess.run(args[i:]).returncode
open(options["--export"] + ".ncu-rep", "w").write("report")
print("==PROF== Disconnected from process 1")
sys.exit(rc)
"""


def _fake_ncu(tmp_path, monkeypatch, unknown=""):
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, sample=str(SAMPLE), unknown=unknown))
    fake.chmod(0o755)
    monkeypatch.setenv("WORKBENCH_NCU", str(fake))


def test_a_launch_goes_through_ncu_into_a_report(simulator, tmp_path, monkeypatch):
    _fake_ncu(tmp_path, monkeypatch)
    kernel = wb.compile(COPY)["copy_kernel"]
    x, y = wb.to_device(np.ones(64, np.float32)), wb.allocate(64)
    folder = tmp_path / "run"
    folder.mkdir()
    name = ship.write_kernel_spec(folder, kernel, (x, y, 64), 1, 64, 0, None, 1)
    report = ncu.profile_command(ncu._child(str(folder)), what="copy_kernel",
                                 env=ncu.child_environment("simulator"),
                                 kernel=ncu.kernel_filter(name), launch_skip=1, launch_count=1,
                                 folder=str(folder))
    assert isinstance(report, NcuReport) and report["copy_kernel"].limiter == "memory"
    assert report.path == str(folder / "report.ncu-rep") and "==PROF== Connected" in report.output
    cmd = report.command
    assert cmd[cmd.index("--launch-skip") + 1] == "1" and cmd[cmd.index("--launch-count") + 1] == "1"
    assert "workbench.profiling.child" in cmd


def test_a_metric_this_ncu_lacks_is_left_out(tmp_path, monkeypatch):
    missing = "sm__maximum_warps_per_active_cycle_pct"
    _fake_ncu(tmp_path, monkeypatch, unknown=missing)
    report = ncu.profile_command([sys.executable, "-c", "print('ran')"], what="a program",
                                 folder=str(tmp_path))
    metrics = report.command[report.command.index("--metrics") + 1].split(",")
    assert missing not in metrics and "gpu__time_duration.sum" in metrics
    assert "ran" in report.output and len(report) >= 1


def test_a_program_that_launches_nothing_says_so(tmp_path, monkeypatch):
    fake = tmp_path / "ncu"  # ncu's answer for a program without kernels: no launch in the report
    fake.write_text(f"#!{sys.executable}\nimport sys\nargs = sys.argv[1:]\n"
                    "if '--import' in args: print('\"ID\",\"Kernel Name\"'); sys.exit(0)\n"
                    "open(args[args.index('--export') + 1] + '.ncu-rep', 'w').write('r')\n"
                    "print('==WARNING== No kernels were profiled.')\n")
    fake.chmod(0o755)
    monkeypatch.setenv("WORKBENCH_NCU", str(fake))
    with pytest.raises(wb.ProfileFailed, match="profiled no kernel launch(.|\n)*No kernels"):
        ncu.profile_command(["true"], what="true", folder=str(tmp_path))


# -- the profiling child re-creates a launch or a cell (run here on the simulator) --------------

def _run_child(folder, backend="simulator"):
    env = ncu.child_environment(backend)
    return subprocess.run([sys.executable, "-m", "workbench.profiling.child", str(folder)],
                          capture_output=True, text=True, env=env, timeout=300)


def test_the_child_re_creates_a_launch(simulator, tmp_path):
    kernel = wb.compile(COPY)["copy_kernel"]
    x = wb.to_device(np.arange(100, dtype=np.float32))
    y = wb.allocate(100)
    name = ship.write_kernel_spec(tmp_path, kernel, (x, y, np.int32(100)), None, None, 0, 100, 1)
    assert name == "copy_kernel"
    spec = json.loads((tmp_path / ship.SPEC).read_text())
    assert spec["kernel"] == "copy_kernel" and spec["warmup"] == 1 and spec["block"][0] >= 1
    assert [a["kind"] for a in spec["args"]] == ["device", "device", "scalar"]
    assert spec["args"][2] == {"kind": "scalar", "value": 100, "dtype": "<i4"}
    with np.load(tmp_path / ship.ARRAYS) as arrays:
        np.testing.assert_array_equal(arrays["a0"], np.arange(100, dtype=np.float32))
    result = _run_child(tmp_path)
    assert result.returncode == 0, result.stderr


def test_wrong_arguments_fail_before_any_process_starts(simulator, tmp_path):
    kernel = wb.compile(COPY)["copy_kernel"]
    with pytest.raises(wb.KernelArgumentError):
        ship.write_kernel_spec(tmp_path, kernel, (np.ones(4, np.float32),), 1, 1, 0, None, 1)
    assert not (tmp_path / ship.SPEC).exists()


def test_the_child_runs_a_cell_with_the_session_kernels_and_variables(simulator, tmp_path):
    module = wb.compile(COPY)
    x = wb.to_device(np.arange(32, dtype=np.float32))
    user_ns = {"x": x, "n": 32, "scale": 2.0, "np": np, "unused": object(),
               "copy_kernel": module["copy_kernel"], "again": module["copy_kernel"], "mod": module}
    code = ("y = wb.allocate(n)\ncopy_kernel(x, y, n, n=n)\n"
            "print('sum', float(wb.to_host(y).sum() * scale))\n"
            "again(y, y, n, n=n)\nmod['copy_kernel'](y, y, n, n=n)\n")
    ship.write_code_spec(tmp_path, code, user_ns, simulator)
    spec = json.loads((tmp_path / ship.SPEC).read_text())
    assert len(spec["modules"]) == 1 and spec["modules"][0]["source"] == COPY
    assert spec["bound"] == {"copy_kernel": [module.name, "kernel", "copy_kernel"],
                             "again": [module.name, "kernel", "copy_kernel"],
                             "mod": [module.name, "module", module.name]}
    result = _run_child(tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"sum {2.0 * np.arange(32).sum():.1f}" in result.stdout


def test_a_cell_reading_an_object_that_cannot_be_sent_says_so(simulator, tmp_path):
    class Model:
        pass
    with pytest.raises(wb.ProfileFailed, match=r"model \(Model\).*define it inside the cell"):
        ship.write_code_spec(tmp_path, "model.run()", {"model": Model()}, simulator)
    # defined in the cell itself: nothing to send
    ship.write_code_spec(tmp_path, "model = 3\nprint(model)", {"model": Model()}, simulator)


# -- Nsight Systems' SQLite export -------------------------------------------------------------

def test_nsys_sqlite_export_reads_into_kernel_intervals_and_nvtx_ranges(tmp_path):
    path = tmp_path / "trace.sqlite"
    db = sqlite3.connect(path)  # the tables and columns nsys export --type=sqlite writes
    db.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, streamId INT,
            gridX INT, gridY INT, gridZ INT, blockX INT, blockY INT, blockZ INT,
            shortName INT, demangledName INT, mangledName INT);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, textId INT);
        INSERT INTO StringIds VALUES (1, 'copy_kernel'), (2, 'cell 3');
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1500, 4500, 0, 7, 64, 1, 1, 256, 1, 1, 1, 1, 1);
        INSERT INTO NVTX_EVENTS VALUES (1000, 5000, 59, NULL, 2), (1400, 4600, 59, 'copy_kernel', NULL),
                                       (900, NULL, 34, 'a mark', NULL);
    """)
    db.commit()
    db.close()
    found, geometry = nsys.read_sqlite(str(path))
    assert [(i.kind, i.name, round(i.start * 1e6), round(i.ms * 1e6)) for i in found] == [
        ("nvtx", "cell 3", 0, 4000), ("nvtx", "copy_kernel", 400, 3200),
        ("kernel", "copy_kernel", 500, 3000)]
    assert found[2].stream == "7" and geometry[2] == ((64, 1, 1), (256, 1, 1))
    assert found[0].lane == "NVTX" and found[2].lane == "GPU 0 stream 7"
    report = nsys.NsysReport(found, geometry, target="t", path="/tmp/t.nsys-rep")
    assert len(report.kernels) == 1 and "copy_kernel" in repr(report)
    assert "<table" in report._repr_html_()
    assert list(report.to_pandas()["duration_us"]) == pytest.approx([4.0, 3.2, 3.0])
    assert report.to_pandas()["grid"][2] == (64, 1, 1)
    # the project's timeline draws the kernels: one lane per stream
    assert isinstance(report.timeline, Timeline) and report.timeline.lanes == ["GPU 0 stream 7"]
    assert report.plot().axes[0].get_yticklabels()[0].get_text() == "GPU 0 stream 7"


# -- NVTX: nothing on the launch path unless a profiler is attached -----------------------------

def test_no_profiler_leaves_the_launch_path_alone(simulator, monkeypatch):
    for var in ("NVTX_INJECTION64_PATH", "NVTX_INJECTION32_PATH", "WORKBENCH_PROFILING_CHILD",
                "WORKBENCH_NVTX"):
        monkeypatch.delenv(var, raising=False)
    log = session().timing_log
    assert not nvtx.enable_if_profiled(log)
    assert "timed_launch" not in vars(log)  # the class's own method, no wrapper
    assert not nvtx.enabled()
    nvtx.push("cell 1")  # ranges off: nothing happens
    nvtx.pop()


def test_ranges_around_launches_can_be_switched_on_and_off(simulator):
    pytest.importorskip("nvtx")
    log = session().timing_log
    kernel = wb.compile(COPY)["copy_kernel"]
    x, y = wb.to_device(np.arange(16, dtype=np.float32)), wb.allocate(16)
    try:
        assert nvtx.enable(log)
        assert "timed_launch" in vars(log)
        kernel(x, y, 16, n=16)  # still launches and logs
        np.testing.assert_array_equal(wb.to_host(y), np.arange(16, dtype=np.float32))
        assert wb.timings(kernel)["kernel"].iloc[-1] == "copy_kernel"
    finally:
        nvtx.disable()
    assert "timed_launch" not in vars(log) and not nvtx.enabled()


def test_an_injected_tool_turns_the_ranges_on_in_a_new_process():
    pytest.importorskip("nvtx")
    code = ("import workbench.runtime.session as s, workbench.runtime.nvtx as n; s.backend(); "
            "print(n.enabled(), 'timed_launch' in vars(s.session().timing_log))")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "WORKBENCH_BACKEND": "simulator", "PYTHONPATH": path,
           "NVTX_INJECTION64_PATH": "/nonexistent/libinjection.so"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.stdout.split() == ["True", "True"], out.stderr


# -- on the GPU, with Nsight Compute ------------------------------------------------------------

needs_ncu = pytest.mark.skipif(tools.find("ncu") is None, reason="Nsight Compute (ncu) is not installed")


WIDE_COPY = r"""
extern "C" __global__ void copy4(const float4* __restrict__ x, float4* __restrict__ y, int n4)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x)
        y[i] = x[i];
}
"""


@pytest.mark.gpu
@needs_ncu
def test_ncu_puts_a_wide_copy_near_the_memory_ceiling(gpu):
    n = 1 << 26  # 256 MiB each way, in 16-byte loads and stores
    kernel = wb.compile(WIDE_COPY)["copy4"]
    x = wb.to_device(np.random.default_rng(0).random(n, dtype=np.float32))
    y = wb.allocate(n)
    blocks = 8 * gpu.device_properties().multiprocessors
    (k,) = wb.profile(kernel, x, y, np.int32(n // 4), grid=blocks, block=256).kernels
    assert k.limiter == "memory" and k.memory_pct > 3 * k.compute_pct
    assert k.memory_pct > 75, f"a wide copy reached {k.memory_pct}% of peak memory throughput"


@pytest.mark.gpu
@needs_ncu
def test_ncu_never_calls_a_one_float_copy_compute_bound(gpu):
    # One float per thread keeps too few bytes in flight to saturate DRAM on a GPU as fast as an
    # H200 (~45% of peak there, ~60% on an H100, at any size): memory or latency, never compute.
    n = 1 << 26  # 256 MiB each way: long enough that launch and tail are nothing
    kernel = wb.compile(COPY)["copy_kernel"]
    x = wb.to_device(np.random.default_rng(0).random(n, dtype=np.float32))
    y = wb.allocate(n)
    report = wb.profile(kernel, x, y, np.int32(n), grid=n // 256, block=256)
    (k,) = report.kernels
    assert short_name(k.name) == "copy_kernel" and k.block == (256, 1, 1) and k.grid == (n // 256, 1, 1)
    assert k.limiter in ("memory", "latency"), (k.memory_pct, k.compute_pct)
    if k.limiter == "latency":
        assert max(k.memory_pct, k.compute_pct) < 60 and k.bound().startswith("latency (memory ")
    else:
        assert k.memory_pct >= 60 and k.memory_pct >= k.compute_pct
    # x is read from DRAM (ncu flushes the caches first); part of y may stay in the L2 cache
    assert 0.9 * 4 * n <= k.dram_bytes <= 1.1 * 2 * 4 * n
    assert k.dram_gbps == pytest.approx(k.dram_bytes / k.duration / 1e9)
    assert k.registers and 0 < k.occupancy_pct <= 100 and k.duration > 0 and not k.flops


@pytest.mark.gpu
@needs_ncu
def test_ncu_finds_an_fma_loop_compute_bound(gpu):
    blocks, threads, iterations = 4 * gpu.device_properties().multiprocessors, 256, 4096
    kernel = wb.compile(FMA)["fma_kernel"]
    out = wb.allocate(blocks * threads)
    report = wb.profile(kernel, out, np.int32(iterations), np.float32(0.999), np.float32(1e-3),
                        grid=blocks, block=threads)
    (k,) = report.kernels
    assert k.compute_pct > k.memory_pct and k.limiter == "compute"
    expected = 2 * 4 * iterations * blocks * threads  # 4 chains, an FMA is 2 FLOPs
    assert k.flops == pytest.approx(expected, rel=0.01)
    assert k.gflops == pytest.approx(k.flops / k.duration / 1e9)
    if k.dram_bytes:  # its few output bytes may never leave the L2 cache
        (point,) = report.roofline_points()
        assert point["intensity"] == pytest.approx(k.flops / k.dram_bytes)


@pytest.mark.gpu
@needs_ncu
def test_ncu_cell_profiles_the_kernels_a_cell_launches(gpu, shell):
    shell.run_cell_magic("cuda", "-q", COPY)
    shell.user_ns["x"] = wb.to_device(np.ones(1 << 20, np.float32))
    result = shell.run_cell("%%ncu --kernel copy_kernel\n"
                            "y = wb.allocate(x.size)\n"
                            "for _ in range(3):\n    copy_kernel(x, y, x.size, n=x.size)\n"
                            "print('host sum', float(wb.to_host(y).sum()))\n")
    assert result.error_in_exec is None, result.error_in_exec
    report = result.result
    assert isinstance(report, NcuReport) and len(report) == 3
    assert all(short_name(k.name) == "copy_kernel" for k in report)
    assert "host sum 1048576.0" in report.output


@pytest.mark.gpu
@needs_ncu
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_ncu_profiles_a_program_built_with_nvcc(gpu, tmp_path):
    source = tmp_path / "vadd.cu"
    source.write_text(textwrap.dedent("""\
        #include <cstdio>
        #include <cstdlib>
        __global__ void vadd(const float* a, const float* b, float* c, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) c[i] = a[i] + b[i];
        }
        int main(int argc, char** argv) {
            int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
            float *a, *b, *c;
            cudaMalloc(&a, n * sizeof(float)); cudaMalloc(&b, n * sizeof(float));
            cudaMalloc(&c, n * sizeof(float));
            vadd<<<(n + 255) / 256, 256>>>(a, b, c, n);
            cudaError_t err = cudaDeviceSynchronize();
            printf("vadd n=%d: %s\\n", n, cudaGetErrorString(err));
            return err == cudaSuccess ? 0 : 1;
        }
        """))
    major, minor = gpu.device_properties().compute_capability
    exe = tmp_path / "vadd"
    build = subprocess.run(["nvcc", f"-arch=sm_{major}{minor}", "-o", str(exe), str(source)],
                           capture_output=True, text=True, timeout=180)
    assert build.returncode == 0, build.stderr
    n = 1 << 24
    report = wb.profiling.profile_executable(exe, [str(n)])
    (k,) = report.kernels
    assert short_name(k.name) == "vadd" and k.grid == (n // 256, 1, 1)
    assert 0.9 * 2 * 4 * n <= k.dram_bytes <= 1.1 * 3 * 4 * n  # a, b read; c written
    assert k.flops == n and k.intensity < 1 / 7  # one FADD per 8 to 12 bytes: memory's side
    assert k.limiter is not None  # measured; which unit varies by GPU (the copy tests check it)
    assert f"vadd n={n}: no error" in report.output
