"""Launching a Triton kernel's compiled specialisations without Triton's
per-call dispatch.

``fn[grid](*args)`` spends most of its host time before the launch: it reads
the current device and stream and its debug settings, binds and specialises
the arguments (which integers are divisible by 16, which pointers aligned),
builds a string of the options for its cache key, and its launcher asks the
driver about every pointer argument. The workbench already knows the stream
and the device, and its pointers are its own allocations, so
:class:`DirectLaunches` keeps, per ``triton.jit`` function and device:

- the compiled kernels by Triton's own specialisation of the arguments (its
  binder, which Triton generates per kernel) and the meta-parameters;
- for the last few argument lists seen, exactly (every value and its type:
  ``1`` and ``1.0`` are different launches to Triton), what that binding
  gave: the kernel and the values to launch it with, pointers as integers.
  Only lists of plain values are remembered so: numbers and pointer objects
  compared by identity, and no zero (``0.0`` and ``-0.0`` are equal keys
  but not the same argument); anything else is bound afresh each time.

A repeat of an argument list then costs a dictionary look-up and the
compiled kernel's own launcher, on the workbench's stream, with Triton's
launch hooks (profilers use them) where any are set. The first launch of each
specialisation still goes through ``fn[grid]`` (which compiles it and raises
Triton's own errors); what it returns is remembered. Anything unusual (a
Triton without these internals, arguments that cannot be keyed, a global the
kernel reads that has changed since it was compiled) goes through
``fn[grid]`` too, so Triton stays the judge of every call it would refuse.
Triton's global settings (``knobs.runtime.debug``, instrumentation) are
read when a specialisation is first launched; a kernel with pre-run hooks
(``add_pre_run_hook``) always goes through ``fn[grid]``. Triton's launcher
asks the driver whether each pointer argument is device memory; here the
pointers are the workbench's own arrays (checked before), passed as numbers.
"""
from __future__ import annotations

import numbers

#: Specialisations kept per function and device (a loop over changing sizes
#: makes one per divisibility class, not per value: a few).
MAX_KERNELS = 256
#: Exact argument lists remembered per function and device.
MAX_CALLS = 256


class DirectLaunches:
    """The compiled specialisations of one ``triton.jit`` function on one
    device; see the module docstring."""

    def __init__(self, jit, device: int):
        from triton import knobs  # lazy: Triton is imported only by a Triton kernel's owner
        self._jit = jit
        self._binder = jit.device_caches[device][4]
        self._runtime = knobs.runtime
        self._kernels: dict = {}  # Triton's specialisation key -> compiled kernel
        self._calls: dict = {}    # exact argument list -> (kernel, launch values, bound arguments)
        self._plain: dict = {}    # argument types -> whether such lists may be remembered exactly

    @classmethod
    def create(cls, jit, device: int):
        """A :class:`DirectLaunches`, or None where this Triton lacks what it uses
        (every launch then goes through ``fn[grid]``)."""
        try:
            if len(jit.device_caches[device]) != 5:
                return None
            launches = cls(jit, device)
        except Exception:  # noqa: BLE001 -- another Triton version: its public path only
            return None
        return launches if callable(launches._binder) else None

    def _bind(self, args, meta):
        """``(bound arguments, key)`` as Triton's cache knows the launch, or None."""
        try:
            bound, specialization, options = self._binder(*args, **meta)
            key = (tuple(specialization), tuple(options.items()))
            hash(key)
        except Exception:  # noqa: BLE001 -- Triton's own call will say what is wrong
            return None
        return bound, key

    def remember(self, args, meta, kernel) -> None:
        """Keep ``kernel``, what ``fn[grid](*args, **meta)`` launched."""
        if kernel is None or not hasattr(kernel, "run") or not hasattr(kernel, "packed_metadata"):
            return
        bound = self._bind(args, meta)
        if bound is None:
            return
        if len(self._kernels) >= MAX_KERNELS:
            self._kernels.clear()
        self._kernels[bound[1]] = kernel

    def _known(self, call, args, meta):
        """``(kernel, values, bound)`` for an argument list not seen exactly
        before, from its specialisation; None where none is known."""
        if not self._kernels:
            return None
        bound = self._bind(args, meta)
        if bound is None:
            return None
        bound, key = bound
        kernel = self._kernels.get(key)
        if kernel is None:
            return None
        values = tuple(int(v.data_ptr()) if hasattr(v, "data_ptr") else v for v in bound.values())
        known = (kernel, values, bound)
        if call is not None:
            if len(self._calls) >= MAX_CALLS:
                self._calls.clear()
            self._calls[call] = known
        return known

    def launch(self, grid, args, meta, stream: int):
        """Launch ``args`` on ``stream`` (a ``CUstream`` as an int) if its
        specialisation is known, and return the compiled kernel; None where
        ``fn[grid]`` must do it."""
        if self._jit.pre_run_hooks:  # (fn[grid] runs them)
            return None
        types = (*map(type, args), *map(type, meta.values()))
        plain = self._plain.get(types)
        if plain is None:
            plain = self._plain[types] = all(map(_plain, types))
        if plain and 0 not in args and 0 not in meta.values():
            call = (*args, *types, *meta.items())
            known = self._calls.get(call)
        else:
            call = known = None
        if known is None:
            known = self._known(call, args, meta)
            if known is None:
                return None
        kernel, values, bound = known
        used = self._jit.used_global_vals
        if used:  # Triton refuses a launch after such a global changed: let it say so
            missing = object()
            for (name, _), (value, namespace) in used.items():
                if namespace.get(name, missing) != value:
                    return None
        if callable(grid):
            grid = grid(bound)
        size = len(grid)
        runtime = self._runtime
        enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
        if getattr(enter, "calls", True) or getattr(leave, "calls", True):  # hooks set
            metadata = kernel.launch_metadata(grid, stream, *bound.values())  # (the objects)
        else:  # Triton's empty hook chains: nothing to call, no metadata to build
            enter = leave = metadata = None
        kernel.run(grid[0], grid[1] if size > 1 else 1, grid[2] if size > 2 else 1, stream,
                   kernel.function, kernel.packed_metadata, metadata, enter, leave, *values)
        return kernel


def _plain(t: type) -> bool:
    """Whether arguments of type ``t`` that compare equal are the same launch
    to Triton: numbers (with their type in the key), and pointer objects
    compared by identity (the workbench's interned ``_DeviceArray``)."""
    if t is bool or t is int or t is float or issubclass(t, numbers.Number):
        return True
    return hasattr(t, "data_ptr") and t.__eq__ is object.__eq__ and t.__hash__ is object.__hash__
