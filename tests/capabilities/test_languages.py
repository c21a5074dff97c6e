"""Numba and Triton kernels in the workbench, on the simulator (Numba's CUDA
simulator, Triton's interpreter) and on the GPU: wrapping, launching on
workbench arrays without copies, the timing log's language column, memory
tracking, bench/compare/sweep, argument errors, autotuning, resources and
occupancy.

A process commits Numba (and Triton kernels) to one mode, GPU or CPU, when
``numba.cuda`` is first imported, so each test runs on the backend the
``lang`` fixture makes active and skips, with the workbench's one-line
reason, where the language cannot run there (not installed, or committed to
the other mode in this process).
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import workbench as wb
from workbench.memory.tracker import tracker

from helpers import new_timings, using_backend

LANGUAGES = ["numba", "triton"]
_KERNELS: dict = {}
_MODE_VARIABLES = ("NUMBA_ENABLE_CUDASIM", "TRITON_INTERPRET")


@pytest.fixture(scope="module", autouse=True)
def _numba_follows_the_default_backend():
    """Commit Numba to the mode of this process's default backend (the GPU
    where there is one) before any test asks for the other, and give the
    environment back afterwards (notebook kernels started later inherit it)."""
    from workbench.backends import choose_backend
    saved = {k: os.environ.get(k) for k in _MODE_VARIABLES}
    with using_backend(choose_backend()[0]):
        if wb.languages.setup()["numba"].available:
            import numba.cuda  # noqa: F401
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def on(backend):
    """Each backend active in turn and the languages ready for it; the status."""
    return wb.languages.setup()


@pytest.fixture
def on_gpu(gpu):
    """The GPU backend active and the languages ready for it."""
    return wb.languages.setup()


def kernels(support, language: str) -> dict:
    """The test kernels of ``language`` for the active backend's mode (defined
    once per process and mode, after setup)."""
    status = support[language]
    if not status.available:
        pytest.skip(status.line())
    key = (language, bool(wb.backend().simulated))
    if key in _KERNELS:
        return _KERNELS[key]
    path = pathlib.Path(__file__).resolve().parents[1] / "language_kernels" / f"{language}_kernels.py"
    spec = importlib.util.spec_from_file_location(f"_wb_{language}_kernels_{int(key[1])}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    made = {name: getattr(module, name) for name in ("scale", "block_sum", "tuned_scale", "scale_by_global",
                                                     "typed_fill", "uniform_samples")
            if hasattr(module, name)}
    _KERNELS[key] = made
    return made


def _launch_scale(language, k, x, y, a, n):
    if language == "numba":
        k(x, y, a, n, grid=(n + 127) // 128, block=128)
    else:
        k(x, y, a, n, grid=((n + 127) // 128,), BLOCK=128)


def _inputs(n=777, seed=0):
    rng = np.random.default_rng(seed)
    host = rng.standard_normal(n).astype(np.float32)
    return host, wb.to_device(host), wb.xp.zeros(n, dtype=np.float32)


@pytest.mark.parametrize("language", LANGUAGES)
def test_launch_on_workbench_arrays_in_place_and_logged(on, language):
    raw = kernels(on, language)["scale"]
    k = wb.python_kernel(raw)
    assert wb.python_kernel(raw) is k and k.language == language
    host, x, y = _inputs()
    with new_timings() as added:
        _launch_scale(language, k, x, y, 2.5, x.size)
    out = wb.to_host(y)
    np.testing.assert_allclose(out, 2.5 * host.astype(np.float64), rtol=1e-6)
    assert len(added.frame) == 1
    row = added.frame.iloc[-1]
    assert row["kernel"] == "scale" and row["language"] == language
    assert row["backend"] == wb.backend().name and row["ms"] >= 0
    assert tuple(row["grid"]) == (7,)


def test_cuda_kernels_are_logged_with_language_cuda(backend):
    k = wb.compile('extern "C" __global__ void one(float* y) { y[threadIdx.x] = 1.0f; }').kernel()
    y = wb.xp.zeros(32, dtype=np.float32)
    k(y, grid=1, block=32)
    assert wb.timings().iloc[-1]["language"] == "cuda"


@pytest.mark.parametrize("language", LANGUAGES)
def test_launch_makes_no_copy_and_tracked_arrays_stay_tracked(on, language):
    k = wb.python_kernel(kernels(on, language)["scale"])
    wb.memory.tracking(True)
    try:
        host, x, y = _inputs(4096, seed=1)
        _launch_scale(language, k, x, y, 1.0, x.size)  # compiles, warms caches
        wb.synchronize()
        t = tracker()
        in_use, live = t.in_use, len(t.live)
        _launch_scale(language, k, x, y, -1.0, x.size)
        wb.synchronize()
        assert (t.in_use, len(t.live)) == (in_use, live)  # the kernel wrote y where it is
        np.testing.assert_array_equal(wb.to_host(y), -host)
        assert wb.backend().device_pointer(y) in t.live  # the output is a tracked allocation
    finally:
        wb.memory.tracking(False)


@pytest.mark.parametrize("language", LANGUAGES)
def test_bench_compare_and_sweep_take_the_language_kernel_itself(on, language):
    raw = kernels(on, language)["scale"]
    host, x, y = _inputs(1000, seed=2)
    launch = ({"grid": 8, "block": 128} if language == "numba" else {"grid": (8,), "BLOCK": 128})
    result = wb.bench(raw, x, y, 3.0, x.size, repeat=3, warmup=1, warmup_time=0,
                      check=lambda out: np.allclose(wb.to_host(y), 3.0 * host), **launch)
    assert result.name == "scale" and len(result.times) == 3

    cuda = wb.compile(r'''
    extern "C" __global__ void scale_cu(const float* x, float* y, float a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i];
    }''').kernel()
    k = wb.python_kernel(raw)
    cmp = wb.compare(lambda x, y: (cuda(x, y, 3.0, x.size, grid=8, block=128), y)[1],
                     lambda x, y: (k(x, y, 3.0, x.size, **launch), y)[1], x, y,
                     names=("cuda", language), repeat=3, warmup_time=0)
    assert cmp.a.name == "cuda" and cmp.b.name == language and np.isfinite(cmp.speedup)

    pointers = ("x", "y") if language == "numba" else ("x_ptr", "y_ptr")
    table = wb.sweep({language: raw}, sizes=[256, 512], progress=False, ceilings=False,
                     setup=lambda size: {pointers[0]: wb.xp.ones(size, dtype=np.float32),
                                         pointers[1]: wb.xp.zeros(size, dtype=np.float32),
                                         "a": 2.0, "n": size,
                                         **({"grid": size // 128, "block": 128} if language == "numba"
                                            else {"grid": (size // 128,), "BLOCK": 128})},
                     repeat=2, warmup_time=0)
    assert list(table["size"]) == [256, 512] and (table["variant"] == language).all() \
        if "variant" in table else len(table) == 2


@pytest.mark.parametrize("language", LANGUAGES)
def test_bad_arguments_get_the_workbench_error_and_the_workbench_goes_on(on, language):
    raw = kernels(on, language)["scale"]
    k = wb.python_kernel(raw)
    host, x, y = _inputs(256, seed=3)
    grid = {"grid": 2, "block": 128} if language == "numba" else {"grid": (2,), "BLOCK": 128}
    with pytest.raises(wb.KernelArgumentError, match=r"takes 4 positional arguments .*got 3"):
        k(x, y, 2.0, **grid)
    with pytest.raises(wb.KernelArgumentError, match=r"needs device memory, got a float32 host NumPy"):
        k(host, y, 2.0, 256, **grid)
    typed = wb.python_kernel(raw, dtypes={"x" if language == "numba" else "x_ptr": np.float32})
    with pytest.raises(wb.KernelArgumentError, match=r"takes a device array of float32, got a float64"):
        typed(x.astype(np.float64), y, 2.0, 256, **grid)
    # what only the language can tell is its own error, unchanged
    with pytest.raises(Exception) as info:
        k(x, y, "two", 256, **grid)
    assert not isinstance(info.value, wb.WorkbenchError)
    _launch_scale(language, k, x, y, 2.0, 256)  # and the next launch works
    np.testing.assert_allclose(wb.to_host(y), 2.0 * host, rtol=1e-6)


def test_triton_autotuning_shows_every_config_and_the_one_picked(on):
    k = wb.python_kernel(kernels(on, "triton")["tuned_scale"])
    assert k.autotune.picked is None
    host, x, y = _inputs(1000, seed=4)
    k(x, y, 0.5, x.size, grid=lambda meta: ((x.size + meta["BLOCK"] - 1) // meta["BLOCK"],))
    np.testing.assert_allclose(wb.to_host(y), 0.5 * host, rtol=1e-6)
    tuned = k.autotune
    assert [r["config"].split(",")[0] for r in tuned.rows] == ["BLOCK=64", "BLOCK=128"]
    assert sum(r["picked"] for r in tuned.rows) == 1 and all(r["ms"] > 0 for r in tuned.rows)
    assert tuned.picked in repr(tuned) and "picked" in tuned.to_pandas().columns
    assert "autotuned" in k._repr_html_()


def test_numba_reduction_with_shared_memory_and_atomics(on):
    k = wb.python_kernel(kernels(on, "numba")["block_sum"])
    rng = np.random.default_rng(5)
    host = rng.random(1000).astype(np.float32)
    out = wb.xp.zeros(1, dtype=np.float32)
    k(wb.to_device(host), out, host.size, grid=8, block=128)
    np.testing.assert_allclose(wb.to_host(out)[0], host.astype(np.float64).sum(), rtol=1e-4)


@pytest.mark.parametrize("language", LANGUAGES)
def test_resources_occupancy_and_code_read_like_a_cuda_kernel(on, language):
    k = wb.python_kernel(kernels(on, language)["scale"])
    host, x, y = _inputs(512, seed=6)
    _launch_scale(language, k, x, y, 1.0, x.size)
    report = k.inspect()
    occ = k.occupancy(128)
    assert 0 < occ.occupancy <= 1 and "scale" in repr(report)
    panel = wb.KernelPanel(k, block=128)  # the kernel panel reads it as it reads a %%cuda kernel
    assert panel.kernel_name == "scale" and panel.occupancy["block"] == 128
    assert panel.resources["registers"] == (k.resources.registers if k.resources.registers else "N/A")
    if wb.backend().simulated:
        assert k.resources.registers is None and str(report.registers) == "N/A"
        assert "no PTX" in report.ptx_reason
    else:
        assert k.resources.registers > 0 and k.resources.arch.startswith("sm_")
        assert ".entry" in report.kernel_ptx and report.ptx_reason == ""
        assert not any("register count unknown" in note for note in occ.notes)
        assert f"{k.resources.registers} registers" in repr(k)


@pytest.mark.gpu
@pytest.mark.parametrize("language", LANGUAGES)
def test_gpu_launch_on_a_workbench_stream_is_timed_on_that_stream(on_gpu, language):
    k = wb.python_kernel(kernels(on_gpu, language)["scale"])
    host, x, y = _inputs(1 << 22, seed=7)
    _launch_scale(language, k, x, y, 1.0, x.size)  # compiled: Triton's block is known from now on
    b = wb.backend()
    s = b.create_stream(non_blocking=True)
    with b.use_stream(s):
        _launch_scale(language, k, x, y, 4.0, x.size)
    b.stream_synchronize(s)
    np.testing.assert_allclose(wb.to_host(y), 4.0 * host, rtol=1e-6)
    log = wb.timings()
    row = log[log["kind"] == "kernel"].iloc[-1]  # (the copy back to the host is logged after it)
    assert row["language"] == language and row["ms"] > 0.001
    if language == "triton":
        assert tuple(row["block"])[0] % 32 == 0


def test_a_language_committed_to_the_other_mode_says_why_in_one_line(on):
    from workbench.languages import modes
    status = modes._numba_status(on_cpu=not wb.backend().simulated)
    if "numba.cuda" not in sys.modules:
        pytest.skip("numba.cuda not imported in this process yet")
    assert not status.available and "\n" not in status.reason and "restart" in status.reason


def test_importing_the_languages_imports_neither_language():
    code = ("import sys, workbench.languages, workbench as wb\n"
            "wb.python_kernel; wb.languages.setup\n"
            "print([m for m in ('numba', 'triton', 'torch') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.gpu
def test_gpu_numba_launch_on_a_new_array_at_a_reused_address_writes_the_new_array(on_gpu):
    k = wb.python_kernel(kernels(on_gpu, "numba")["scale"])
    host, x, _ = _inputs(1 << 16, seed=8)
    for value in (1.0, 2.0, 3.0):  # each output array new; the pool hands out the same address
        y = wb.xp.zeros(x.size, dtype=np.float32)
        k(x, y, value, x.size, grid=x.size // 128, block=128)
        np.testing.assert_allclose(wb.to_host(y), value * host, rtol=1e-6)
        del y


@pytest.mark.gpu
def test_gpu_triton_relaunches_follow_every_specialisation(on_gpu):
    """Repeat launches skip Triton's dispatch (languages/triton_direct.py): each
    one must still run the specialisation Triton would pick for its arguments
    (sizes divisible by 16 or not, aligned or offset pointers, another dtype,
    another BLOCK), and be logged."""
    k = wb.python_kernel(kernels(on_gpu, "triton")["scale"])
    rng = np.random.default_rng(11)

    launches = 0
    with new_timings() as added:
        for dtype in (np.float32, np.float64):
            for n, offset, block in ((1024, 0, 128), (777, 0, 128), (1024, 1, 128), (1, 0, 128),
                                     (1024, 0, 256), (1024, 0, 128), (777, 1, 128)):
                host = rng.standard_normal(n + offset).astype(dtype)
                x = wb.to_device(host)[offset:]  # offset 1: a pointer off Triton's 16-byte alignment
                y = wb.xp.zeros(n + offset, dtype=dtype)[offset:]
                for a in (1.5, -3.0):
                    k(x, y, a, n, grid=(triton_cdiv(n, block),), BLOCK=block)
                    launches += 1
                    np.testing.assert_allclose(wb.to_host(y), a * host[offset:].astype(np.float64),
                                               rtol=1e-6 if dtype == np.float32 else 1e-12)
    rows = added.frame.query("kind == 'kernel' and kernel == 'scale'")
    assert len(rows) == launches and (rows["ms"] > 0).all()
    direct = k._direct[wb.backend().current_device()]
    assert direct and direct._kernels and direct._calls  # the repeats went past Triton's dispatch
    for a, negative in ((0.0, False), (0.0, False), (-0.0, True), (0.0, False)):  # equal, not alike
        k(x, y, a, n, grid=(triton_cdiv(n, 128),), BLOCK=128)
        assert np.signbit(wb.to_host(y)[host[offset:] > 0]).all() == negative
    from triton import knobs  # a profiler's launch hook still sees every launch
    chain = knobs.runtime.launch_enter_hook
    if hasattr(chain, "add"):
        seen = []
        chain.add(seen.append)
        try:
            k(x, y, 2.0, n, grid=(triton_cdiv(n, 128),), BLOCK=128)
            k(x, y, 2.0, n, grid=(triton_cdiv(n, 128),), BLOCK=128)
        finally:
            chain.remove(seen.append)
        assert len(seen) == 2


def triton_cdiv(n: int, block: int) -> int:
    return -(-n // block)


# -- the same answers and checks on both backends; arrays the languages made ----------------

def test_a_declared_numba_signature_is_checked_on_both_backends(on):
    k = wb.python_kernel(kernels(on, "numba")["typed_fill"])
    with pytest.raises(wb.KernelArgumentError, match=r"'a' takes a device array of int32, got a float32"):
        k(wb.xp.zeros((4, 8), dtype=np.float32), grid=(1, 1), block=(4, 8))
    with pytest.raises(wb.KernelArgumentError, match=r"'a' takes a 2-dimensional device array"):
        k(wb.xp.zeros(32, dtype=np.int32), grid=(1, 1), block=(4, 8))
    a = wb.xp.zeros((4, 8), dtype=np.int32)
    k(a, grid=(1, 1), block=(4, 8))
    np.testing.assert_array_equal(wb.to_host(a), np.arange(32).reshape(4, 8))


def test_numba_globals_are_frozen_at_the_first_compile_on_both_backends(on):
    raw = kernels(on, "numba")["scale_by_global"]
    module_globals = raw.py_func.__globals__
    k = wb.python_kernel(raw)
    host, x, y = _inputs(300, seed=5)
    try:
        module_globals["SCALE"] = 2.0
        k(x, y, x.size, n=x.size)
        np.testing.assert_allclose(wb.to_host(y), 2.0 * host, rtol=1e-6)
        module_globals["SCALE"] = 5.0  # a GPU kernel compiled with 2.0 keeps it
        k(x, y, x.size, n=x.size)
        np.testing.assert_allclose(wb.to_host(y), 2.0 * host, rtol=1e-6)
    finally:
        module_globals["SCALE"] = 2.0


def test_a_numba_launch_refuses_a_block_the_device_refuses(on):
    k = wb.python_kernel(kernels(on, "numba")["scale"])
    host, x, y = _inputs(4096)
    limit = wb.backend().device_properties().max_threads_per_block
    with pytest.raises(wb.LaunchConfigError, match=f"2048 threads; this device allows at most {limit}"):
        k(x, y, 2.0, x.size, grid=2, block=2048)
    with pytest.raises(wb.LaunchConfigError, match="per dimension"):
        k(x, y, 2.0, x.size, grid=1, block=(1, 1, 128))
    np.testing.assert_array_equal(wb.to_host(y), 0)  # nothing ran
    _launch_scale("numba", k, x, y, 2.0, x.size)
    np.testing.assert_allclose(wb.to_host(y), 2.0 * host, rtol=1e-6)


@pytest.mark.parametrize("grid", [lambda meta: (0,), lambda meta: (-1,), lambda meta: (2.5,)],
                         ids=["zero", "negative", "float"])
def test_a_triton_grid_function_is_checked_as_a_plain_grid(on, grid):
    k = wb.python_kernel(kernels(on, "triton")["scale"])
    host, x, y = _inputs(256)
    with pytest.raises(wb.LaunchConfigError, match=r"grid \(from the grid function\)"):
        k(x, y, 2.0, x.size, grid=grid, BLOCK=128)
    np.testing.assert_array_equal(wb.to_host(y), 0)  # nothing ran, and nothing was said before
    k(x, y, 2.0, x.size, grid=lambda meta: (triton_cdiv(x.size, meta["BLOCK"]),), BLOCK=128)
    np.testing.assert_allclose(wb.to_host(y), 2.0 * host, rtol=1e-6)


def test_numba_random_states_pass_straight_to_a_numba_kernel(on):
    k = wb.python_kernel(kernels(on, "numba")["uniform_samples"])
    from numba.cuda.random import (create_xoroshiro128p_states, init_xoroshiro128p_states_cpu,
                                   xoroshiro128p_dtype, xoroshiro128p_uniform_float32)
    n, draws, seed = 64, 3, 1234
    states = create_xoroshiro128p_states(n, seed=seed)  # a Numba device array of records
    copied = wb.to_device(states)  # the workbench's copy keeps the record's fields
    assert copied.dtype == xoroshiro128p_dtype and copied.dtype.names == ("s0", "s1")
    cpu = np.empty(n, dtype=xoroshiro128p_dtype)  # numba.cuda.random's host-side generator
    init_xoroshiro128p_states_cpu(cpu, seed, 0)
    expected = np.array([[xoroshiro128p_uniform_float32(cpu, i) for _ in range(draws)]
                         for i in range(n)], dtype=np.float32)
    for given in (states, copied):
        out = wb.xp.zeros((n, draws), dtype=np.float32)
        k(given, out, grid=1, block=n)
        np.testing.assert_array_equal(wb.to_host(out), expected)
