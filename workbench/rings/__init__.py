"""Persistent "ring" kernels: a ``__device__`` message handler turned into a
GPU service fed by a host-to-device queue and answering on a device-to-host
queue (:func:`ring`). Runs on the GPU and on the CPU simulator."""
from .errors import (RingError, RingFull, RingHang, RingLayoutError,  # noqa: F401
                     RingStopped)
from .ring import Ring, ring  # noqa: F401
from .stats import RingStats  # noqa: F401
