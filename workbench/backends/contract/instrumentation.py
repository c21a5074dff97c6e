"""Instrumentation: kernels run from a build that observes every memory access.

The simulator can build a kernel whose memory accesses, barriers and basic
blocks are counted as they run (``backends/counting.py``); on a GPU, Nsight
Compute measures instead and this interface answers that it cannot.
"""
from __future__ import annotations


class Instrumentation:
    """Counted launches (the simulator's profiler)."""

    def count_launches(self, kernel: str | None = None, skip: int = 0, count: int | None = None,
                       max_blocks: int | None = None):
        """A context manager: the kernel launches made inside it run from an
        instrumented build that counts every memory access (grouped into
        warp-level instructions) and basic block, and each one's
        :class:`~workbench.backends.counting.LaunchCounts` is appended to the
        list it yields. The kernels really run. ``kernel``: only kernels of
        this name (``"regex:..."``: a regular expression); ``skip``: so many
        matching launches run plainly first; ``count``: at most so many are
        counted; ``max_blocks``: count at most about so many blocks of a
        launch (evenly spaced; the rest run uncounted).

        Backends that cannot count raise NotImplementedError (on a GPU,
        Nsight Compute measures instead)."""
        raise NotImplementedError(f"the {getattr(self, 'name', '?')} backend does not count memory "
                                  "accesses; Nsight Compute measures them on a GPU")
