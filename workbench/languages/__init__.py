"""Kernels written in Python, Numba (``numba.cuda.jit``) and Triton
(``triton.jit``), in the same harness as ``%%cuda`` kernels.

``wb.python_kernel(fn)`` (:func:`kernel` here) wraps one: its launches are checked (argument count,
device memory, declared dtypes), go into ``wb.timings()`` with a
``language`` column, run on workbench arrays without copies, and its
resources, occupancy, PTX and SASS are those the kernel panel shows for
CUDA C++. ``wb.bench``, ``wb.compare`` and ``wb.sweep`` take the language's
kernel objects directly once this package is loaded. Without a GPU, Numba
kernels run in Numba's CUDA simulator and Triton kernels in Triton's
interpreter: call :func:`setup` first (see :mod:`.modes`).

Neither language is imported here: each is imported when its first kernel
is wrapped (and by then the user has imported it).
"""
from __future__ import annotations

import weakref

from ..core.adapters import register_adapter
from ..errors import ArgumentTypeError, BackendUnavailable
from ..runtime.session import backend as active_backend
from .base import PyKernel
from .modes import LanguageStatus, LanguageSupport, setup
from .numba import NumbaKernel, is_numba_kernel
from .triton import AutotuneResult, TritonKernel, is_triton_kernel

__all__ = ["kernel", "setup", "PyKernel", "NumbaKernel", "TritonKernel", "AutotuneResult",
           "LanguageStatus", "LanguageSupport"]

#: language kernel -> its wrapper, so that wrapping twice (or wb.bench(fn) in a
#: loop) keeps one wrapper and what it learnt (compiled resources, streams)
_WRAPPED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _check_mode(fn, wrapper_cls, simulated: bool) -> None:
    b = active_backend()
    if simulated != bool(b.simulated):
        language = wrapper_cls.language
        if simulated:
            what = ("was made by Numba's CUDA simulator" if language == "numba"
                    else "was decorated with TRITON_INTERPRET=1 (Triton's interpreter)")
        else:
            what = ("was compiled for the GPU" if language == "numba"
                    else "was decorated for the GPU")
        raise BackendUnavailable(
            f"this {language} kernel {what}, but the active backend is {b.name}. Call "
            f"wb.languages.setup() before importing {language} (numba.cuda) or defining the "
            f"kernel, then define it again (a restart may be needed: "
            f"{setup()[language].line()}).")


def kernel(fn, *, name: str | None = None, dtypes: dict | None = None):
    """The workbench kernel for ``fn``: a ``numba.cuda.jit`` or ``triton.jit``
    function (a :class:`workbench.Kernel` or an already wrapped kernel is
    returned as it is).

    ``name``: the label in ``wb.timings()`` and benchmarks (default: the
    function's name). ``dtypes``: ``{parameter: dtype}`` of array parameters,
    checked before each launch where the language does not declare them.
    """
    if isinstance(fn, PyKernel) or hasattr(fn, "signature") and hasattr(fn, "launch_config"):
        return fn
    if is_numba_kernel(fn):
        cls = NumbaKernel
        simulated = type(fn).__name__ == "FakeCUDAKernel"
    elif is_triton_kernel(fn):
        cls = TritonKernel
        inner = fn
        while hasattr(inner, "fn") and not hasattr(inner, "params") \
                and type(inner).__name__ != "InterpretedFunction":
            inner = inner.fn
        simulated = type(inner).__name__ == "InterpretedFunction"
    else:
        raise ArgumentTypeError(
            f"wb.python_kernel() takes a numba.cuda.jit or triton.jit kernel, got "
            f"{type(fn).__name__}; CUDA C++ kernels come from %%cuda or wb.compile()")
    _check_mode(fn, cls, simulated)
    b = active_backend()
    if name is None and dtypes is None:
        try:
            known = _WRAPPED.get(fn)
        except TypeError:  # not weakly referable or not hashable
            known = None
        if known is not None and known.backend is b:
            return known
    wrapped = cls(fn, name=name, dtypes=dtypes)
    if name is None and dtypes is None:
        try:
            _WRAPPED[fn] = wrapped
        except TypeError:
            pass
    return wrapped


register_adapter(lambda fn: is_numba_kernel(fn) or is_triton_kernel(fn), kernel)
