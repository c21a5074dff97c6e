"""What a profiling run leaves behind: nothing but the report file asked
for (the child's spec and the copies of the user's arrays and variables are
removed, also when a run fails), and a child environment that leaves CUPTI
to the profiler. ncu is a stand-in script here (the tool, not CUDA, is what
is replaced); the child runs on the simulator."""
import os
import sys
import tempfile

import numpy as np
import pytest

import workbench as wb
from workbench.profiling import ncu, tools

from test_profiling import COPY, SAMPLE, _fake_ncu  # noqa: F401 (the stand-in ncu and its sample)


@pytest.fixture
def simulator_profiled(monkeypatch, tmp_path, simulator):
    """The simulator standing in for the GPU a profiler needs, a stand-in
    ncu, and a private temporary folder to see what is left there."""
    monkeypatch.setattr(tools, "require_gpu_backend", lambda what: simulator)
    monkeypatch.setattr(simulator, "simulated", False)  # (else wb.profile counts on the simulator itself)
    _fake_ncu(tmp_path, monkeypatch)
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


def _left(temp):
    """The profilers' folders left in the temporary folder (the simulator's worker logs aside)."""
    return [n for n in os.listdir(temp) if n.startswith("workbench-")]


def test_the_child_times_launches_with_events_not_cupti():
    assert ncu.child_environment("cupy")["WORKBENCH_TIMING"] == "events"
    assert ncu.child_environment()["WORKBENCH_PROFILING_CHILD"] == "1"


def test_a_profiled_cell_leaves_no_files(simulator_profiled):
    x = wb.to_device(np.arange(64, dtype=np.float32))
    user_ns = {"x": x, "copy_kernel": wb.compile(COPY)["copy_kernel"]}
    report = wb.profiling.profile_code("y = wb.allocate(64)\ncopy_kernel(x, y, 64, n=64)", user_ns)
    assert len(report) >= 1 and report.path is None
    assert _left(simulator_profiled) == []


def test_a_launch_keeps_only_the_report_asked_for(simulator_profiled, tmp_path):
    kernel = wb.compile(COPY)["copy_kernel"]
    x, y = wb.to_device(np.ones(64, np.float32)), wb.allocate(64)
    report = wb.profile(kernel, x, y, 64, n=64, report_dir=tmp_path / "reports")
    assert report.path is not None and os.path.dirname(report.path) == str(tmp_path / "reports")
    assert report.path.endswith(".ncu-rep") and os.path.isfile(report.path)
    assert _left(simulator_profiled) == []


def test_a_failed_spec_leaves_no_files(simulator_profiled):
    kernel = wb.compile(COPY)["copy_kernel"]
    with pytest.raises(wb.WorkbenchError):
        wb.profile(kernel, np.ones(4, np.float32), n=4)  # too few arguments
    with pytest.raises(wb.ProfileFailed, match="cannot re-create model"):
        wb.profiling.profile_code("model.run()", {"model": object()})  # a variable that cannot be sent
    assert _left(simulator_profiled) == []


def test_a_failing_program_leaves_no_files(simulator_profiled):
    with pytest.raises(wb.ProfileFailed):
        ncu.profile_command([sys.executable, "-c", "raise SystemExit(3)"], what="a program")
    assert _left(simulator_profiled) == []


def test_the_magics_drop_only_the_profilers_progress_lines(capsys):
    pytest.importorskip("IPython")
    from workbench.ipython.profile_magic import _print_output
    output = "\n".join([
        "==PROF== Connected to process 4242", "Collecting data...",
        "Generating '/tmp/nsys-report-1a2b.qdstrm'", "[1/1] [========================100%] trace.nsys-rep",
        "Generated:", "    /tmp/workbench-nsys-x/trace.nsys-rep",
        "Processing the batch", "Generating tables for 3 runs", "Collecting data from the GPU: 12 MB",
        "==PROF== Disconnected from process 4242"])
    _print_output(output)
    assert capsys.readouterr().out.splitlines() == [
        "Processing the batch", "Generating tables for 3 runs", "Collecting data from the GPU: 12 MB"]


def test_retries_for_unknown_metrics_share_one_timeout(tmp_path, monkeypatch):
    fake = tmp_path / "ncu"  # every run: 0.4 s, then an unknown metric (the first one asked for)
    fake.write_text(f"#!{sys.executable}\nimport sys, time\nargs = sys.argv[1:]\ntime.sleep(0.4)\n"
                    "print('==ERROR== Failed to find metric ' + args[args.index('--metrics') + 1]"
                    ".split(',')[0])\nsys.exit(1)\n")
    fake.chmod(0o755)
    monkeypatch.setenv("WORKBENCH_NCU", str(fake))
    with pytest.raises(wb.ProfileFailed, match="took longer than 1 s"):
        ncu.profile_command(["true"], what="true", timeout=1,
                            metrics=["a.sum", "b.sum", "c.sum", "d.sum", "gpu__time_duration.sum"])
