"""Which backend runs, and why."""
import pytest

import workbench as wb
from workbench.backends import choose_backend, create_backend, gpu_unavailable_reason
from workbench.runtime import session


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
        assert reason.startswith("no GPU: ") and len(reason) > len("no GPU: ")


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
    previous = session.active_backend_or_none()
    try:
        b = wb.backend("simulator")
        assert wb.backend() is b and wb.xp is b.xp
        assert wb.backend("sim") is b  # the same name and options: the same instance
        assert wb.backend("simulator", checked=True) is b  # options change in place
        assert b.checked
        assert "chosen by the user" in repr(b)
    finally:
        wb.backend("simulator", checked=False)
        session.restore_backend(previous)


def test_kernels_refuse_to_launch_on_another_backend():
    previous = session.active_backend_or_none()
    try:
        wb.backend("simulator")
        k = wb.compile('extern "C" __global__ void k(int* x) { x[0] = 1; }')["k"]
        x = wb.allocate(1, "int32")
        session.use_backend(create_backend("simulator"))  # another simulator instance
        with pytest.raises(wb.LaunchConfigError, match="another simulator backend.*[Rr]un its %%cuda cell"):
            k(x, grid=1, block=1)
    finally:
        session.restore_backend(previous)
