"""NVRTC checks without a GPU: errors and warnings are NVRTC's own, name
expressions resolve, headers are found, and the resource figures are ptxas's."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from workbench.backends import nvrtc
from workbench.backends.nvrtc import bindings
from workbench.backends.contract import CompileFailed, CompileOptions

if not nvrtc.nvrtc_available():
    pytest.skip("NVRTC is not installed (pip install cuda-bindings nvidia-cuda-nvrtc)",
                allow_module_level=True)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test gets an empty cache of its own, never the user's."""
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("WORKBENCH_NVRTC_CACHE", raising=False)
    return tmp_path / "nvrtc"


RESOURCE_KERNELS = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void reverse_block(float* x) {
    __shared__ float tile[1024];                       // 4 KiB
    tile[threadIdx.x] = x[blockIdx.x * 1024 + threadIdx.x];
    __syncthreads();
    x[blockIdx.x * 1024 + threadIdx.x] = tile[1023 - threadIdx.x];
}

__device__ __forceinline__ float mix96(const float* in) {
    float acc[96];
    #pragma unroll
    for (int k = 0; k < 96; ++k) acc[k] = in[threadIdx.x + k * 1024];
    #pragma unroll
    for (int r = 0; r < 8; ++r)
        #pragma unroll
        for (int k = 0; k < 96; ++k) acc[k] = acc[k] * acc[(k + r + 1) % 96] + 1.0f;
    float s = 0.0f;
    #pragma unroll
    for (int k = 0; k < 96; ++k) s += acc[k];
    return s;
}

extern "C" __global__ void __launch_bounds__(1024) many_live_values(const float* in, float* out) {
    out[threadIdx.x] = mix96(in);
}

extern "C" __global__ void many_live_values_unbounded(const float* in, float* out) {
    out[threadIdx.x] = mix96(in);
}

__constant__ float coefficients[64];                   // 256 bytes

