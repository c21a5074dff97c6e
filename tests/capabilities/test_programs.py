"""Whole CUDA programs (wb.program, %%cuda_program): on the simulator here,
through nvcc on a GPU (``gpu``-marked), and the nvcc build where nvcc is
installed."""
import numpy as np
import pytest

import workbench as wb
from workbench.backends.simulator.devices import virtual_device
from workbench.backends.simulator.programs import rewrite_launches, supported_api
from workbench.programs import ProgramOptionError, check_toolkit, find_nvcc, parse_options

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")

# One textbook program, each mode a classic: vector add with an error-checking
# macro, a shared-memory reduction (template, extern __shared__, dynamic shared
# memory and a stream in <<<>>>, cudaMemcpyAsync, events), managed memory,
# module variables, and the usual mistakes.
TEXTBOOK = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(call) do { cudaError_t err_ = (call); if (err_ != cudaSuccess) { \
    fprintf(stderr, "CUDA error: %s (%s:%d)\n", cudaGetErrorString(err_), __FILE__, __LINE__); \
    exit(1); } } while (0)

__constant__ float scale;
__device__ int counter;

__global__ void vecAdd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + scale * b[i];
    if (i == 0) printf("device: n=%d\n", n);
}

template <typename T>
__global__ void blockSum(const T* in, T* out, int n) {
    extern __shared__ unsigned char smem[];
    T* s = reinterpret_cast<T*>(smem);
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? in[i] : T(0);
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) { out[blockIdx.x] = s[0]; atomicAdd(&counter, 1); }
}

__global__ void addManaged(int n, float* x, float* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = x[i] + y[i];
}

