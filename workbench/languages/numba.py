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

import ast
import inspect
import textwrap
import types

import numpy as np

from ..errors import ArgumentTypeError
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
    (``@cuda.jit("void(float32[:], int32)")``) declares them itself, checked
    on both backends (Numba's simulator keeps no signature: the decorator's
    is read from the kernel's source).

    Numba compiles a kernel's module-level globals (numbers, tuples, NumPy
    arrays) into it as constants: a later change of the global does not
    reach a kernel compiled before. Numba's simulator runs the Python
    function and would read them afresh at every launch; here the kernel's
    globals are frozen as a compile would freeze them, at its first launch
    (at wrapping for a kernel with an explicit signature, which Numba
    compiles when it is decorated), so a notebook gives the same answers on
    both backends.
    """

    language = "numba"

    def __init__(self, fn, name: str | None = None, dtypes: dict | None = None):
        super().__init__(fn, name or fn.py_func.__name__, dtypes)
        self._names = list(inspect.signature(fn.py_func).parameters)
        self.simulated = _simulated(fn)
        self._streams: dict = {}
        self._frozen = None  # (simulator) the kernel over its frozen globals
        if self.simulated:
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray  # lazy: see module doc
            self._fake = FakeCUDAArray
            signature = _source_signature(fn.py_func)
        else:
            from numba import cuda  # lazy: see module docstring
            self._cuda = cuda
            signature = (None if getattr(fn, "_can_compile", True) or not fn.signatures
                         else fn.signatures[0])
        for name_, (dt, ndim) in _array_types(self._names, signature or ()).items():
            self._dtypes.setdefault(name_, dt)
            self._ndims.setdefault(name_, ndim)
        if self.simulated and signature is not None:
            self._frozen = _frozen_kernel(fn)  # compiled when decorated, on a GPU

    def _foreign_array(self, a):
        if self.simulated:  # Numba's own simulated device arrays (numba.cuda.random's states...)
            return a if isinstance(a, self._fake) else None
        if self._cuda.is_cuda_array(a):  # Numba's device arrays, any __cuda_array_interface__
            return a
        return None

    def _params(self) -> list[str]:
        return self._names

    def _convert_array(self, a):
        if self.simulated:  # the arena's host view: the same bytes, no copy
            return self._fake(a.view(np.ndarray))
        b = self.backend
        key = (b.current_device(), b.device_pointer(a), a.shape, a.strides, a.dtype)  # (records: fields)
        view = _VIEWS.get(key)
        if view is None:
            desc = dict(a.__cuda_array_interface__)
            desc.pop("stream", None)  # launched on the workbench's stream: no synchronisation needed
            if a.dtype.names:  # the typestr of a record is "|V16": Numba gets the fields
                desc["typestr"] = a.dtype
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
            raise ArgumentTypeError(
                f"{self.name}() got unexpected keyword arguments {sorted(meta)}")
        fn = self.fn
        if self.simulated:
            if self._frozen is None:  # the first launch: a GPU compiles, and so freezes, now
                self._frozen = _frozen_kernel(fn)
            fn = self._frozen
        fn[grid, block, self._numba_stream(stream), shared_mem](*args)

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


# -- what a GPU compile fixes, for Numba's simulator ------------------------------------------

def _array_types(names, signature) -> dict:
    """``{parameter: (dtype, ndim)}`` of the array types in ``signature``."""
    out = {}
    for pname, ty in zip(names, signature):
        dtype = getattr(ty, "dtype", None)
        if dtype is not None and hasattr(ty, "ndim"):
            try:
                from numba.np.numpy_support import as_dtype  # lazy: see module docstring
                out[pname] = (np.dtype(as_dtype(dtype)), int(ty.ndim))
            except Exception:  # a record or other type the check cannot state
                pass
    return out


def _source_signature(py_func):
    """The argument types of the explicit signature in the ``@cuda.jit(...)``
    decorating ``py_func`` in its source, or None (no signature, several, or
    no source)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(py_func)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    func = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    for decorator in getattr(func, "decorator_list", ()):
        if not (isinstance(decorator, ast.Call) and decorator.args
                and getattr(decorator.func, "attr", getattr(decorator.func, "id", None)) == "jit"):
            continue
        expr = decorator.args[0]
        try:
            signature = (expr.value if isinstance(expr, ast.Constant) else
                         eval(compile(ast.Expression(expr), "<signature>", "eval"),  # noqa: S307
                              py_func.__globals__))  # (the decorator's own argument, once more)
            if isinstance(signature, (list, tuple)):
                if len(signature) != 1:
                    return None  # several signatures: Numba picks one per call
                signature = signature[0]
            from numba.core.sigutils import normalize_signature  # lazy: see module docstring
            return normalize_signature(signature)[0]
        except Exception:  # not a signature the check can read: Numba is the judge
            return None
    return None


#: Global values a GPU compile freezes into a kernel.
_CONSTANTS = (bool, int, float, complex, np.generic, np.ndarray, tuple)


def _frozen_kernel(fn):
    """Numba's simulated kernel ``fn`` over a snapshot of its module's globals,
    its numbers, tuples and arrays copied (arrays read-only, as a GPU compile
    makes them constants), or ``fn`` itself where it reads none."""
    py = fn.py_func
    names = _global_names(py.__code__)
    snapshot = dict(py.__globals__)
    frozen = False
    for name in names:
        value = snapshot.get(name)
        if isinstance(value, _CONSTANTS):
            if isinstance(value, np.ndarray):
                value = value.copy()
                value.setflags(write=False)
            snapshot[name] = value
            frozen = True
    if not frozen:
        return fn
    copy = types.FunctionType(py.__code__, snapshot, py.__name__, py.__defaults__, py.__closure__)
    copy.__kwdefaults__ = py.__kwdefaults__
    copy.__qualname__, copy.__module__ = py.__qualname__, py.__module__
    return type(fn)(copy, device=False, fastmath=getattr(fn, "_fastmath", False),
                    extensions=getattr(fn, "extensions", ()), debug=getattr(fn, "_debug", False))


def _global_names(code) -> set:
    """Names ``code`` (and the code nested in it) may read as globals."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names
