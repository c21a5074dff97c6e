"""``wb.sanitize`` and ``%%cuda --sanitize`` on the simulator: what a finding
says (the cell's lines and their source, threads, block, the array and
element), the report's text, HTML and table, the written state of
``wb.allocate``'s arrays, schedules, and compute-sanitizer's report read back
(stored text: the GPU itself runs in ``test_sanitizer_cases.py``)."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.backends.initialisation import FILL_BYTE, InitTracker, _set_bits
from workbench.profiling.sanitizer import gpu as sanitizer_gpu

SOURCE = r"""
extern "C" __global__ void mirror(const float* x, float* out) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * 256 + t];
    out[blockIdx.x * 256 + t] = s[255 - t];
}
extern "C" __global__ void mirror_synced(const float* x, float* out) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * 256 + t];
    __syncthreads();
    out[blockIdx.x * 256 + t] = s[255 - t];
}
extern "C" __global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
extern "C" __global__ void past_end(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) y[i] = 1.0f;
}
extern "C" __global__ void last_wins(const float* x, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i / 64] = x[i];
}
extern "C" __global__ void bad_mask(float* out) {
    int t = threadIdx.x;
    if (t <= 16) { __syncwarp(0xffffu); out[t] = 1.0f; }
}
"""


def line_of(text: str) -> int:
    """The module line of ``text`` in SOURCE (its cell line is one more)."""
    return next(i for i, line in enumerate(SOURCE.splitlines(), 1) if text in line)


SCALE_LINE = line_of("y[i] = 2.0f * x[i]")
PAST_END_LINE = line_of("if (i <= n) y[i] = 1.0f;")
MASK_LINE = line_of("__syncwarp(0xffffu)")


@pytest.fixture
def module(simulator):
    return wb.compile(SOURCE, name="sanitizer_tests", line_offset=1)


def _random(n, seed=0):
    return wb.to_device(np.random.default_rng(seed).random(n, dtype=np.float32))


def test_racecheck_finding_names_lines_source_threads_and_element(module):
    x, out = _random(1024), wb.xp.zeros(1024, dtype=np.float32)
    report = wb.sanitize(module["mirror"], x, out, grid=4, block=256, tool="racecheck")
    assert report.verdict == "error" and report.where == "simulator" and report.launches == 1
    assert report.errors == sum(f.count for f in report.findings) and report.warnings == 0
    f = report.findings[0]
    assert f.tool == "racecheck" and f.kind in ("RAW", "WAR") and f.severity == "error"
    assert f.lines == (6, 7)  # the cell's lines: the %%cuda line is line 1
    assert {f.source.strip(), f.other_source.strip()} == {
        "s[t] = x[blockIdx.x * 256 + t];", "out[blockIdx.x * 256 + t] = s[255 - t];"}
    assert f.space == "shared" and f.where.startswith("s[")
    assert f.thread != f.other_thread and f.thread[0] // 32 != f.other_thread[0] // 32
    assert f.block in {(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)}
    text = repr(report)
    assert "Race reported between" in text and "line 6: s[t] = x[blockIdx.x * 256 + t];" in text
    assert "hazards]" in text
    html = report._repr_html_()
    assert "Race reported between" in html and "s[255 - t]" in html
    table = report.to_pandas()
    assert list(table["line"]) == [f.line for f in report.findings]
    assert set(table.columns) >= {"tool", "severity", "kind", "count", "line", "other_line",
                                  "thread", "block", "where", "source"}


def test_a_barrier_makes_it_clean_and_the_callers_arrays_stay(module):
    x, out = _random(1024), wb.xp.zeros(1024, dtype=np.float32)
    before = wb.to_host(out)
    report = wb.sanitize(module["mirror_synced"], x, out, grid=4, block=256, tool="racecheck")
    assert report.clean and report.verdict == "clean" and report.errors == report.warnings == 0
    assert "no findings" in repr(report)
    np.testing.assert_array_equal(wb.to_host(out), before)  # checked on copies


def test_initcheck_follows_what_wrote_the_array(module):
    scale = module["scale"]
    n = 1024

    def check(x):
        return wb.sanitize(scale, x, wb.xp.zeros(n, dtype=np.float32), n, grid=4, block=256,
                           tool="initcheck")

    fresh = wb.allocate(n, np.float32)
    assert np.all(wb.to_host(fresh).view(np.uint8) == FILL_BYTE)
    found = check(fresh)
    assert found.verdict == "error" and found.errors == n
    assert found.findings[0].kind == "uninitialized read"
    assert found.findings[0].line == SCALE_LINE + 1
    assert found.findings[0].where == "x[0]"
    half = wb.allocate(n, np.float32)
    wb.memset(half[: n // 2], 0)  # the second half still never written
    assert check(half).errors == n // 2
    copied = wb.allocate(n, np.float32)
    wb.copy(copied, np.ones(n, np.float32))
    assert check(copied).clean
    assigned = wb.allocate(n, np.float32)
    assigned[3] = 1.0  # NumPy writes one element: the whole array counts as written
    assert check(assigned).clean
    assert wb.backend().uninitialised(assigned) is None


def test_initcheck_keeps_what_a_watched_kernel_wrote(module):
    n = 1024
    y = wb.allocate(n, np.float32)
    b = wb.backend()
    with b.sanitize_launches("initcheck") as found:
        module["scale"](_random(n), y, n // 2, grid=4, block=256)  # writes the first half
    assert not found[0].findings
    unwritten = b.uninitialised(y)
    assert unwritten is not None and not unwritten[: n * 2].any() and unwritten[n * 2:].all()


def test_init_tracker_bits_match_numpy():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 70))
        lo, hi = sorted(int(v) for v in rng.integers(0, n + 1, 2))
        bits = np.zeros((n + 7) // 8, np.uint8)
        _set_bits(bits, lo, hi)
        expected = np.zeros(n, bool)
        expected[lo:hi] = True
        np.testing.assert_array_equal(
            np.unpackbits(bits, count=n, bitorder="little").astype(bool), expected)
    t = InitTracker()
    t.allocated(1000, 10)
    t.written(1002, 1005)
    np.testing.assert_array_equal(t.mask(1000, 1010), [1, 1, 0, 0, 0, 1, 1, 1, 1, 1])
    t.written(990, 1100)
    assert t.mask(1000, 1010) is None and len(t) == 0


def test_memcheck_names_the_array_an_access_runs_past(module):
    y = wb.xp.zeros(1000, dtype=np.float32)
    report = wb.sanitize(module["past_end"], y, 1000, grid=4, block=256)  # memcheck: the default
    assert report.tool == "memcheck" and report.verdict == "error"
    f = report.findings[0]
    assert f.kind == "out of bounds" and f.access == "write" and f.line == PAST_END_LINE + 1
    assert f.where == "y[1000], past the end of y (1000 elements)"
    assert f.thread == (232, 0, 0) and f.block == (3, 0, 0)
    assert f"Invalid __global__ write of size 4 bytes at line {PAST_END_LINE + 1}" in repr(report)


def test_synccheck_names_the_lanes_mask(module):
    report = wb.sanitize(module["bad_mask"], wb.xp.zeros(32, dtype=np.float32), grid=1, block=32,
                         tool="synccheck")
    f = report.findings[0]
    assert (f.kind, f.severity, f.count, f.line, f.access) == (
        "invalid arguments", "error", 1, MASK_LINE + 1, "__syncwarp")
    assert f.thread == (16, 0, 0) and "0x0000ffff" in f.detail and "lane 16" in f.detail
    assert "Barrier error detected. Invalid arguments" in repr(report)


def test_schedules_name_the_elements_that_differ(module):
    x, out = _random(1024, seed=5), wb.xp.zeros(16, dtype=np.float32)
    report = wb.sanitize(module["last_wins"], x, out, grid=4, block=256, tool=None, schedules=3,
                         seed=11)
    assert report.schedules == 3 and report.verdict == "error"
    f = report.findings[0]
    assert f.tool == "schedules" and f.kind == "results differ" and f.where.startswith("out[")
    assert 1 <= f.count <= 16 and "in the default order" in f.detail and "seed 1" in f.detail
    clean = wb.sanitize(module["scale"], x, wb.xp.zeros(1024, dtype=np.float32), 1024, grid=4,
                        block=256, tool="racecheck", schedules=2)
    assert clean.clean and clean.launches == 1 and clean.schedules == 2


def test_the_same_seed_gives_the_same_order(module):
    b = wb.backend()
    x = _random(1024, seed=9)
    results = []
    for seed in (7, 7, 8):
        out = wb.xp.zeros(16, dtype=np.float32)
        with b.explore_schedules(seed):
            module["last_wins"](x, out, grid=4, block=256)
        results.append(wb.to_host(out))
    np.testing.assert_array_equal(results[0], results[1])


def test_mistakes_are_clear(module):
    with pytest.raises(wb.KernelArgumentError, match="tool must be one of"):
        wb.sanitize(module["scale"], tool="asan")
    with pytest.raises(wb.KernelArgumentError, match="CUDA C\\+\\+ kernel"):
        wb.sanitize(print, tool="racecheck")
    with pytest.raises(wb.KernelArgumentError, match="give a tool, or schedules"):
        wb.sanitize(module["scale"], tool=None)
    with pytest.raises(wb.KernelArgumentError, match="takes 3 arguments"):
        wb.sanitize(module["scale"], grid=1, block=1, tool="racecheck")


def test_a_launch_hook_takes_the_slow_path_and_gives_it_back(module):
    k = module["scale"]
    calls = []
    k.set_launch_hook(lambda kernel, args, options, launch: (calls.append(options), launch()))
    y = wb.xp.zeros(8, dtype=np.float32)
    k(_random(8), y, 8, grid=1, block=32)
    assert calls and calls[0]["grid"] == 1 and wb.to_host(y).any()
    k.set_launch_hook(None)
    k(_random(8), y, 8, grid=1, block=32)
    assert len(calls) == 1


def test_cuda_magic_sanitize_shows_each_cells_report(shell, simulator, capsys):
    result = shell.run_cell("%%cuda --sanitize racecheck -q\n" + SOURCE.lstrip("\n"))
    assert result.success, result.error_in_exec
    capsys.readouterr()
    shell.user_ns.update(x=_random(1024), out=wb.xp.zeros(1024, dtype=np.float32))
    result = shell.run_cell("mirror(x, out, grid=4, block=256)")
    assert result.success, result.error_in_exec
    shown = capsys.readouterr().out
    assert "racecheck (simulator) of mirror" in shown and "Race reported between" in shown
    assert "line 5: s[t] = x[blockIdx.x * 256 + t];" in shown  # the cell's own line numbers
    assert wb.to_host(shell.user_ns["out"]).any()  # the launch itself ran, in place
    shell.run_cell("y = 1 + 1")
    assert "racecheck" not in capsys.readouterr().out  # a cell with no launch shows nothing
    shell.run_cell("mirror_synced(x, out, grid=4, block=256)")
    assert "no findings (1 launch)" in capsys.readouterr().out


# -- compute-sanitizer's report, read back --------------------------------------------------
RACECHECK_OUTPUT = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at mirror(const float *, float *)+0x90 in /tmp/workbench-x/cell.cu:5
=========     and Read access at mirror(const float *, float *)+0xd0 in /tmp/workbench-x/cell.cu:6 [1024 hazards]
=========
========= Warning: Race reported between Write access at mirror(const float *, float *)+0x90 in cell.cu:5
=========     and Read access at mirror(const float *, float *)+0xd0 in cell.cu:6 [32 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""
MEMCHECK_OUTPUT = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at past_end(float *, int)+0x70 in cell.cu:{past_end}
=========     by thread (232,0,0) in block (3,0,0)
=========     Address 0x7f1234567890 is out of bounds
=========     and is 4 bytes after the nearest allocation at 0x7f1234566900 of size 4000 bytes
=========
========= Invalid __global__ write of size 4 bytes
=========     at past_end(float *, int)+0x70 in cell.cu:{past_end}
=========     by thread (233,0,0) in block (3,0,0)
=========     Address 0x7f1234567894 is out of bounds
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaDeviceSynchronize.
=========
========= ERROR SUMMARY: 3 errors
"""
INITCHECK_OUTPUT = """\
========= Uninitialized __global__ memory read of size 4 bytes
=========     at scale(const float *, float *, int)+0x80 in cell.cu:{scale}
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f0000000000
=========
========= Uninitialized __global__ memory read of size 4 bytes
=========     at scale(const float *, float *, int)+0x80 in cell.cu:{scale}
=========     by thread (1,0,0) in block (0,0,0)
=========     Address 0x7f0000000004
=========
========= ERROR SUMMARY: 2 errors
"""
SYNCCHECK_OUTPUT = """\
========= Barrier error detected. Invalid arguments
=========     at bad_mask(float *)+0x60 in cell.cu:{mask}
=========     by thread (16,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
"""
_LINES = {"past_end": PAST_END_LINE, "scale": SCALE_LINE, "mask": MASK_LINE}
MEMCHECK_OUTPUT, INITCHECK_OUTPUT, SYNCCHECK_OUTPUT = (
    text.format(**_LINES) for text in (MEMCHECK_OUTPUT, INITCHECK_OUTPUT, SYNCCHECK_OUTPUT))


