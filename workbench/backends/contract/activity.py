"""Activity and timing: what times the launches, the names profilers give
kernels, and the backend's own counters for the live device panel."""
from __future__ import annotations

import abc


class Activity(abc.ABC):
    """Where launch times and activity figures come from. The defaults: two
    events around each launch, no symbol, no counters."""

    def kernel_activity(self):
        """Where kernel start and end times come from without events on the
        launch path: an object with ``take()``, ``pause()`` and ``resume()``
        (see :mod:`workbench.backends.gpu.cupti`), or None: the timing log records two
        events around each launch."""
        return None

    def timing_source(self) -> str:
        """In words: what times the launches of the timing log."""
        return "events"

    def kernel_symbol(self, function) -> str | None:
        """The name ``function`` (from :meth:`CompiledModule.get_function`) has
        in the compiled code, as profilers report it (mangled for C++)."""
        return None

    def activity(self) -> dict:
        """Cumulative counters of the backend's own work, for the live device
        panel: ``launches`` (kernels launched), ``kernel_seconds`` (time the
        launches ran), ``threads`` (OS threads that run blocks). Empty where
        the backend keeps none (on a GPU, NVML gives the live figures)."""
        return {}
