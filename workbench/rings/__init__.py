"""Persistent "ring" kernels: a ``__device__`` message handler turned into a
GPU service fed by a host-to-device queue and answering on a device-to-host
queue (:func:`ring`). Runs on the GPU and on the CPU simulator."""
from .ring import (Ring, RingError, RingFull, RingHang, RingLayoutError, RingStopped,  # noqa: F401
                   ring)
from .stats import RingStats  # noqa: F401