extern "C" __global__ void __launch_bounds__(256) polynomial(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = 0.0f;
    for (int k = 63; k >= 0; --k) v = v * x[i] + coefficients[k];
    y[i] = v;
}
"""
RESOURCE_NAMES = ["saxpy", "reverse_block", "many_live_values", "many_live_values_unbounded", "polynomial"]


@pytest.fixture(scope="module")
def resource_result():
    return nvrtc.check_with_nvrtc(RESOURCE_KERNELS, CompileOptions(), RESOURCE_NAMES)


def test_version_is_major_dot_minor():
    assert re.fullmatch(r"\d+\.\d+", nvrtc.nvrtc_version())


def test_compile_error_reports_nvrtc_log_on_the_right_line():
    source = 'extern "C" __global__ void k(float* x) {\n    int i = threadIdx.x;\n    x[i] = undefined_name;\n}\n'
    with pytest.raises(CompileFailed) as info:
        nvrtc.check_with_nvrtc(source, CompileOptions(), ["k"])
    failure = info.value
    assert failure.compiler == "NVRTC"
    assert failure.line_shift == 0
    assert re.search(rf"^{re.escape(nvrtc.PROGRAM_NAME)}\(3\): error: .*undefined_name", failure.log, re.M)


def test_bad_option_fails_with_nvrtcs_message():
    with pytest.raises(CompileFailed, match="--no-such-option"):
        nvrtc.check_with_nvrtc('extern "C" __global__ void k() {}',
                               CompileOptions(extra=("--no-such-option",)), ["k"])


def test_warning_is_kept_in_log_without_ptxas_report():
    source = 'extern "C" __global__ void k(float* x) {\n    int unused;\n    x[0] = 1.0f;\n}\n'
    result = nvrtc.check_with_nvrtc(source, CompileOptions(), ["k"])
    assert re.search(rf"^{re.escape(nvrtc.PROGRAM_NAME)}\(2\): warning.*\"unused\"", result.log, re.M)
    assert "ptxas info" not in result.log
    # the report was still read, as for the same kernel without the warning
    quiet = nvrtc.check_with_nvrtc(source.replace("    int unused;\n", ""), CompileOptions(), ["k"])
    assert "warning" not in quiet.log and result.resources["k"] == quiet.resources["k"]


def test_template_name_expression_resolves_to_its_kernel():
    source = ("template <typename T>\n"
              "__global__ void scale(T* x, T a, int n) {\n"
              "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
              "    if (i < n) x[i] *= a;\n}\n")
    options = CompileOptions(name_expressions=("scale<float>", "scale<double>"))
    result = nvrtc.check_with_nvrtc(source, options, [])
    assert result.lowered_names == {"scale<float>": "_Z5scaleIfEvPT_S0_i",
                                    "scale<double>": "_Z5scaleIdEvPT_S0_i"}
    for mangled in result.lowered_names.values():
        assert f".entry {mangled}(" in result.ptx
    assert set(result.resources) == {"scale<float>", "scale<double>"}
    # each instantiation's figures are those of the same body written for its type
    for_double = source.replace("template <typename T>\n", "typedef double T;\n").replace(
        "__global__ void scale(", 'extern "C" __global__ void scale_double(')
    plain = nvrtc.check_with_nvrtc(for_double, CompileOptions(), ["scale_double"])
    assert result.resources["scale<double>"] == plain.resources["scale_double"]


def test_defines_and_arch_reach_nvrtc():
    source = ('#if !defined(TILE) || TILE != 32\n#error TILE must be 32\n#endif\n'
              'extern "C" __global__ void k(float* x) { x[0] = TILE; }\n')
    result = nvrtc.check_with_nvrtc(source, CompileOptions(defines=("TILE=32",), arch="sm_80"), ["k"])
    assert result.arch == "sm_80"
    assert ".target sm_80" in result.ptx
    assert nvrtc.check_with_nvrtc(source, CompileOptions(defines=("TILE=32",)), ["k"],
                                  arch="compute_90").arch == "sm_90"
    with pytest.raises(CompileFailed, match="TILE must be 32"):
        nvrtc.check_with_nvrtc(source, CompileOptions(), ["k"])


def test_known_resource_figures(resource_result):
    r = resource_result.resources
    assert set(r) == set(RESOURCE_NAMES)
    assert r["reverse_block"].shared_bytes == 4096
    assert r["saxpy"].shared_bytes == 0
    assert r["polynomial"].const_bytes == 256
    # __launch_bounds__(1024) caps registers at 64 per thread: 96 live floats must spill.
    heavy = r["many_live_values"]
    assert heavy.registers <= 64
    assert heavy.spill_stores > 0 and heavy.local_bytes > 0
    assert heavy.max_threads_per_block == 1024
    assert r["polynomial"].max_threads_per_block == 256
    # Without the bound the same code keeps its values in registers, so fewer threads fit a block.
    free = r["many_live_values_unbounded"]
    assert free.registers > 64 and free.spill_stores == 0
    assert free.max_threads_per_block < 1024
    assert all(k.arch == "sm_90" for k in r.values())


def test_max_threads_per_block_is_limited_by_the_register_file():
    # 64 K registers per block, allocated per warp in units of 256.
    assert nvrtc.max_threads_per_block(255) == 256
    assert nvrtc.max_threads_per_block(128) == 512
    assert nvrtc.max_threads_per_block(72) == 896
    assert nvrtc.max_threads_per_block(64) == 1024
    assert nvrtc.max_threads_per_block(32, thread_limit=128) == 128


def _ptxas():
    path = shutil.which("ptxas")
    if path:
        return path
    try:
        from cuda.pathfinder import find_nvidia_binary_utility  # lazy: optional package
        return find_nvidia_binary_utility("ptxas")
    except Exception:
        return None


def _run_ptxas(ptxas, ptx_path, cubin_path):
    """ptxas -v on the PTX; an older ptxas gets the PTX with its own .version."""
    cmd = [ptxas, "-v", "-arch=sm_90", str(ptx_path), "-o", str(cubin_path)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    supported = re.search(r"Unsupported \.version \S+; current version is '([\d.]+)'", run.stderr)
    if run.returncode and supported:
        text = ptx_path.read_text()
        ptx_path.write_text(re.sub(r"^\.version .*$", f".version {supported.group(1)}", text, flags=re.M))
        run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stderr + run.stdout


def test_resources_match_ptxas_v(resource_result, tmp_path):
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("ptxas is not installed (CUDA toolkit or nvidia-cuda-nvcc wheel)")
    ptx_path = tmp_path / "kernels.ptx"
    ptx_path.write_text(resource_result.ptx)
    report = _run_ptxas(ptxas, ptx_path, tmp_path / "kernels.cubin")
    # Read ptxas's own report independently of the module's parser.
    blocks = re.split(r"Compiling entry function ", report)[1:]
    assert sorted(re.match(r"'([^']+)'", block).group(1) for block in blocks) == sorted(RESOURCE_NAMES)
    for block in blocks:
        name = re.match(r"'([^']+)'", block).group(1)
        ours = resource_result.resources[name]
        assert int(re.search(r"Used (\d+) registers", block).group(1)) == ours.registers, name
        smem = re.search(r"(\d+) bytes smem", block)
        assert (int(smem.group(1)) if smem else 0) == ours.shared_bytes, name
        assert int(re.search(r"(\d+) bytes stack frame", block).group(1)) == ours.local_bytes, name
        assert int(re.search(r"(\d+) bytes spill stores", block).group(1)) == ours.spill_stores, name
        assert int(re.search(r"(\d+) bytes spill loads", block).group(1)) == ours.spill_loads, name


def _require_headers():
    if not nvrtc.nvrtc_include_dirs():
        pytest.skip("no CUDA headers found: pip install nvidia-cuda-runtime nvidia-cuda-cccl "
                    "(or install the CUDA toolkit)")


def test_cuda_fp16_and_math_constants_compile():
    _require_headers()
    source = ("#include <cuda_fp16.h>\n#include <math_constants.h>\n"
              'extern "C" __global__ void halve(__half* x, int n) {\n'
              "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
              "    if (i < n) x[i] = __hmul(x[i], __float2half(0.5f * CUDART_PI_F));\n}\n")
    result = nvrtc.check_with_nvrtc(source, CompileOptions(), ["halve"])
    assert set(result.resources) == {"halve"}
    assert re.search(r"\bmul(\.rn)?\.f16\b", result.ptx), "cuda_fp16.h's __hmul: a half multiply"


def test_cooperative_groups_compile():
    _require_headers()
    source = ("#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
              'extern "C" __global__ void block_sum(const float* x, float* out) {\n'
              "    __shared__ float partial[256];\n"
              "    cg::thread_block block = cg::this_thread_block();\n"
              "    partial[block.thread_rank()] = x[block.thread_rank()];\n"
              "    block.sync();\n"
              "    if (block.thread_rank() == 0) { float s = 0; for (int k = 0; k < 256; ++k) s += partial[k]; *out = s; }\n}\n")
    result = nvrtc.check_with_nvrtc(source, CompileOptions(), ["block_sum"])
    assert result.resources["block_sum"].shared_bytes == 1024


@pytest.mark.parametrize("header, prefix", [("cstdint", "std::"), ("stdint.h", "")])
def test_stdint_headers_are_supplied(header, prefix):
    source = (f"#include <{header}>\n"
              f'extern "C" __global__ void k({prefix}uint64_t* x, {prefix}int8_t s) {{ x[0] = UINT32_MAX + s; }}\n')
    assert "k" in nvrtc.check_with_nvrtc(source, CompileOptions(), ["k"]).resources


def test_results_are_cached_on_disk(private_cache):
    source = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n'
    first = nvrtc.check_with_nvrtc(source, CompileOptions(), ["k"])
    second = nvrtc.check_with_nvrtc(source, CompileOptions(), ["k"])
    assert not first.cache_hit and second.cache_hit
    assert second.resources == first.resources and second.cubin == first.cubin
    assert list(private_cache.glob("*/*.json"))
    other_arch = nvrtc.check_with_nvrtc(source, CompileOptions(arch="sm_80"), ["k"])
    assert not other_arch.cache_hit and other_arch.arch == "sm_80"
    bad = 'extern "C" __global__ void k() { nope; }\n'
    for _ in range(2):  # a cached failure still fails, with the same log
        with pytest.raises(CompileFailed, match=r"\(1\): error"):
            nvrtc.check_with_nvrtc(bad, CompileOptions(), ["k"])
    assert nvrtc.clear_cache() == 3


def test_cache_can_be_turned_off(private_cache, monkeypatch):
    monkeypatch.setenv("WORKBENCH_NVRTC_CACHE", "0")
    source = 'extern "C" __global__ void k(float* x) { x[0] = 3.0f; }\n'
    nvrtc.check_with_nvrtc(source, CompileOptions(), ["k"])
    assert not nvrtc.check_with_nvrtc(source, CompileOptions(), ["k"]).cache_hit
    assert not list(private_cache.glob("*/*.json"))


def test_cupy_wrapper_gives_the_same_figures(resource_result):
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy is not installed")
    flags = ["--gpu-architecture=sm_90", "-Xptxas=-v"]
    ok, log, ptx, cubin, _ = bindings.CupyNvrtc().compile(RESOURCE_KERNELS, flags, (), nvrtc.BUILTIN_HEADERS)
    assert ok
    _, report = nvrtc.parse_ptxas_report(log)
    report = report or nvrtc.cubin_resources(cubin)  # an NVRTC that prints no ptxas report
    for name in RESOURCE_NAMES:
        assert report[name]["registers"] == resource_result.resources[name].registers


def test_the_cubin_gives_what_ptxas_reports(resource_result):
    """What a log without ptxas's report (a hit in NVRTC's own cache) still tells, from the cubin."""
    figures = nvrtc.cubin_resources(resource_result.cubin)
    for name in RESOURCE_NAMES:
        r = resource_result.resources[name]
        f = figures[name]
        assert (f["registers"], f["stack"], f["smem"], f["spill_stores"], f["spill_loads"]) == \
            (r.registers, r.local_bytes, r.shared_bytes, r.spill_stores, r.spill_loads), name


LOCAL_MEMORY_KERNELS = r"""
extern "C" __global__ void local_array(const int* idx, float* out) {
    float a[64];                                       // indexed at run time: a frame, no spill
    for (int k = 0; k < 64; ++k) a[idx[k]] = out[k * 32 + threadIdx.x];
    out[threadIdx.x] = a[idx[threadIdx.x]] + a[idx[threadIdx.x + 1]];
}