def test_compute_sanitizers_reports_read_back(module):
    races = sanitizer_gpu.parse(RACECHECK_OUTPUT, "racecheck", module["mirror"])
    assert [(f.severity, f.kind, f.count, f.other_line, f.line) for f in races] == [
        ("error", "RAW", 1024, 6, 7), ("warning", "RAW", 32, 6, 7)]
    assert races[0].source.strip() == "out[blockIdx.x * 256 + t] = s[255 - t];"
    oob = sanitizer_gpu.parse(MEMCHECK_OUTPUT, "memcheck", module["past_end"])
    assert len(oob) == 1
    f = oob[0]
    assert (f.kind, f.access, f.space, f.size, f.count, f.line) == (
        "out of bounds", "write", "global", 4, 2, PAST_END_LINE + 1)
    assert f.thread == (232, 0, 0) and f.block == (3, 0, 0) and f.address == 0x7F1234567890
    init = sanitizer_gpu.parse(INITCHECK_OUTPUT, "initcheck", module["scale"])
    assert [(f.kind, f.count, f.line) for f in init] == [("uninitialized read", 2, SCALE_LINE + 1)]
    sync = sanitizer_gpu.parse(SYNCCHECK_OUTPUT, "synccheck", module["bad_mask"])
    assert [(f.kind, f.count, f.line, f.thread) for f in sync] == [
        ("invalid arguments", 1, MASK_LINE + 1, (16, 0, 0))]
    assert sanitizer_gpu.parse("========= ERROR SUMMARY: 0 errors\n", "memcheck") == []


def test_compute_sanitizer_command():
    cmd = sanitizer_gpu.command("/usr/local/cuda/bin/compute-sanitizer", "racecheck",
                                ["python", "-m", "child"])
    assert cmd[:3] == ["/usr/local/cuda/bin/compute-sanitizer", "--tool", "racecheck"]
    assert "--racecheck-report" in cmd and cmd[-3:] == ["python", "-m", "child"]