__global__ void wild(float* a) { a[(1 << 28) + threadIdx.x] = 1.0f; }

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "vadd";
    int n = argc > 2 ? atoi(argv[2]) : 1000;
    size_t bytes = n * sizeof(float);
    if (!strcmp(mode, "vadd")) {
        float *a = (float*)malloc(bytes), *b = (float*)malloc(bytes), *c = (float*)malloc(bytes);
        for (int i = 0; i < n; ++i) { a[i] = sinf((float)i); b[i] = cosf((float)i); }
        float *da, *db, *dc, two = 2.0f;
        CHECK(cudaMalloc(&da, bytes)); CHECK(cudaMalloc(&db, bytes)); CHECK(cudaMalloc(&dc, bytes));
        CHECK(cudaMemcpyToSymbol(scale, &two, sizeof(float)));
        CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
        vecAdd<<<(n + 255) / 256, 256>>>(da, db, dc,
                                         n);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; ++i) printf("%.7e\n", c[i]);
        CHECK(cudaFree(da)); CHECK(cudaFree(db)); CHECK(cudaFree(dc));
        free(a); free(b); free(c);
    } else if (!strcmp(mode, "reduce")) {
        const int threads = 128, blocks = (n + threads - 1) / threads;
        double *h, *hp, *d, *partial;
        CHECK(cudaMallocHost(&h, n * sizeof(double)));
        CHECK(cudaMallocHost(&hp, blocks * sizeof(double)));
        for (int i = 0; i < n; ++i) h[i] = (i % 7) * 0.5;
        CHECK(cudaMalloc(&d, n * sizeof(double)));
        CHECK(cudaMalloc(&partial, blocks * sizeof(double)));
        cudaStream_t stream;
        cudaEvent_t start, stop;
        CHECK(cudaStreamCreate(&stream));
        CHECK(cudaEventCreate(&start)); CHECK(cudaEventCreate(&stop));
        CHECK(cudaEventRecord(start, stream));
        CHECK(cudaMemcpyAsync(d, h, n * sizeof(double), cudaMemcpyHostToDevice, stream));
        blockSum<<<blocks, threads, threads * sizeof(double), stream>>>(d, partial, n);
        CHECK(cudaMemcpyAsync(hp, partial, blocks * sizeof(double), cudaMemcpyDeviceToHost, stream));
        CHECK(cudaEventRecord(stop, stream));
        CHECK(cudaStreamSynchronize(stream));
        float ms = -1;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        double sum = 0;
        for (int b = 0; b < blocks; ++b) sum += hp[b];
        int blocks_seen = 0;
        CHECK(cudaMemcpyFromSymbol(&blocks_seen, counter, sizeof(int)));
        printf("sum %.1f blocks %d elapsed %s\n", sum, blocks_seen, ms >= 0 ? "ok" : "negative");
        CHECK(cudaEventDestroy(start)); CHECK(cudaEventDestroy(stop));
        CHECK(cudaStreamDestroy(stream));
        CHECK(cudaFreeHost(h)); CHECK(cudaFreeHost(hp)); CHECK(cudaFree(d)); CHECK(cudaFree(partial));
    } else if (!strcmp(mode, "managed")) {
        float *x, *y;
        CHECK(cudaMallocManaged(&x, bytes)); CHECK(cudaMallocManaged(&y, bytes));
        for (int i = 0; i < n; ++i) { x[i] = 1.0f; y[i] = 2.0f; }
        addManaged<<<4, 64>>>(n, x, y);
        CHECK(cudaDeviceSynchronize());
        float err = 0;
        for (int i = 0; i < n; ++i) err = fmaxf(err, fabsf(y[i] - 3.0f));
        printf("max error %g\n", err);
        CHECK(cudaFree(x)); CHECK(cudaFree(y));
    } else if (!strcmp(mode, "badcopy")) {
        float* d; float h[4] = {0};
        CHECK(cudaMalloc(&d, 4 * sizeof(float)));
        CHECK(cudaMemcpy(d, h, 64 * sizeof(float), cudaMemcpyHostToDevice));
    } else if (!strcmp(mode, "nullcopy")) {
        float h[4] = {0};
        CHECK(cudaMemcpy(nullptr, h, sizeof h, cudaMemcpyHostToDevice));
    } else if (!strcmp(mode, "wild")) {
        float* d;
        CHECK(cudaMalloc(&d, 256));
        printf("before the kernel\n");
        wild<<<1, 32>>>(d);
        CHECK(cudaDeviceSynchronize());
        printf("not reached\n");
    } else if (!strcmp(mode, "hostread")) {
        float* d;
        CHECK(cudaMalloc(&d, 256));
        printf("%f\n", d[0]);
    } else if (!strcmp(mode, "badlaunch")) {
        float* d;
        CHECK(cudaMalloc(&d, 256));
        vecAdd<<<1, 2048>>>(d, d, d, 1);
        printf("launch: %s\n", cudaGetErrorString(cudaGetLastError()));
        printf("after: %s\n", cudaGetErrorString(cudaGetLastError()));
    } else if (!strcmp(mode, "streams")) {
        printf("to stdout\n");
        fprintf(stderr, "to stderr\n");
    } else if (!strcmp(mode, "props")) {
        cudaDeviceProp p; int count = 0;
        CHECK(cudaGetDeviceCount(&count)); CHECK(cudaSetDevice(0));
        CHECK(cudaGetDeviceProperties(&p, 0));
        printf("%d device(s): %s, compute capability %d.%d, %d SMs\n", count, p.name, p.major, p.minor,
               p.multiProcessorCount);
    } else {
        return atoi(mode);
    }
    return 0;
}
"""


# "An Even Easier Introduction to CUDA" and the Programming Guide's MatAdd, with
# iostream, <random>, a struct argument, __managed__ / __device__ variables and
# cooperative groups, unmodified.
TUTORIAL = r"""#include <iostream>
#include <math.h>
#include <vector>
#include <random>
#include <chrono>
#include <algorithm>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#define N 64
__managed__ int total;
__device__ float dev_table[4];

__global__ void MatAdd(float A[N][N], float B[N][N], float C[N][N]) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < N && j < N) C[i][j] = A[i][j] + B[i][j];
}

__global__ void add(int n, float *x, float *y) {
  int index = blockIdx.x * blockDim.x + threadIdx.x;
  int stride = blockDim.x * gridDim.x;
  for (int i = index; i < n; i += stride)
    y[i] = x[i] + y[i];
}

__global__ void warpSum(const int* in) {
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(cg::this_thread_block());
  int v = in[threadIdx.x];
  for (int o = 16; o > 0; o /= 2) v += tile.shfl_down(v, o);
  if (tile.thread_rank() == 0) atomicAdd(&total, v + (int)dev_table[0]);
}

struct Matrix { int width; float* elements; };
__global__ void scale(Matrix m, float s) { m.elements[threadIdx.x] *= s; }

