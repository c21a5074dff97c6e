"""A program run on a GPU runs on the active device: its environment names
that device in CUDA_VISIBLE_DEVICES, in this process's numbering."""
import types

import pytest

from workbench.backends.contract import Backend, visible_device


def test_the_visible_device_follows_this_process_numbering():
    assert visible_device(0, None) == "0" and visible_device(3, "") == "3"
    assert visible_device(1, "2,3") == "3"
    assert visible_device(0, " GPU-8a1b2c3d-0000-1111-2222-333344445555 , 1") == \
        "GPU-8a1b2c3d-0000-1111-2222-333344445555"
    with pytest.raises(ValueError, match="not among"):
        visible_device(2, "0,1")


def test_a_gpu_backend_gives_the_active_device_to_programs(monkeypatch):
    gpu = types.SimpleNamespace(simulated=False, current_device=lambda: 1)  # the active device: 1
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert Backend.child_environment(gpu) == {"CUDA_VISIBLE_DEVICES": "1"}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert Backend.child_environment(gpu) == {"CUDA_VISIBLE_DEVICES": "6"}


def test_the_simulator_sets_no_device_for_programs(simulator):
    assert simulator.child_environment() == {}
