"""Compile and launch: CUDA C++ source in, a module out, its kernels launched."""
from __future__ import annotations

import abc
from typing import Callable, Sequence

from .types import CompiledModule, CompileOptions


class Kernels(abc.ABC):
    """Compile a source into a :class:`~.types.CompiledModule` and launch its
    kernels, one call at a time (:meth:`launch`) or through a launcher made
    once per kernel (:meth:`make_launcher`)."""

    @abc.abstractmethod
    def compile(self, source: str, options: CompileOptions,
                kernel_names: Sequence[str]) -> CompiledModule:
        """Compile ``source``; ``kernel_names`` are the ``extern "C"`` kernels
        found in it (name expressions are in ``options``). Raises
        :class:`CompileFailed` with the log on error."""

    def missing_compiler(self) -> str | None:
        """None where this backend can build new kernels here; else one line
        saying what is missing and the command that installs it."""
        return None

    @abc.abstractmethod
    def launch(self, function, grid: tuple[int, int, int],
               block: tuple[int, int, int], args: tuple,
               shared_mem: int = 0, stream=None, cooperative: bool = False) -> None:
        """Launch asynchronously. ``args`` are device arrays and NumPy scalars
        of the exact C types, already checked by the core (None: a null
        pointer). ``cooperative``: every block runs at once, so that
        ``this_grid().sync()`` works (``cudaLaunchCooperativeKernel``)."""

    def make_launcher(self, function, params, cooperative: bool = False) -> Callable:
        """A callable ``(grid, block, args, shared_mem, stream)`` that launches
        ``function``, built once per kernel. ``params`` are the kernel's parsed
        parameters (:class:`workbench.core.signature.Param`), so a backend can
        prepare the argument layout ahead of time. The default calls
        :meth:`launch`. A launcher that packs Python ints and floats into the
        parameters' C types itself (the caller has range-checked them) says so
        with an attribute ``packs_python_numbers = True``: calls then skip
        making NumPy scalars of the exact types. A launcher may also carry
        ``between(start, end, grid, block, args, shared_mem, stream)``: the
        launch with events ``start`` and ``end`` recorded on ``stream`` around
        it, in one call (the timing log uses it where it times by events).
        A launcher that can run a whole call in native code carries
        ``fast_call(checks, configs, session, log, template, slots)``, which
        the core calls once per kernel for an object taking the common
        calls (see ``gpu/native/launch.c``), and ``failed(status)``, which raises
        the error of a launch that returned ``status``."""
        launch = self.launch

        def launcher(grid, block, args, shared_mem, stream):
            launch(function, grid, block, args, shared_mem, stream, cooperative=cooperative)
        return launcher

    def suggest_block_size(self, function, shared_mem: int = 0) -> int:
        """A block size with the best occupancy for ``function``."""
        return 256

    def launch_path(self) -> str:
        """In words: what launches a kernel's call (a compiled launcher, or Python)."""
        return "the backend's launch()"