int main(void)
{
  int n = 1<<16;
  float *x, *y;
  cudaMallocManaged(&x, n*sizeof(float));
  cudaMallocManaged(&y, n*sizeof(float));
  for (int i = 0; i < n; i++) { x[i] = 1.0f; y[i] = 2.0f; }
  int blockSize = 256;
  int numBlocks = (n + blockSize - 1) / blockSize;
  auto t0 = std::chrono::steady_clock::now();
  add<<<numBlocks, blockSize>>>(n, x, y);
  cudaDeviceSynchronize();
  float maxError = 0.0f;
  for (int i = 0; i < n; i++) maxError = fmax(maxError, fabs(y[i]-3.0f));
  std::cout << "Max error: " << maxError << std::endl;

  float (*A)[N], (*B)[N], (*C)[N];
  cudaMallocManaged(&A, N * N * sizeof(float)); cudaMallocManaged(&B, N * N * sizeof(float)); cudaMallocManaged(&C, N * N * sizeof(float));
  std::mt19937 gen(1); std::uniform_real_distribution<float> u(0, 1);
  for (int i = 0; i < N; ++i) for (int j = 0; j < N; ++j) { A[i][j] = u(gen); B[i][j] = u(gen); }
  dim3 threadsPerBlock(16, 16);
  dim3 numBlocks2(N / threadsPerBlock.x, N / threadsPerBlock.y);
  MatAdd<<<numBlocks2, threadsPerBlock>>>(A, B, C);
  cudaDeviceSynchronize();
  std::cout << "C ok: " << (C[3][5] == A[3][5] + B[3][5]) << std::endl;

  std::vector<int> h(64, 1);
  int* d; cudaMalloc(&d, 64 * sizeof(int));
  cudaMemcpy(d, h.data(), 64 * sizeof(int), cudaMemcpyHostToDevice);
  float table[4] = {10, 0, 0, 0};
  cudaMemcpyToSymbol(dev_table, table, sizeof table);
  total = 0;
  warpSum<<<1, 64>>>(d);
  cudaDeviceSynchronize();
  std::printf("total %d\n", total);
  Matrix m{4, x};
  scale<<<1, 4>>>(m, 0.5f);
  cudaDeviceSynchronize();
  printf("scaled %g\n", x[0]);
  (void)t0;
  return 0;
}
"""
TUTORIAL_OUTPUT = "Max error: 0\nC ok: 1\ntotal 84\nscaled 0.5\n"

def sim(source=TEXTBOOK, **kw):
    kw.setdefault("echo", False)
    return wb.program(source, backend="simulator", **kw)


# -- the textbook program on the simulator -----------------------------------------------
def test_vector_add_matches_numpy_and_prints_from_the_device():
    n = 700
    run = sim(args=["vadd", str(n)])
    lines = run.stdout.splitlines()
    assert lines[0] == f"device: n={n}"  # device printf, before the host's output
    got = np.array([float(v) for v in lines[1:]], dtype=np.float32)
    i = np.arange(n, dtype=np.float32)
    expected = np.sin(i) + np.float32(2) * np.cos(i)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert run.returncode == 0 and run.ok and run.build.backend == "simulator"
    assert "exit 0 on simulator" in repr(run) and "Program run" in run._repr_html_()
    assert f"<summary>stdout ({n + 1} lines)</summary>" in run._repr_html_()
    assert run.to_pandas().loc[0, "exit code"] == 0


def test_reduction_with_dynamic_shared_memory_streams_events_and_symbols():
    n = 5000
    run = sim(args=f"reduce {n}")
    expected = sum((i % 7) * 0.5 for i in range(n))
    assert run.stdout.strip() == f"sum {expected:.1f} blocks {(n + 127) // 128} elapsed ok"


def test_host_code_may_spell_gccs_noinline_attribute_as_newer_libstdcpp_does():
    source = r"""
    #include <cstdio>
    __attribute__((__noinline__)) static int twice(int x) { return 2 * x; }
    __device__ __noinline__ int thrice(int x) { return 3 * x; }
    __global__ void k(int* out) { *out = thrice(7); }
    int main() {
        int* d; cudaMalloc(&d, sizeof(int)); k<<<1, 1>>>(d);
        int h = 0; cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
        printf("%d %d\n", twice(h), h);
        return 0;
    }
    """
    assert sim(source).stdout == "42 21\n"


def test_a_tutorial_program_runs_unmodified():
    assert sim(TUTORIAL).stdout == TUTORIAL_OUTPUT


def test_managed_memory():
    assert sim(args=["managed", "10000"]).stdout.strip() == "max error 0"


def test_pitched_memory_and_2d_copies():
    source = r"""
    #include <cstdio>
    __global__ void inc(float* m, size_t pitch, int w, int h) {
        int x = threadIdx.x, y = blockIdx.x;
        if (x < w && y < h) ((float*)((char*)m + y * pitch))[x] += y * 10 + x;
    }
    int main() {
        const int w = 5, h = 3;
        float host[h][w] = {};
        float* d; size_t pitch;
        cudaMallocPitch(&d, &pitch, w * sizeof(float), h);
        cudaMemset2D(d, pitch, 0, w * sizeof(float), h);
        inc<<<h, 32>>>(d, pitch, w, h);
        cudaMemcpy2D(host, w * sizeof(float), d, pitch, w * sizeof(float), h, cudaMemcpyDeviceToHost);
        printf("pitch %zu, %g %g\n", pitch, host[2][4], host[1][0]);
        cudaError_t e = cudaMemcpy2D(host, w * sizeof(float), d, pitch, w * sizeof(float), h + 1,
                                     cudaMemcpyDeviceToHost);
        printf("%s\n", cudaGetErrorString(e));
    }
    """
    run = sim(source)
    assert run.stdout == "pitch 512, 24 10\ninvalid argument\n"


def test_host_threads_each_with_a_stream():
    source = r"""#include <cstdio>