extern "C" __global__ void __launch_bounds__(1024) spills_doubles(const double* in, double* out) {
    double acc[64];
    #pragma unroll
    for (int k = 0; k < 64; ++k) acc[k] = in[threadIdx.x + k * 1024];
    #pragma unroll
    for (int r = 0; r < 4; ++r)
        #pragma unroll
        for (int k = 0; k < 64; ++k) acc[k] = acc[k] * acc[(k + r + 1) % 64] + 1.0;
    double s = 0.0;
    #pragma unroll
    for (int k = 0; k < 64; ++k) s += acc[k];
    out[threadIdx.x] = s;
}
"""


def test_the_cubins_spill_figures_leave_local_arrays_out():
    result = nvrtc.check_with_nvrtc(LOCAL_MEMORY_KERNELS, CompileOptions(), ["local_array", "spills_doubles"])
    array, doubles = result.resources["local_array"], result.resources["spills_doubles"]
    assert array.local_bytes >= 256 and array.spill_stores == 0
    assert doubles.spill_stores > 0 and doubles.spill_stores % 8 == 0  # 64-bit spills
    figures = nvrtc.cubin_resources(result.cubin)
    for name, r in result.resources.items():
        f = figures[name]
        assert (f["stack"], f["spill_stores"], f["spill_loads"]) == \
            (r.local_bytes, r.spill_stores, r.spill_loads), name


def test_a_repeated_compile_still_has_ptxas_report(monkeypatch):
    """NVRTC's own cache (12.9 and later) skips ptxas and its report on a hit; the check turns it off."""
    from workbench.backends.nvrtc import check
    monkeypatch.setenv("WORKBENCH_NVRTC_CACHE", "0")
    monkeypatch.setattr(check, "cubin_resources", lambda cubin: {})
    first, again = (nvrtc.check_with_nvrtc(RESOURCE_KERNELS, CompileOptions(), RESOURCE_NAMES)
                    for _ in range(2))
    assert set(again.resources) == set(RESOURCE_NAMES)
    assert again.resources == first.resources


