"""The CPU simulator backend: CUDA C++ kernels compiled with g++ and run on
the CPU in a separate worker process (see :mod:`.backend` and
``docs/simulator.md``)."""
from __future__ import annotations

__all__ = ["SimulatorBackend"]


def __getattr__(name):
    if name == "SimulatorBackend":
        from .backend import SimulatorBackend
        return SimulatorBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
