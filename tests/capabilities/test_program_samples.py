"""Whole programs written as NVIDIA's CUDA samples write them, on the simulator and (the
``gpu``-marked twins) through nvcc on a GPU with the same output.

``tests/data/programs/`` holds small programs in the samples' style and ``common/``, an
include folder in the style of their ``Common/``: ``helper_check.h`` defines its runtime
helpers only when the runtime headers' include guards are defined, as ``helper_cuda.h``
does. ``benchmarks/cuda_samples.py`` runs the samples themselves."""
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.backends.simulator import program_source
from workbench.backends.simulator import programs as sim_programs
from workbench.programs import find_nvcc

DATA = Path(__file__).resolve().parents[1] / "data" / "programs"
COMMON = DATA / "common"
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")


def run(name, backend="simulator", **kw):
    """The program ``name`` of tests/data/programs, built with ``-I common``."""
    kw.setdefault("echo", False)
    return wb.program(files={name: (DATA / name).read_text()}, options=f"-I {COMMON}", backend=backend, **kw)


def sim_source(source, **kw):
    kw.setdefault("echo", False)
    return wb.program(source, backend="simulator", **kw)


def _device():
    return wb.backend().device_properties()


# -- the runtime headers as the samples' helpers expect them ---------------------------------------
def test_helper_header_finds_the_runtime_through_its_include_guards():
    lines = run("device_query.cu").stdout.splitlines()
    props = _device()
    assert lines[0] == "runtime headers: runtime driver_types, CUDART_VERSION set: 1, nvcc 1"
    cc = props.compute_capability
    assert lines[1] == f"GPU Device 0: compute capability {cc[0]}.{cc[1]}"
    attributes = dict(re.findall(r"attribute (\d+) = (-?\d+)", "\n".join(lines)))
    assert attributes["16"] == str(props.multiprocessors)        # cudaDevAttrMultiProcessorCount
    assert attributes["75"] == str(cc[0]) and attributes["76"] == str(cc[1])
    assert attributes["10"] == "32" and attributes["1"] == "1024"
    assert attributes["97"] == str(props.shared_memory_per_block_optin)
    assert f"props agree: {props.multiprocessors} 32 1024" in lines
    assert lines[-2:] == ["bad attribute: cudaErrorInvalidValue", "bad device: cudaErrorInvalidDevice"]


def _attribute_names():
    header = (sim_programs.RUNTIME_DIR / "wbsim_device_types.h").read_text()
    enum = re.search(r"enum cudaDeviceAttr \{(.*?)\};", header, re.S).group(1)
    return [n for n in re.findall(r"(cudaDevAttr\w+) = \d+", enum)]


def test_every_device_attribute_is_answered_from_the_device_profile():
    names = _attribute_names()
    assert len(names) > 130 and "cudaDevAttrClockRate" in names
    body = "\n".join(f'    e = cudaDeviceGetAttribute(&v, {n}, 0); printf("{n} %d %d\\n", (int)e, v);'
                     for n in names)
    out = sim_source("#include <cstdio>\nint main() {\n    int v; cudaError_t e;\n" + body + "\n}\n").stdout
    answers = {name: (int(e), int(v)) for name, e, v in re.findall(r"(\w+) (\d+) (-?\d+)", out)}
    assert sorted(answers) == sorted(names)
    unanswered = [n for n, (e, _) in answers.items() if e != 0]
    assert unanswered == []
    props = _device()
    assert answers["cudaDevAttrComputeMode"][1] == 0            # cudaComputeModeDefault
    assert answers["cudaDevAttrIntegrated"][1] == 0
    assert answers["cudaDevAttrClockRate"][1] == props.clock_khz
    assert answers["cudaDevAttrMaxThreadsPerMultiProcessor"][1] == props.max_threads_per_multiprocessor
    assert answers["cudaDevAttrMaxSharedMemoryPerMultiprocessor"][1] == props.shared_memory_per_multiprocessor


