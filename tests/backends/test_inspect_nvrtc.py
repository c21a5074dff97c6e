"""The kernel inspector takes PTX, cubin and resources from the NVRTC result
the backend kept when it compiled, and compiles again only when there is none.

NVRTC's calls are counted by wrapping the real compile of the loaded NVRTC
library; the disk cache is off so that every check reaches NVRTC."""
from __future__ import annotations

import types

import pytest

import workbench as wb
from workbench.backends import nvrtc
from workbench.backends.contract import CompileOptions
from workbench.backends.nvrtc import bindings
from workbench.hardware.inspect import inspect_kernel
from workbench.present.na import NA

if not nvrtc.nvrtc_available():
    pytest.skip("NVRTC is not installed (pip install cuda-bindings nvidia-cuda-nvrtc)",
                allow_module_level=True)

SOURCE = r"""
extern "C" __global__ void staged(const float* x, float* y, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = tile[255 - threadIdx.x];
}
"""


@pytest.fixture
def nvrtc_compiles(monkeypatch):
    """A list that grows by one on each compile NVRTC really does."""
    monkeypatch.setenv("WORKBENCH_NVRTC_CACHE", "0")
    wrapper = type(bindings.library())
    real = wrapper.compile
    calls = []

    def counted(self, *args, **kwargs):
        calls.append(args[0])
        return real(self, *args, **kwargs)
    monkeypatch.setattr(wrapper, "compile", counted)
    return calls


def test_inspect_after_a_simulator_compile_does_not_compile_again(simulator, nvrtc_compiles):
    kernel = wb.compile(SOURCE, name="test-inspect-nvrtc-staged")["staged"]
    assert len(nvrtc_compiles) == 1
    kept = kernel.module.compiled.nvrtc
    assert kept is not None, "the simulator's compiled module keeps NVRTC's result"
    report = kernel.inspect()
    assert ".entry staged" in report.kernel_ptx and report.ptx == kept.ptx
    assert report.static_shared == 1024
    assert report.sass is NA or "staged" in report.sass  # disassembles the kept cubin
    assert len(nvrtc_compiles) == 1


def _stand_in_kernel(name, compiled):
    """What the inspector reads of a Kernel: its name, resources and module."""
    module = types.SimpleNamespace(source=SOURCE, options=CompileOptions(), compiled=compiled)
    return types.SimpleNamespace(name=name, resources=None, module=module)


def test_kept_result_supplies_code_and_resources(nvrtc_compiles):
    kept = nvrtc.check_with_nvrtc(SOURCE, CompileOptions(), ["staged"])
    assert len(nvrtc_compiles) == 1
    report = inspect_kernel(_stand_in_kernel("staged", types.SimpleNamespace(nvrtc=kept)))
    assert report.registers == kept.resources["staged"].registers
    assert report.static_shared == 1024
    assert report.ptx == kept.ptx and report.kernel_ptx.startswith(".visible .entry staged")
    assert report.log == kept.log
    assert len(nvrtc_compiles) == 1


def test_without_a_kept_result_nvrtc_compiles_once(nvrtc_compiles):
    report = inspect_kernel(_stand_in_kernel("staged", types.SimpleNamespace(nvrtc=None)))
    assert ".entry staged" in report.kernel_ptx and ".target sm_90" in report.ptx
    assert report.log is not NA and report.static_shared is NA  # no resources from a stand-in
    assert len(nvrtc_compiles) == 1


def test_report_html_is_a_fields_table(nvrtc_compiles):
    kept = nvrtc.check_with_nvrtc(SOURCE, CompileOptions(), ["staged"])
    report = inspect_kernel(_stand_in_kernel("staged", types.SimpleNamespace(nvrtc=kept)))
    page = report._repr_html_()
    assert "<b>Kernel staged</b>" in page
    assert "<th style='text-align:left'>Static shared memory</th><td style='text-align:left'>1.00 KiB</td>" in page
    table = kept._repr_html_()
    assert "<b>NVRTC, sm_90</b>" in table and ">registers</th>" in table
    assert f"<td style='text-align:right'>{kept.resources['staged'].registers}</td>" in table