#include <thread>
#include <vector>
__global__ void fill(int* a, int v) { a[blockIdx.x * blockDim.x + threadIdx.x] = v; }
int main() {
    const int T = 4, n = 1 << 14;
    std::vector<std::thread> ts;
    std::vector<long> sums(T);
    for (int t = 0; t < T; ++t) ts.emplace_back([&, t] {
        cudaStream_t s; cudaStreamCreate(&s);
        int* d; cudaMalloc(&d, n * sizeof(int));
        std::vector<int> h(n);
        for (int r = 0; r < 20; ++r) {
            fill<<<n / 256, 256, 0, s>>>(d, t + 1);
            cudaMemcpyAsync(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost, s);
            cudaStreamSynchronize(s);
        }
        long sum = 0; for (int x : h) sum += x; sums[t] = sum;
        cudaFree(d); cudaStreamDestroy(s);
    });
    for (auto& t : ts) t.join();
    for (int t = 0; t < T; ++t) printf("%ld\n", sums[t] / n);
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
"""
    assert sim(source).stdout == "1\n2\n3\n4\nno error\n"


def test_device_properties_are_the_virtual_devices():
    out = sim(args=["props"]).stdout
    # the active simulator's device, or on a GPU machine a simulated twin of the GPU
    b = wb.backend()
    props = b.device_properties() if b.simulated else virtual_device(b.device_properties())
    major, minor = props.compute_capability
    assert (f"1 device(s): {props.name} (simulated), compute capability {major}.{minor}, "
            f"{props.multiprocessors} SMs") in out


def test_output_is_streamed_to_stdout_and_stderr_apart(capsys):
    run = sim(args=["streams"], echo=True)
    captured = capsys.readouterr()
    assert captured.out == "to stdout\n" and captured.err == "to stderr\n"
    assert run.stdout == "to stdout\n" and run.stderr == "to stderr\n"


def test_a_non_zero_exit_raises_with_its_code_unless_unchecked():
    with pytest.raises(wb.ProgramError, match="exited with code 7") as info:
        sim(args=["7"])
    assert info.value.returncode == 7 and info.value.fault is None
    assert sim(args=["7"], check=False).returncode == 7


def test_a_bad_cudaMemcpy_is_an_error_the_program_sees():
    with pytest.raises(wb.ProgramError) as info:
        sim(args=["badcopy"])
    err = info.value
    assert err.returncode == 1
    assert "CUDA error: invalid argument" in err.stderr  # the program's own check
    assert "run past the end of its allocation" in err.stderr  # the simulator says why
    with pytest.raises(wb.ProgramError, match="invalid argument"):
        sim(args=["nullcopy"])


def test_a_faulting_kernel_ends_the_program_with_where_and_what():
    with pytest.raises(wb.ProgramError, match="faulted on the simulator") as info:
        sim(args=["wild"])
    err = info.value
    assert "kernel 'wild' faulted in block (0,0,0), thread (0,0,0)" in err.fault
    assert "outside every allocation" in err.fault and "cudaErrorIllegalAddress" in err.fault
    assert err.stdout == "before the kernel\n"  # output before the fault is kept


def test_host_code_reading_device_memory_faults_as_on_a_gpu():
    with pytest.raises(wb.ProgramError) as info:
        sim(args=["hostread"])
    assert "host code" in info.value.fault and "cudaMemcpy" in info.value.fault


def test_an_invalid_launch_sets_the_last_error_once():
    run = sim(args=["badlaunch"])
    assert run.stdout.splitlines() == ["launch: invalid configuration argument", "after: no error"]
    assert "2048 threads" in run.stderr


def test_the_build_is_cached():
    first = wb.programs.build_program(TEXTBOOK + "\n// cache test\n", backend="simulator")
    second = wb.programs.build_program(TEXTBOOK + "\n// cache test\n", backend="simulator")
    assert second.cache_hit and second.executable == first.executable
    other = wb.programs.build_program(TEXTBOOK + "\n// cache test\n", backend="simulator", options="-DOTHER=1")
    assert not other.cache_hit or other.executable != first.executable


def test_a_kernel_that_never_ends_is_stopped_with_where_it_spins():
    source = """
    __global__ void spin(volatile int* flag) { while (flag[0] == 0) {} }
    int main() { int* f; cudaMalloc(&f, 4); cudaMemset(f, 0, 4); spin<<<1, 1>>>(f);
                 cudaDeviceSynchronize(); return 0; }
    """
    with pytest.raises(wb.ProgramError) as info:
        sim(source, timeout=2)
    assert "spin" in info.value.fault and "time limit" in info.value.fault


def test_a_program_past_its_time_limit_is_stopped():
    source = "#include <unistd.h>\nint main() { for (;;) sleep(1); }\n"
    with pytest.raises(wb.ProgramError, match="did not finish within 1 s") as info:
        sim(source, timeout=1)
    assert info.value.timed_out


# -- the build: options, several files, what the simulator lacks ----------------------------
def test_options_reach_the_simulator_build():
    source = """
    #include <cstdio>
    #include <omp.h>
    int main() {
        int hits = 0;
        #pragma omp parallel for reduction(+:hits)
        for (int i = 0; i < 100; ++i) hits += 1;
        printf("%d %s %d\\n", SCALE * 2, GREETING, hits);
    }
    """
    run = sim(source, options='-O3 -DSCALE=21 "-DGREETING=\\"hi there\\"" -Xcompiler -fopenmp -lineinfo '
                             '-arch=sm_90 -std=c++20')
    assert run.stdout == "42 hi there 100\n"


def test_defines_as_a_dict_are_written_as_c_literals_after_the_options():
    source = """
    #include <cstdio>
    int main() { printf("%d %.3f %s %d\\n", WIDTH, SCALE, NAME, FLAG); }
    """
    run = wb.program(source, backend="simulator", options="-O2", echo=False,
                     defines={"WIDTH": 512, "SCALE": 0.25, "NAME": '"vadd"', "FLAG": True})
    assert run.stdout == "512 0.250 vadd 1\n"  # (a dict read as its names: WIDTH=1, SCALE=1)
    with pytest.raises(wb.errors.DefinesError, match="'WIDTH'.*list"):
        wb.program(source, backend="simulator", defines={"WIDTH": [512]}, echo=False)


def test_several_files_in_one_build():
    wb.programs.add_file("vec.cuh", "#pragma once\n__device__ inline float twice(float x) { return 2 * x; }\n"
                                    "void fill(float* d, int n);\n")
    wb.programs.add_file("fill.cu", '#include "vec.cuh"\n'
                                    "__global__ void k(float* d, int n) { int i = threadIdx.x;"
                                    " if (i < n) d[i] = twice(i); }\n"
                                    "void fill(float* d, int n) { k<<<1, 32>>>(d, n); }\n")
    try:
        main = ('#include <cstdio>\n#include "vec.cuh"\n'
                "int main() { float* d; cudaMallocManaged(&d, 8 * sizeof(float)); fill(d, 8);"
                " cudaDeviceSynchronize(); printf(\"%g\\n\", d[7]); }\n")
        assert sim(main, files=["fill.cu"]).stdout == "14\n"
        with pytest.raises(ValueError, match="no stored file 'missing.cu'"):
            sim(main, files=["missing.cu"])
    finally:
        wb.programs.remove_file("vec.cuh")
        wb.programs.remove_file("fill.cu")


def test_an_unsupported_runtime_call_fails_at_build_time_with_its_name():
    source = "int main() {\n    cudaKernelNodeParams params;\n    cudaGraphExecUpdate(0, 0, 0);\n}\n"
    with pytest.raises(wb.CompileError) as info:
        sim(source, line_offset=1)
    messages = {d.line: d.message for d in info.value.errors}
    assert "cudaGraphExecUpdate is not supported by the simulator's program runtime" in messages[4]
    assert "supported: " in messages[4] and "cudaMemcpyAsync" in messages[4]
    assert "cudaKernelNodeParams is not supported" in messages[3]


def test_cuda_libraries_are_refused_on_the_simulator():
    with pytest.raises(wb.CompileError, match="curand"):
        sim("int main() {}", options="-lcurand")
    with pytest.raises(wb.CompileError, match="cuBLAS is not available to programs on the simulator"):
        sim("#include <cublas_v2.h>\nint main() {}")


def test_supported_api_lists_the_runtime_and_no_macros():
    names = supported_api()
    assert {"cudaMalloc", "cudaMemcpyAsync", "cudaEventElapsedTime", "cudaStreamCreate",
            "cudaMemcpyToSymbol", "cudaGetDeviceProperties"} <= set(names)
    assert "cudaStreamLegacy" not in names


def test_launch_syntax_rewrite_keeps_lines_and_handles_templates_and_nesting():
    src = ("ns::k<float, (4 > 2)>  <<< dim3(f(a, b), 1), g<int>(2), 0, s >>>(x, h(y, z),\n"
           "   Pair{1, 2});\n"
           "// not a launch: k<<<1, 1>>>(x);\n"
           'const char* s = "k<<<1,1>>>()";\n'
           "(*fp)<<<1, 1>>>();\n")
    out = rewrite_launches(src)
    assert out.count("\n") == src.count("\n")
    first, second, comment, text, pointer = out.split("\n")[:5]
    assert first.startswith('__wbsim_launch_program("ns::k<float, (4 > 2)>", '
                            "__wbsim_cfg( dim3(f(a, b), 1), g<int>(2), 0, s ), "
                            "[&](auto... __wbsim_a) { ns::k<float, (4 > 2)>  (__wbsim_a...); }, x, h(y, z),")
    assert second == "   Pair{1, 2});"
    assert comment == "// not a launch: k<<<1, 1>>>(x);" and text == 'const char* s = "k<<<1,1>>>()";'
    assert pointer == ('__wbsim_launch_program("(*fp)", __wbsim_cfg(1, 1), '
                       "[&](auto... __wbsim_a) { (*fp)(__wbsim_a...); });")


# -- options and the toolkit -----------------------------------------------------------------
def test_option_parsing():
    o = parse_options("-O3 -lcurand -lcublas -std=c++20 -Xcompiler -fopenmp -I include -DN=4 "
                      "'-DMSG=hello world' -lineinfo --use_fast_math --gpu-architecture sm_80")
    assert o.nvcc_args() == ["-O3", "-lcurand", "-lcublas", "-std=c++20", "-Xcompiler", "-fopenmp",
                             "-Iinclude", "-DN=4", "-DMSG=hello world", "-lineinfo", "-use_fast_math",
                             "-arch=sm_80"]
    assert o.libraries == ("curand", "cublas") and o.std == "c++20" and o.arch_given
    assert o.defines == ("N=4", "MSG=hello world")
    compile_flags, link_flags = o.gxx_args()
    assert compile_flags == ["-O3", "-fopenmp", "-Iinclude"]  # no GPU-only options, no -D/-std
    assert link_flags == ["-lcurand", "-lcublas", "-fopenmp"]
    # a list is taken as it is, one argument each
    assert parse_options(["-DX=a b", "-O2"]).nvcc_args() == ["-DX=a b", "-O2"]
    for written in ("-gencode=arch=compute_90,code=sm_90", "-gencode arch=compute_90,code=sm_90"):
        o = parse_options(written)
        assert o.arch_given and o.nvcc_args() == ["-gencode", "arch=compute_90,code=sm_90"]


@pytest.mark.parametrize("bad, words", [("-I", "needs a value"), ("-o prog", "leave out -o"),
                                        ("main.cu", "not an option"), ("'-O3", "cannot split")])
def test_bad_options_say_what_to_do(bad, words):
    with pytest.raises(ProgramOptionError, match=words):
        parse_options(bad)


@pytest.mark.parametrize("toolkit, driver, verdict", [
    ((13, 0), (13, 0), "ok"), ((12, 4), (13, 0), "ok"), ((12, 8), (12, 4), "sass-only"),
    ((13, 1), (13, 0), "sass-only"), ((13, 0), (12, 8), "incompatible"), (None, (13, 0), "unknown"),
    ((13, 0), None, "unknown")])
def test_toolkit_newer_than_the_driver(toolkit, driver, verdict):
    check = check_toolkit(toolkit, driver)
    assert check.verdict == verdict
    assert check.runs == (verdict != "incompatible")
    if verdict == "incompatible":
        assert "Update the NVIDIA driver" in check.message and "WORKBENCH_NVCC" in check.message
    if verdict == "sass-only":
        assert "code=sm_XY" in check.message and "unsupported toolchain" in check.message


# -- nvcc: the build here, everything on a GPU ------------------------------------------------
@needs_nvcc
def test_nvcc_builds_for_the_architecture_given_and_caches():
    built = wb.programs.build_program(TEXTBOOK, backend="gpu", options="-O2 -arch=sm_90")
    assert built.executable.exists() and built.compiler.startswith("nvcc")
    assert built.cache_hit or "-arch=sm_90" in built.command
    again = wb.programs.build_program(TEXTBOOK, backend="gpu", options="-O2 -arch=sm_90")
    assert again.cache_hit and again.executable == built.executable


@needs_nvcc
def test_nvcc_errors_land_on_the_cells_lines():
    source = "int main() {\n    int x = undefined_name;\n}\n"
    with pytest.raises(wb.CompileError) as info:
        wb.programs.build_program(source, backend="gpu", options="-arch=sm_90", line_offset=1)
    (d,) = info.value.errors
    assert d.line == 3 and "undefined_name" in d.message and info.value.compiler == "nvcc"


def gpu_run(**kw):
    kw.setdefault("echo", False)
    return wb.program(TEXTBOOK, backend="gpu", **kw)


@pytest.mark.gpu
@needs_nvcc
def test_gpu_textbook_programs():
    n = 700
    lines = gpu_run(args=["vadd", str(n)]).stdout.splitlines()
    assert lines[0] == f"device: n={n}"
    got = np.array([float(v) for v in lines[1:]], dtype=np.float32)
    i = np.arange(n, dtype=np.float32)
    np.testing.assert_allclose(got, np.sin(i) + 2 * np.cos(i), rtol=1e-5, atol=1e-5)
    expected = sum((i % 7) * 0.5 for i in range(5000))
    assert gpu_run(args="reduce 5000").stdout.strip() == f"sum {expected:.1f} blocks 40 elapsed ok"
    assert gpu_run(args="managed 10000").stdout.strip() == "max error 0"
    assert wb.program(TUTORIAL, backend="gpu", echo=False).stdout == TUTORIAL_OUTPUT
    run = gpu_run(args=["props"])
    assert run.build.arch and run.build.toolkit is not None and run.build.toolkit.runs
    cc = wb.backend().device_properties().compute_capability
    assert f"compute capability {cc[0]}.{cc[1]}" in run.stdout


@pytest.mark.gpu
@needs_nvcc
def test_gpu_program_errors():
    with pytest.raises(wb.ProgramError) as info:
        gpu_run(args=["nullcopy"])
    assert "invalid argument" in info.value.stderr
    with pytest.raises(wb.ProgramError) as info:
        gpu_run(args=["wild"])
    # (which words depends on where the wild address points)
    assert ("illegal memory access" in info.value.stderr
            or "operation not supported on global/shared address space" in info.value.stderr)
    run = gpu_run(args=["badlaunch"])  # CUDA 13 says "invalid argument", older CUDA as the simulator
    launch, after = run.stdout.splitlines()
    assert launch in ("launch: invalid argument", "launch: invalid configuration argument")
    assert after == "after: no error"


@pytest.mark.gpu
@needs_nvcc
def test_gpu_magic_runs_a_program_through_nvcc(shell, capsys):
    cell = ("%%cuda_program --backend gpu -O2 -- 3\n#include <cstdio>\n"
            "__global__ void hi(int n) { if (threadIdx.x < n) printf(\"thread %d\\n\", threadIdx.x); }\n"
            "int main(int argc, char** argv) { hi<<<1, 32>>>(atoi(argv[1]));\n"
            "  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1; }\n")
    result = shell.run_cell(cell)
    assert result.success, result.error_in_exec
    assert sorted(capsys.readouterr().out.splitlines()) == ["thread 0", "thread 1", "thread 2"]


# -- the magic --------------------------------------------------------------------------------
def test_magic_runs_a_program_with_arguments_and_streams_its_output(shell, capsys):
    cell = "%%cuda_program --backend simulator -DGREETING=42 -- first 'second arg'\n" + \
           '#include <cstdio>\nint main(int argc, char** argv) {\n' \
           '    printf("%d %s|%s\\n", GREETING, argv[1], argv[2]);\n    fprintf(stderr, "err\\n");\n}\n'
    result = shell.run_cell(cell)
    assert result.success, result.error_in_exec
    captured = capsys.readouterr()
    assert "42 first|second arg\n" in captured.out and "err\n" in captured.err


def test_magic_stores_files_and_fails_the_cell_on_errors(shell, capsys):
    try:
        assert shell.run_cell("%%cuda_program --name magic_twice.cuh\n"
                              "inline int twice(int x) { return 2 * x; }\n").success
        assert "stored magic_twice.cuh" in capsys.readouterr().out
        ok = shell.run_cell('%%cuda_program --backend simulator --out last_run\n#include <cstdio>\n'
                            '#include "magic_twice.cuh"\nint main() { printf("%d\\n", twice(21)); }\n')
        assert ok.success and shell.user_ns["last_run"].stdout == "42\n"
        failed = shell.run_cell("%%cuda_program --backend simulator\nint main() { return 3; }\n")
        assert isinstance(failed.error_in_exec, wb.ProgramError)
        assert failed.error_in_exec.returncode == 3
        broken = shell.run_cell("%%cuda_program --backend simulator\nint main() {\n  return x;\n}\n")
        err = broken.error_in_exec
        assert isinstance(err, wb.CompileError) and err.errors[0].line == 3  # the magic line is 1
    finally:
        wb.programs.remove_file("magic_twice.cuh")


def test_magic_line_splitting():
    from workbench.ipython.program_magic import split_line
    own, compiler, args = split_line("--timeout 5 -O3 -lcurand --args '-n 5' -Xcompiler -fopenmp -- a b")
    assert own == ["--timeout=5", "--args=-n 5"]
    assert compiler == ["-O3", "-lcurand", "-Xcompiler", "-fopenmp"]
    assert args == ["a", "b"]


def test_magic_line_mistakes_say_what_is_wrong():
    from workbench.ipython.program_magic import split_line
    with pytest.raises(ProgramOptionError, match="close the quote"):
        split_line("--args 'unclosed -O3")
    with pytest.raises(ProgramOptionError, match="did you mean --timeout.*--build-only"):
        split_line("--timout 5 -O3")
    with pytest.raises(ProgramOptionError, match="did you mean --build-only"):
        split_line("--build_only")
    own, compiler, _ = split_line("--use_fast_math --gpu-architecture=sm_90 --extra-device-vectorization")
    assert own == [] and compiler[0] == "--use_fast_math"


def test_xcompiler_with_several_flags_in_one_value_builds_on_the_simulator():
    o = parse_options('-Xcompiler "-Wall -Wextra" -Xcompiler -fopenmp,-O1 -Xlinker "-rpath,/opt/x"')
    compile_flags, link_flags = o.gxx_args()
    assert compile_flags == ["-Wall", "-Wextra", "-fopenmp", "-O1"]
    assert link_flags == ["-fopenmp", "-Wl,-rpath", "-Wl,/opt/x"]
    source = "#include <cstdio>\nint main() { int unused; printf(\"built\\n\"); return 0; }\n"
    assert sim(source, options='-Xcompiler "-Wall -Wextra"').stdout == "built\n"
    with pytest.raises(wb.CompileError, match="unused"):  # both flags reached g++
        sim(source, options='-Xcompiler "-Wall -Werror"')
