"""Which backend runs, and why."""
import importlib.util

import pytest

import workbench as wb
from workbench import backends
from workbench.backends import choose_backend, create_backend, gpu_unavailable_reason
from workbench.runtime import session

from helpers import using_backend


def _chosen():
    name, reason = choose_backend()
    return create_backend(name), reason


def test_forced_simulator(monkeypatch):
    monkeypatch.setenv("WORKBENCH_BACKEND", "simulator")
    b, reason = _chosen()
    assert b.name == "simulator" and b.simulated
    assert reason == "WORKBENCH_BACKEND=simulator"


def test_default_choice_follows_the_gpu(monkeypatch):
    monkeypatch.delenv("WORKBENCH_BACKEND", raising=False)
    b, reason = _chosen()
    if gpu_unavailable_reason() is None:
        assert (b.name, reason) == ("cupy", "CuPy sees a CUDA device")
    else:
        assert b.name == "simulator"
        gpu_reason = gpu_unavailable_reason()
        assert reason.startswith(f"{gpu_reason}: the CPU simulator runs your kernels")
        with using_backend():  # wb.backend()'s repr says it in the same words
            assert repr(session.use_backend(None)).endswith(f"({reason})>")


def test_without_a_gpu_the_reason_speaks_to_a_laptop_user(monkeypatch):
    # the words for a machine with no NVIDIA GPU: what runs, and what to install on one that has
    monkeypatch.setattr(backends, "nvidia_gpu_present", lambda: False)
    assert backends.simulator_reason(backends.NO_GPU) == (
        "no NVIDIA GPU found: the CPU simulator runs your kernels; on a machine with one, "
        "pip install 'cuda-workbench[cuda13]' ([cuda12] for a driver older than 580)")
    if importlib.util.find_spec("cupy") is None:
        assert gpu_unavailable_reason() == "no NVIDIA GPU found"


def test_an_old_driver_is_pointed_at_cupy_for_cuda_12(monkeypatch):
    monkeypatch.setattr(backends, "nvidia_driver_version", lambda: (550, 54, 15))
    assert backends.gpu_extra() == "pip install 'cuda-workbench[cuda12]'"
    monkeypatch.setattr(backends, "nvidia_driver_version", lambda: (580, 65, 6))
    assert backends.gpu_extra() == "pip install 'cuda-workbench[cuda13]'"


def test_unknown_backend_name_is_a_clear_error():
    with pytest.raises(wb.BackendUnavailable,
                       match="Unknown backend 'tpu'.*'cupy'.*'simulator'.*WORKBENCH_BACKEND"):
        create_backend("tpu")


def test_an_unknown_backend_from_the_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv("WORKBENCH_BACKEND", "tpu")
    with pytest.raises(wb.BackendUnavailable, match="WORKBENCH_BACKEND=tpu: set it to one"):
        create_backend("tpu")


@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a GPU is present")
def test_asking_for_the_gpu_without_one_says_why_and_what_to_do():
    with pytest.raises(wb.BackendUnavailable, match="simulator"):
        create_backend("cupy")


def test_switching_backends_through_wb_backend():
    with using_backend():
        try:
            b = wb.backend("simulator")
            assert wb.backend() is b and wb.xp.__wrapped__ is b.xp
            assert wb.backend("sim") is b  # the same name and options: the same instance
            assert wb.backend("simulator", checked=True) is b  # options change in place
            assert b.checked
            assert "chosen by the user" in repr(b)
        finally:
            wb.backend("simulator", checked=False)


def test_kernels_refuse_to_launch_on_another_backend():
    with using_backend("simulator"):
        k = wb.compile('extern "C" __global__ void k(int* x) { x[0] = 1; }')["k"]
        x = wb.allocate(1, "int32")
        session.use_backend(create_backend("simulator"))  # another simulator instance
        with pytest.raises(wb.LaunchConfigError, match="another simulator backend.*[Rr]un its %%cuda cell"):
            k(x, grid=1, block=1)