def test_resources_are_known_without_ptxas_report(monkeypatch, resource_result):
    from workbench.backends.nvrtc import check
    monkeypatch.setenv("WORKBENCH_NVRTC_CACHE", "0")
    monkeypatch.setattr(check, "parse_ptxas_report", lambda log: (log, {}))
    silent = nvrtc.check_with_nvrtc(RESOURCE_KERNELS, CompileOptions(), RESOURCE_NAMES)
    for name in RESOURCE_NAMES:
        ours, ptxas = silent.resources[name], resource_result.resources[name]
        assert (ours.registers, ours.local_bytes, ours.shared_bytes) == \
            (ptxas.registers, ptxas.local_bytes, ptxas.shared_bytes), name


def test_result_repr_and_table(resource_result):
    assert "reverse_block" in repr(resource_result) and "sm_90" in repr(resource_result)
    table = resource_result.to_pandas()
    assert list(table["kernel"]) == RESOURCE_NAMES
    assert table.set_index("kernel").loc["reverse_block", "shared_bytes"] == 4096


@pytest.mark.gpu
def test_figures_match_the_driver_on_a_gpu():
    """The driver's own attributes of the same source, compiled by CuPy, for the GPU's arch."""
    import cupy  # lazy: only on a GPU, where CuPy is installed
    arch = f"sm_{cupy.cuda.Device().compute_capability}"  # "90" on an H100
    ours = nvrtc.check_with_nvrtc(RESOURCE_KERNELS, CompileOptions(), RESOURCE_NAMES, arch=arch)
    module = cupy.RawModule(code=RESOURCE_KERNELS, options=(f"--gpu-architecture={arch}",))
    for name in RESOURCE_NAMES:
        function = module.get_function(name)
        mine = ours.resources[name]
        assert function.num_regs == mine.registers, name
        assert function.shared_size_bytes == mine.shared_bytes, name
        assert function.local_size_bytes == mine.local_bytes, name
        assert function.const_size_bytes == mine.const_bytes, name
        assert function.max_threads_per_block == mine.max_threads_per_block, name
