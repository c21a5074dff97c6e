"""Numba kernels (``numba.cuda.jit``, from the ``numba-cuda`` package) in the
workbench: ``wb.python_kernel(numba_fn)``.

Arrays meet Numba without copies. On the GPU a workbench array is a CuPy
array; it becomes a Numba device array over the same memory through
``__cuda_array_interface__`` (made once per address and layout, see
:data:`_VIEWS`), without the stream synchronisation Numba would otherwise
make for a foreign array: the kernel is launched on the very
stream the workbench records its events on (``cuda.external_stream``), so
stream order already holds. On the simulator, workbench arrays are NumPy
views of the simulator's device memory, a shared-memory arena mapped into
this process; Numba's CUDA simulator runs on host NumPy arrays, so it is
given the arena's host view of the same bytes (its ``FakeCUDAArray`` wrapper,
which it would otherwise build around a copy).

``numba`` is imported lazily, inside functions: ``import workbench`` must
stay light, and ``NUMBA_ENABLE_CUDASIM`` has to be set (:mod:`.modes`) before
``numba.cuda`` is first imported.
"""
from __future__ import annotations

import inspect

import numpy as np

from ..backends.contract import KernelResources
from ..backends.nvrtc.check import NvrtcResult
from .base import PyKernel


#: Numba views of workbench GPU arrays by (device, address, shape, strides, dtype).
#: Importing an array through __cuda_array_interface__ costs tens of µs a launch;
#: a view holds no reference (owner=None) and frees nothing, and a key names its
#: memory and layout exactly, so a view found here always describes the live
#: array that was passed, even one allocated anew at an address used before.
_VIEWS: dict = {}
_MAX_VIEWS = 1024


def is_numba_kernel(obj) -> bool:
    """True for a ``numba.cuda.jit`` kernel (GPU dispatcher or simulator kernel),
    without importing Numba."""
    module = type(obj).__module__ or ""
    return module.startswith(("numba.cuda", "numba_cuda")) and hasattr(obj, "py_func") \
        and not getattr(obj, "_device", False) and hasattr(obj, "__getitem__")


def _simulated(fn) -> bool:
    return type(fn).__name__ == "FakeCUDAKernel"


class NumbaKernel(PyKernel):
    """A ``numba.cuda.jit`` kernel in the workbench::

        k = wb.python_kernel(numba_fn)    # or give numba_fn to wb.bench / wb.compare
        k(x, y, n, grid=blocks, block=256)

    ``dtypes={"x": np.float32}`` declares the dtypes of array parameters for
    the workbench's checks; a kernel compiled with an explicit signature
    (``@cuda.jit("void(float32[:], int32)")``) declares them itself on the GPU.
    """

    language = "numba"

    def __init__(self, fn, name: str | None = None, dtypes: dict | None = None):
        super().__init__(fn, name or fn.py_func.__name__, dtypes)
        self._names = list(inspect.signature(fn.py_func).parameters)
        self.simulated = _simulated(fn)
        self._streams: dict = {}
        if self.simulated:
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray  # lazy: see module doc
            self._fake = FakeCUDAArray
        else:
            from numba import cuda  # lazy: see module docstring
            self._cuda = cuda
            for name_, dt in self._declared_dtypes().items():
                self._dtypes.setdefault(name_, dt)

    def _declared_dtypes(self) -> dict:
        """Array dtypes of an explicit signature (a dispatcher that compiles no more)."""
        if getattr(self.fn, "_can_compile", True) or not self.fn.signatures:
            return {}
        out = {}
        for pname, ty in zip(self._names, self.fn.signatures[0]):
            dtype = getattr(ty, "dtype", None)
            if dtype is not None and hasattr(ty, "ndim"):
                try:
                    from numba.np.numpy_support import as_dtype  # lazy: see module docstring
                    out[pname] = np.dtype(as_dtype(dtype))
                except Exception:  # a record or other type the check cannot state
                    pass
        return out

    def _params(self) -> list[str]:
        return self._names

    def _convert_array(self, a):
        if self.simulated:  # the arena's host view: the same bytes, no copy
            return self._fake(a.view(np.ndarray))
        b = self.backend
        key = (b.current_device(), b.device_pointer(a), a.shape, a.strides, a.dtype.str)
        view = _VIEWS.get(key)
        if view is None:
            desc = dict(a.__cuda_array_interface__)
            desc.pop("stream", None)  # launched on the workbench's stream: no synchronisation needed
            view = self._cuda.from_cuda_array_interface(desc, owner=None, sync=False)
            if len(_VIEWS) >= _MAX_VIEWS:
                _VIEWS.clear()
            _VIEWS[key] = view
        return view

    def _numba_stream(self, stream):
        if self.simulated:
            return 0
        ptr = self.backend.stream_pointer(stream)
        s = self._streams.get(ptr)
        if s is None:
            cuda = self._cuda
            s = self._streams[ptr] = (cuda.default_stream() if ptr == 0 else
                                      cuda.legacy_default_stream() if ptr == 1 else
                                      cuda.per_thread_default_stream() if ptr == 2 else
                                      cuda.external_stream(ptr))
        return s

    def _launch(self, grid, block, args, shared_mem, stream, meta) -> None:
        if meta:
            raise TypeError(f"{self.name}() got unexpected keyword arguments {sorted(meta)}")
        self.fn[grid, block, self._numba_stream(stream), shared_mem](*args)

    # -- resources and code -----------------------------------------------------------------
    def _last_overload(self):
        if self.simulated:
            return None
        overloads = getattr(self.fn, "overloads", None)
        return next(reversed(overloads.values())) if overloads else None

    def _arch(self) -> str | None:
        cc = self.backend.device_properties().compute_capability
        return f"sm_{cc[0]}{cc[1]}"

    def _compiled_resources(self) -> KernelResources | None:
        k = self._last_overload()
        if k is None:
            return None
        return KernelResources(
            registers=int(k.regs_per_thread), shared_bytes=int(k.shared_mem_per_block),
            local_bytes=int(k.local_mem_per_thread), const_bytes=int(k.const_mem_size),
            max_threads_per_block=int(k.max_threads_per_block), arch=self._arch())

    def compiled_code(self):
        if self.simulated:
            return None, ("Numba's CUDA simulator runs the Python function itself: no PTX or SASS "
                          "(run on a GPU to see them)")
        k = self._last_overload()
        if k is None:
            return None, f"{self.name} is compiled at its first launch: launch it once first"
        cc = tuple(self.backend.device_properties().compute_capability)
        try:
            ptx = k.inspect_asm(cc)
            cubin = k._codelibrary.get_cubin(cc=cc)
        except Exception as exc:  # NVVM or the linker missing: say why
            return None, f"Numba could not give its PTX: {exc}".splitlines()[0]
        return NvrtcResult(log="", ptx=ptx, cubin=cubin, arch=self._arch(),
                           lowered_names={self.name: k.entry_name}), ""