def test_error_names_and_strings_are_the_runtimes():
    lines = run("errors.cu").stdout.splitlines()
    assert "0 cudaSuccess: no error" in lines
    assert "1 cudaErrorInvalidValue: invalid argument" in lines
    assert "2 cudaErrorMemoryAllocation: out of memory" in lines
    assert "700 cudaErrorIllegalAddress: an illegal memory access was encountered" in lines
    assert "710 cudaErrorAssert: device-side assert triggered" in lines
    assert "720 cudaErrorCooperativeLaunchTooLarge: too many blocks in cooperative launch" in lines
    assert "999 cudaErrorUnknown: unknown error" in lines
    assert len(lines) == 42 and not any("unrecognized" in line for line in lines)


def test_profiler_api_and_nvtx_ranges_do_nothing_and_succeed():
    assert run("profiler.cu").stdout == "sum 992\n"


# -- half and bfloat16 ----------------------------------------------------------------------------
def _bf16(x):
    """float32 values rounded to bfloat16 (to nearest even), as float32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("offset", [4.0, 3.3])
def test_half2_and_bfloat16_constructors_and_operators_nvcc_accepts(offset):
    """Each operation rounds to half (bfloat16) as it goes; at offset 3.3 every step rounds."""
    out = wb.program(files={"half_types.cu": (DATA / "half_types.cu").read_text()},
                     options=f"-DOFFSET={offset}f", backend="simulator", echo=False).stdout.splitlines()
    assert out[0] == "no error"
    got = np.array([[float(v) for v in line.split()[1:]] for line in out[1:]], dtype=np.float32)
    i = np.arange(64)
    data = ((i * 37 % 64) / np.float32(8.0) - np.float32(offset)).astype(np.float32)
    a, b = data[:32], data[32:]
    h = np.float16
    lo, hi = h(a), h(b)
    lo, hi = h(lo * lo), h(hi * hi)                                  # pair * pair (+ zeros)
    lo, hi = h(lo + h(0.25)), h(hi + h(-0.5))                       # += __floats2half2_rn
    lo = h(np.float32(lo) * 2 + 1)                                  # __hfma2(v, 2, 1)
    hi = h(np.float32(hi) * 2 + 1)
    single = h(h(h(a) * h(3)) - h(0.5))
    bf = _bf16(_bf16(_bf16(a) * _bf16(1.5)) + _bf16(b))
    np.testing.assert_array_equal(got[:, 0], lo.astype(np.float32))
    np.testing.assert_array_equal(got[:, 1], hi.astype(np.float32))
    np.testing.assert_array_equal(got[:, 2], single.astype(np.float32) + 1)
    np.testing.assert_array_equal(got[:, 3], bf)


# -- device asserts ---------------------------------------------------------------------------
def test_a_failed_assert_is_sticky_and_the_program_goes_on():
    r = run("assert_sticky.cu")
    assert r.returncode == 0
    assert r.stdout.splitlines() == [
        "launch: cudaSuccess", "-- begin assert output", "-- end assert output",
        "synchronize: cudaErrorAssert (device-side assert triggered)",
        "cudaMalloc after: cudaErrorAssert", "cudaGetLastError: cudaErrorAssert",
        "cudaGetLastError again: cudaSuccess", "the program goes on"]
    failed = re.findall(r"assert_sticky\.cu:\d+: .*testKernel.*: block: \[(\d+),0,0\], thread: \[(\d+),0,0\] "
                        r"Assertion `gtid < n` failed\.", r.stderr)
    assert sorted(failed) == [("1", "29"), ("1", "30"), ("1", "31")]  # every failing thread, once


def test_after_an_assert_a_null_out_pointer_is_still_an_invalid_value():
    """As on an H200: cudaMalloc checks its out-pointer before it answers with the sticky error."""
    source = r"""#include <cassert>
    #include <cstdio>
    __global__ void k() { assert(threadIdx.x != 3); }
    int main() {
        k<<<1, 8>>>();
        cudaDeviceSynchronize();
        void* p;
        printf("%s %s\n", cudaGetErrorName(cudaMalloc((void**)nullptr, 4)), cudaGetErrorName(cudaMalloc(&p, 4)));
        return 0;
    }"""
    assert sim_source(source).stdout == "cudaErrorInvalidValue cudaErrorAssert\n"


def test_an_assert_that_is_not_checked_leaves_the_exit_code_alone():
    source = r"""#include <cassert>
    #include <cstdio>
    __global__ void k() { assert(threadIdx.x != 3); }
    int main() { k<<<1, 8>>>(); cudaDeviceSynchronize(); printf("done\n"); return 0; }"""
    r = sim_source(source)
    assert r.returncode == 0 and r.stdout == "done\n" and "Assertion `threadIdx.x != 3` failed." in r.stderr


def test_cuda_device_reset_clears_the_sticky_error():
    source = r"""#include <cassert>
    #include <cstdio>
    __global__ void k(int* x) { assert(0); }
    int main() {
        int* x; cudaMalloc(&x, 4); k<<<1, 1>>>(x);
        printf("%s\n", cudaGetErrorName(cudaDeviceSynchronize()));
        printf("%s\n", cudaGetErrorName(cudaDeviceReset()));
        printf("%s\n", cudaGetErrorName(cudaMalloc(&x, 4)));
        printf("%s\n", cudaGetErrorName(cudaGetLastError()));  // the synchronize's, kept until read
        printf("%s\n", cudaGetErrorName(cudaGetLastError()));
    }"""
    assert sim_source(source).stdout.splitlines() == ["cudaErrorAssert", "cudaSuccess", "cudaSuccess",
                                                      "cudaErrorAssert", "cudaSuccess"]


# -- the runtime API the samples use --------------------------------------------------------------
def test_pitched_3d_mapped_and_symbol_memory():
    lines = run("memory_api.cu").stdout.splitlines()
    assert lines[1] == "pitch is a multiple of the texture alignment: 1"
    w, h = 7, 5
    host = np.array([[x + 0.5 * y for x in range(w)] for y in range(h)], dtype=np.float32)
    c = np.array([2, -1, 0.5, 3], dtype=np.float32)
    expected = host * c[np.arange(h) % 4][:, None] + np.arange(h)[:, None]
    got = np.array([[float(v) for v in line.split()] for line in lines[2:2 + h]], dtype=np.float32)
    np.testing.assert_array_equal(got, expected)
    assert lines[2 + h:] == [
        f"hits {w * h}", "too wide: cudaErrorInvalidPitchValue", "3D round trip: 1",
        f"mapped sum {sum(3 * (i - 7) for i in range(100))}", "flags mapped 1 portable 0",
        "64 MiB taken: 1, free <= total: 1"]


def test_streams_events_attributes_occupancy_and_launches():
    lines = run("launch_api.cu").stdout.splitlines()
    n = 1 << 12
    assert lines[1:] == [
        "occupancy answers: 1 1 1",
        "stream flags 1, elapsed >= 0: 1, untimed: cudaErrorInvalidResourceHandle",
        f"axpy total {sum(1 + 2 * (i % 10) for i in range(n)):.1f}",
        "function: max threads 1024, registers reported: 1",
        f"cooperative 1: sum {sum(i % 7 for i in range(10000))} expected {sum(i % 7 for i in range(10000))}"]


def _sample_linear_wrap(data, u, v):
    """tex2D of a float texture: normalised coordinates, wrap, linear filtering with
    weights of 8 fractional bits (the GPU's texture unit)."""
    h, w = data.shape
    out = np.empty(u.shape, dtype=np.float64)
    for k in np.ndindex(u.shape):
        x = (u[k] - np.floor(u[k])) * w - 0.5
        y = (v[k] - np.floor(v[k])) * h - 0.5
        i, j = int(np.floor(x)), int(np.floor(y))
        a, b = np.round((x - i) * 256) / 256, np.round((y - j) * 256) / 256
        t = lambda jj, ii: data[jj % h, ii % w]  # noqa: E731
        out[k] = ((1 - a) * (1 - b) * t(j, i) + a * (1 - b) * t(j, i + 1)
                  + (1 - a) * b * t(j + 1, i) + a * b * t(j + 1, i + 1))
    return out


def test_texture_and_surface_objects():
    lines = run("textures.cu").stdout.splitlines()
    w, h = 8, 4
    data = np.array([(i * 7) % 11 for i in range(w * h)], dtype=np.float32).reshape(h, w)
    xs, ys = np.meshgrid(np.arange(w), np.arange(h))
    u = ((xs + 0.25) / w + 0.0625).astype(np.float32)
    v = ((ys + 0.5) / h - 0.375).astype(np.float32)
    expected = _sample_linear_wrap(data, u.astype(np.float64), v.astype(np.float64))
    got = np.array([[float(x) for x in line.split()] for line in lines[:h]])
    np.testing.assert_allclose(got, expected, atol=1e-4)
    assert len(np.unique(got)) > 8  # the samples fall between texels, at wrapped edges too
    assert lines[h] == f"surface: 0 103 {(h - 1) * 100 + w - 1}"


def test_stream_capture_and_graph_replays():
    assert run("graphs.cu").stdout.splitlines() == [
        "capturing: 1; while captured nothing ran: 0, replays 0",
        "after 3 replays: x = 14, sum 14000, replays 3"]


def test_inline_ptx_that_reads_special_registers():
    source = r"""#include <cstdio>
    __global__ void lanes(unsigned* out) {
        unsigned lane, warp;
        asm("mov.u32 %0, %%laneid;" : "=r"(lane));
        asm volatile("mov.u32 %0, %%warpid;" : "=r"(warp));
        unsigned long long t;
        asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
        out[threadIdx.x] = lane + 100 * warp + (t > 0 ? 10000 : 0);
    }
    int main() {
        unsigned* out; cudaMallocManaged(&out, 64 * sizeof(unsigned));
        lanes<<<1, 64>>>(out); cudaDeviceSynchronize();
        printf("%u %u %u %u\n", out[0], out[31], out[32], out[63]);
    }"""
    assert sim_source(source).stdout == "10000 10031 10100 10131\n"


def test_source_rewrites_keep_every_line_where_it_was():
    source = ('int main() {\n  unsigned l; asm volatile(\n    "mov.u32 %0, %%laneid;"\n    : "=r"(l));\n'
              '  cudaLaunchCooperativeKernel((void *)\n    reduce, grid, block, args);\n'
              '  asm("bar.sync 0;");\n}\n')
    out = program_source.rewrite(source)
    assert out.count("\n") == source.count("\n")
    lines = out.split("\n")
    assert lines[1] == "  unsigned l; ((l) = __wbsim_ptx_laneid())"
    assert lines[4:6] == ["  cudaLaunchCooperativeKernel(reduce", ", grid, block, args);"]
    assert lines[6] == '  asm("bar.sync 0;");'  # any other PTX is left, and refused


def test_directed_rounding_intrinsics_round_the_way_they_say():
    source = r"""#include <cstdio>
    __global__ void k(float* f, double* d) {
        f[0] = __fdiv_rd(1.0f, 3.0f); f[1] = __fdiv_ru(1.0f, 3.0f); f[2] = __fsqrt_rd(2.0f);
        f[3] = __fsqrt_ru(2.0f); f[4] = __fadd_rz(-1.0f, -1e-9f); f[5] = __double2float_ru(0.1);
        d[0] = __dadd_rd(1.0, 1e-30); d[1] = __dadd_ru(1.0, 1e-30);
    }
    int main() {
        float* f; double* d; cudaMallocManaged(&f, 6 * sizeof(float)); cudaMallocManaged(&d, 16);
        k<<<1, 1>>>(f, d); cudaDeviceSynchronize();
        for (int i = 0; i < 6; ++i) printf("%.9g\n", f[i]);
        printf("%.17g\n%.17g\n", d[0], d[1]);
    }"""
    f0, f1, f2, f3, f4, f5, d0, d1 = [float(x) for x in sim_source(source).stdout.split()]
    third = np.float32(1) / np.float32(3)
    assert f0 == np.nextafter(third, np.float32(0)) and f1 == third      # 1/3 rounds up to nearest
    assert f2 < np.sqrt(2) < f3 and np.float32(f3) == np.nextafter(np.float32(f2), np.float32(2))
    assert f4 == -1.0 and f5 == np.float32(0.1) and f5 > 0.1
    assert d0 == 1.0 and d1 == np.nextafter(1.0, 2.0)


def test_block_scope_cuda_barrier():
    source = r"""#include <cstdio>
    #include <cuda/barrier>
    __global__ void phases(int* out) {
        __shared__ cuda::barrier<cuda::thread_scope_block> bar;
        __shared__ int stage[64];
        if (threadIdx.x == 0) init(&bar, blockDim.x);
        __syncthreads();
        stage[threadIdx.x] = threadIdx.x;
        bar.arrive_and_wait();
        int mine = stage[(threadIdx.x + 1) % blockDim.x];
        auto token = bar.arrive();
        bar.wait(std::move(token));
        out[threadIdx.x] = mine;
    }
    int main() {
        int* out; cudaMallocManaged(&out, 64 * sizeof(int));
        phases<<<1, 64>>>(out); cudaDeviceSynchronize();
        int ok = 1; for (int i = 0; i < 64; ++i) ok &= out[i] == (i + 1) % 64;
        printf("%d\n", ok);
    }"""
    assert sim_source(source).stdout == "1\n"


def test_host_only_files_are_the_host_compilers():
    """A .cpp file gets the runtime API and none of the device functions (it may define
    its own umin), as nvcc gives it to the host compiler."""
    kernels = r"""#include <cuda_runtime.h>
    __global__ void square(int* x) { x[threadIdx.x] *= x[threadIdx.x]; }
    void squareOnDevice(int* host, int n) {
        int* d; cudaMalloc(&d, n * sizeof(int));
        cudaMemcpy(d, host, n * sizeof(int), cudaMemcpyHostToDevice);
        square<<<1, n>>>(d);
        cudaMemcpy(host, d, n * sizeof(int), cudaMemcpyDeviceToHost);
    }"""
    host = r"""#include <cstdio>
    #include <cuda_runtime.h>
    typedef unsigned int uint;
    static uint umin(uint a, uint b) { return a < b ? a : b; }
    void squareOnDevice(int* host, int n);
    int main() {
        int x[4] = {1, 2, 3, 4};
        squareOnDevice(x, 4);
        int count; cudaGetDeviceCount(&count);
        printf("%d %d %d %d min %u devices %d\n", x[0], x[1], x[2], x[3], umin(3, 9), count);
    }"""
    r = wb.program(files={"kernels.cu": kernels, "main.cpp": host}, backend="simulator", echo=False)
    assert r.stdout == "1 4 9 16 min 3 devices 1\n"


def test_interprocess_memory_between_a_program_and_the_process_it_starts():
    source = r"""#include <cstdio>
    #include <cstdlib>
    #include <spawn.h>
    #include <sys/wait.h>
    __global__ void stamp(char* p, int n, char v) { int i = threadIdx.x; if (i < n) p[i] = v; }
    int main(int argc, char** argv) {
        if (argc > 1) {  // the child: the handle comes as hex on its command line
            cudaIpcMemHandle_t h;
            for (int i = 0; i < 64; ++i) sscanf(argv[1] + 2 * i, "%2hhx", &h.reserved[i]);
            char* p;
            cudaError_t e = cudaIpcOpenMemHandle((void**)&p, h, cudaIpcMemLazyEnablePeerAccess);
            stamp<<<1, 32>>>(p, 32, 7);
            cudaDeviceSynchronize();
            cudaIpcCloseMemHandle(p);
            return e == cudaSuccess ? 0 : 3;
        }
        char* d; cudaMalloc(&d, 32); cudaMemset(d, 0, 32);
        cudaIpcMemHandle_t h; cudaIpcGetMemHandle(&h, d);
        char hex[129]; for (int i = 0; i < 64; ++i) sprintf(hex + 2 * i, "%02hhx", h.reserved[i]);
        char* child[] = {argv[0], hex, nullptr};
        pid_t pid; int status;
        posix_spawn(&pid, argv[0], nullptr, nullptr, child, nullptr);
        waitpid(pid, &status, 0);
        char back[32]; cudaMemcpy(back, d, 32, cudaMemcpyDeviceToHost);
        printf("child %d, byte %d\n", WEXITSTATUS(status), back[31]);
    }"""
    assert sim_source(source).stdout == "child 0, byte 7\n"


# -- what only a GPU has ------------------------------------------------------------------------
@pytest.mark.parametrize("line, feature", [
    ("#include <cublas_v2.h>", "cuBLAS"),
    ("#include <thrust/device_vector.h>", "Thrust"),
    ("#include <cuda_gl_interop.h>", "OpenGL interop"),
    ("void f() { CUdevice dev; cuDeviceGet(&dev, 0); }", "the CUDA driver API"),
    ("void f() { cudaGraphicsResource_t r; cudaGraphicsGLRegisterBuffer(&r, 1, 0); }", "interop"),
])
def test_gpu_only_features_fail_the_build_in_one_line_at_the_users_line(line, feature):
    source = "#include <cstdio>\n" + line + "\nint main() { return 0; }\n"
    with pytest.raises(wb.CompileError) as info:
        sim_source(source)
    errors = info.value.errors
    assert errors and all(e.line == 2 for e in errors), [(e.line, e.message) for e in errors]
    assert feature in errors[0].message and "runs on a GPU" in errors[0].message


def test_the_samples_include_folder_option_relative_to_the_current_folder(monkeypatch):
    monkeypatch.chdir(DATA)
    first = wb.program(files={"profiler.cu": (DATA / "profiler.cu").read_text()}, options="-I common",
                       backend="simulator", echo=False)
    again = wb.programs.build_program(files={"profiler.cu": (DATA / "profiler.cu").read_text()}, options="-I common",
                             backend="simulator")
    assert first.stdout.endswith("sum 992\n") and again.cache_hit


@needs_nvcc
def test_every_error_string_is_the_toolkit_runtimes(tmp_path):
    """cudaGetErrorName/String of every code the simulator's runtime knows, against the
    toolkit's own libcudart (they need no device: this runs without a GPU)."""
    table = (Path(program_source.__file__).parent / "program_runtime" / "cudart_errors.cpp").read_text()
    codes = sorted(set(re.findall(r"\bE\((cuda\w+)", table)))
    assert len(codes) > 100
    source = ("#include <cstdio>\n#include <cuda_runtime.h>\nint main() {\n"
              + "".join(f'  printf("%d %s: %s\\n", (int){c}, cudaGetErrorName({c}), cudaGetErrorString({c}));\n'
                        for c in codes) + "  return 0;\n}\n")
    (tmp_path / "errors.cu").write_text(source)
    subprocess.run([find_nvcc(), "-o", str(tmp_path / "errors"), str(tmp_path / "errors.cu")], check=True,
                   capture_output=True)
    toolkit = subprocess.run([str(tmp_path / "errors")], check=True, capture_output=True, text=True).stdout
    assert sim_source(source).stdout.splitlines() == toolkit.splitlines()


# -- on a GPU: the same programs through nvcc print the same lines -------------------------------------
TWINS = ["device_query.cu", "errors.cu", "half_types.cu", "profiler.cu", "assert_sticky.cu", "memory_api.cu",
         "launch_api.cu", "textures.cu", "graphs.cu"]


def _masked(text):
    name = wb.compat.device_name().replace(" (simulated)", "")
    return text.replace(f"{name} (simulated)", "<device>").replace(name, "<device>").splitlines()


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.parametrize("name", TWINS)
def test_gpu_twin_prints_what_the_simulator_prints(name):
    gpu = run(name, backend="gpu", check=False)
    simulated = run(name, backend="simulator", check=False)
    assert (gpu.returncode, _masked(gpu.stdout)) == (simulated.returncode, _masked(simulated.stdout))
    if name == "assert_sticky.cu":
        pattern = r"block: \[\d+,0,0\], thread: \[\d+,0,0\] Assertion `gtid < n` failed\."
        assert sorted(re.findall(pattern, gpu.stderr)) == sorted(re.findall(pattern, simulated.stderr))


@pytest.mark.gpu
@needs_nvcc
def test_gpu_twin_every_listed_attribute_agrees_with_the_simulated_copy():
    gpu = dict(re.findall(r"attribute (\d+) = (-?\d+)", run("device_query.cu", backend="gpu").stdout))
    simulated = dict(re.findall(r"attribute (\d+) = (-?\d+)", run("device_query.cu").stdout))
    assert gpu == simulated
