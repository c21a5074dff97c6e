"""The CPU simulator backend: CUDA C++ kernels compiled with g++ and run on
the CPU in a separate worker process (see :mod:`.backend` and
``docs/simulator.md``)."""
from __future__ import annotations

from .backend import SimulatorBackend

__all__ = ["SimulatorBackend"]
