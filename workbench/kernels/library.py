"""The registry of the kernel library and the compile path of its ``.cu`` files.

A *family* is one CUDA C++ file ``workbench/kernels/cu/<family>.cu`` and one
Python module ``workbench/kernels/<family>.py`` beside it; a family may also ship
*variant* sources ``cu/<family>.<variant>.cu`` for one architecture (the Hopper
GEMM, ``matmul.sm90.cu``, built for ``sm_90a``), compiled by
``module(family, variant=..., arch=...)``. The Python module:

* defines ``INSTANTIATE``, a tuple of the template instantiations that
  :func:`module` compiles (name expressions such as ``"sum_kernel<float>"``);
  a family without templates leaves it out;
* defines the public functions (``relu``, ``sum``...): they take device
  arrays, check them (:func:`check_array`, :func:`check_dtype`), allocate their
  outputs on the active backend and launch the ``Kernel`` objects of
  ``module(family)[...]``, so every launch is checked, timed in
  ``wb.timings()`` and tracked like a ``%%cuda`` cell's;
* calls :func:`register` once per public function at import, with a
  :class:`KernelSpec` (cheap: nothing is compiled at import).

:func:`specs` imports every family (each ``cu/*.cu`` with its ``.py``) and
returns the registered kernels by name. :func:`module` compiles a family
once per active backend instance and set of defines, through
:func:`workbench.compile` (name ``"wb.kernels.<family>"``), so the module is
in ``wb.modules`` and its kernels are inspectable. A kernel function that
chooses between variants (by device, sizes or alignment) says which one ran
with :func:`note_variant`; the catalog shows it.
"""
from __future__ import annotations

import functools
import importlib
import math
import sys
import types
from dataclasses import dataclass
from importlib import resources
from typing import Callable

import numpy as np

from ..core.compiler import Module, compile as compile_source
from ..cxx.defines import normalise_defines
from ..errors import ArgumentValueError, KernelArgumentError
from ..runtime.session import backend as active_backend

__all__ = ["KernelSpec", "register", "specs", "module", "source_text", "families",
           "variant_sources", "note_variant", "last_variant", "check_array", "check_dtype",
           "c_type", "grid_1d", "multiprocessors", "compute_capability"]


@dataclass(frozen=True)
class KernelSpec:
    """One kernel of the library, as the catalog, the baselines and the
    benchmark see it.

    ``example(size, dtype, rng)`` returns ``(args, elements)``: a tuple of
    host NumPy arrays and scalars (the arguments of ``function`` once the
    arrays are copied to the device, and of ``reference`` as they are) and the
    number of output elements, which multiplies ``bytes_per_element`` and
    ``flops_per_element`` for the roofline. ``bytes_per_element`` is for
    ``dtypes[0]``; :meth:`bytes_for` scales it to another dtype. For a
    reduction (one output) ``elements`` counts the input elements instead.
    ``rtol`` and ``atol`` are the tolerances of the comparison with
    ``reference`` (None: by dtype, 1e-4 / 1e-5 for float32, 1e-7 / 1e-9 for
    float64, 1e-2 for 16-bit floats). ``variants`` names the implementations
    the function chooses between, ``roofline`` says which ceiling the
    benchmark measures the kernel against and why (empty: the copy bandwidth,
    bytes read and written).
    """

    name: str
    family: str
    dtypes: tuple[str, ...]
    bytes_per_element: float
    flops_per_element: float
    description: str
    function: Callable
    reference: Callable
    library_equivalent: Callable | None = None
    example: Callable | None = None
    rtol: float | None = None
    atol: float | None = None
    variants: tuple[str, ...] = ()
    roofline: str = ""

    def bytes_for(self, dtype) -> float:
        """Bytes per output element for ``dtype`` (``bytes_per_element`` is
        for ``dtypes[0]``; the count scales with the item size)."""
        return self.bytes_per_element * np.dtype(dtype).itemsize / np.dtype(self.dtypes[0]).itemsize


_REGISTRY: dict[str, KernelSpec] = {}
_MODULES: dict = {}  # (backend instance id, family, defines, instantiations) -> (backend, Module)
_LAST_VARIANT: dict[str, str] = {}


def register(spec: KernelSpec) -> KernelSpec:
    """Add ``spec`` to the library (a later registration of a name replaces it)."""
    _REGISTRY[spec.name] = spec
    return spec


def families() -> list[str]:
    """The family names: the stems of the ``.cu`` files shipped in ``cu/``."""
    return list(_family_names())


@functools.lru_cache(maxsize=1)
def _family_names() -> tuple[str, ...]:
    return tuple(sorted(stem for stem in _cu_stems() if "." not in stem))


def _cu_stems() -> tuple[str, ...]:
    folder = resources.files(__package__) / "cu"
    return tuple(entry.name[:-3] for entry in folder.iterdir() if entry.name.endswith(".cu"))


def variant_sources(family: str) -> list[str]:
    """The variants a family ships beside its ``.cu`` file (``["sm90"]`` for
    ``matmul``: ``cu/matmul.sm90.cu``)."""
    return sorted(stem.split(".", 1)[1] for stem in _cu_stems() if stem.startswith(family + "."))


def note_variant(kernel: str, variant: str) -> None:
    """Record that the last call of library kernel ``kernel`` ran ``variant``."""
    _LAST_VARIANT[kernel] = variant


def last_variant(kernel: str) -> str | None:
    """The variant the last call of ``kernel`` ran (None before its first call)."""
    return _LAST_VARIANT.get(kernel)


def _family_module(family: str):
    if family not in families():
        raise ArgumentValueError(
            f"no kernel family {family!r}; the library has: {', '.join(families())}")
    found = importlib.import_module(f"{__package__}.{family}")
    _kernels_over_modules()
    return found


def _kernels_over_modules() -> None:
    """Importing ``workbench.kernels.transpose`` binds the package attribute
    ``transpose`` to the module; a kernel of that name takes it back, so that
    ``wb.kernels.transpose`` is always the kernel function."""
    package = sys.modules[__package__]
    for name, spec in _REGISTRY.items():
        if isinstance(vars(package).get(name), types.ModuleType):
            setattr(package, name, spec.function)


def specs() -> dict[str, KernelSpec]:
    """Every kernel of the library by name (imports every family first)."""
    for family in families():
        _family_module(family)
    return dict(_REGISTRY)


def source_text(family: str, variant: str | None = None) -> str:
    """The CUDA C++ source of a family (``cu/<family>.cu``), or of one of its
    variants (``cu/<family>.<variant>.cu``)."""
    if family not in families():
        raise ArgumentValueError(
            f"no kernel family {family!r}; the library has: {', '.join(families())}")
    if variant is not None and variant not in variant_sources(family):
        raise ArgumentValueError(f"kernel family {family!r} has no variant {variant!r}; it has: "
                                 f"{', '.join(variant_sources(family)) or 'none'}")
    stem = family if variant is None else f"{family}.{variant}"
    return (resources.files(__package__) / "cu" / f"{stem}.cu").read_text(encoding="utf-8")


def module(family: str, defines=(), instantiate=None, variant: str | None = None,
           arch: str | None = None) -> Module:
    """The compiled module of ``cu/<family>.cu`` (or of its ``variant``, for
    ``arch``: ``module("matmul", variant="sm90", arch="sm_90a", instantiate=...)``)
    on the active backend.

    Compiled once per backend instance, ``defines`` and instantiations
    (``instantiate=None``: the family module's ``INSTANTIATE``), then reused.
    Its kernels are reached as ``module("reductions")["reduce_partial<float, 0>"]``.
    """
    b = active_backend()
    try:  # the common case, a call with the family's defaults: one dictionary look-up
        entry = _MODULES.get((id(b), family, defines, instantiate, variant, arch))
    except TypeError:  # lists of defines or instantiations
        entry = None
    if entry is not None and entry[0] is b:
        return entry[1]
    given = (defines, instantiate, variant, arch)
    defines = normalise_defines(defines)
    if instantiate is None:
        instantiate = tuple(getattr(_family_module(family), "INSTANTIATE", ()))
    instantiate = (instantiate,) if isinstance(instantiate, str) else tuple(instantiate)
    full = (id(b), family, defines, instantiate, variant, arch)
    entry = _MODULES.get(full)
    if entry is None or entry[0] is not b:
        name = (f"wb.kernels.{family}" + (f".{variant}" if variant else "")
                + (f"[{','.join(defines)}]" if defines else ""))
        entry = _MODULES[full] = (b, compile_source(source_text(family, variant), name=name,
                                                    defines=defines, instantiate=instantiate,
                                                    arch=arch))
    try:
        _MODULES[(id(b), family, *given)] = entry
    except TypeError:
        pass
    return entry[1]


# -- helpers for the family modules -------------------------------------------

_C_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
            np.dtype(np.float16): "__half", np.dtype(np.int32): "int",
            np.dtype(np.int64): "long long"}


def c_type(dtype) -> str:
    """The C type of a NumPy dtype: ``float32`` -> ``"float"``."""
    return _C_TYPES[np.dtype(dtype)]


def check_array(function: str, what: str, a, dtypes=None, ndim=None):
    """``a`` if it is a C-contiguous device array with one of ``dtypes`` and
    ``ndim`` dimensions (an int or a tuple of allowed counts), else a
    :class:`~workbench.KernelArgumentError` that says what was wrong and how
    to fix it."""
    b = active_backend()
    where = f"wb.kernels.{function}(): {what}"
    if not b.is_device_array(a):
        if isinstance(a, np.ndarray):
            raise KernelArgumentError(f"{where} must be a device array, got a host NumPy array "
                                      f"of shape {a.shape}; copy it first with wb.to_device(array).")
        raise KernelArgumentError(f"{where} must be a device array (wb.to_device / wb.allocate), "
                                  f"got {type(a).__name__} {a!r:.60}.")
    if dtypes is not None:
        allowed = tuple(np.dtype(d) for d in dtypes)
        if a.dtype not in allowed:
            names = " or ".join(d.name for d in allowed)
            raise KernelArgumentError(f"{where} must be {names}, got {a.dtype}; convert it with "
                                      f".astype('{allowed[0].name}').")
    if ndim is not None:
        counts = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if a.ndim not in counts:
            raise KernelArgumentError(
                f"{where} must have {' or '.join(map(str, counts))} dimension"
                f"{'s' if counts != (1,) else ''}, got shape {tuple(a.shape)}; reshape it.")
    if a.size > 1 and not a.flags.c_contiguous:
        raise KernelArgumentError(f"{where} is a strided view (shape {tuple(a.shape)}, strides "
                                  f"{tuple(a.strides)}); pass wb.xp.ascontiguousarray(...) of it.")
    return a


def check_dtype(function: str, arrays: dict, dtypes) -> np.dtype:
    """Check that every array of ``{"x": x, ...}`` is a contiguous device array
    of one and the same dtype among ``dtypes``; return that dtype."""
    first = None
    for what, a in arrays.items():
        check_array(function, what, a, dtypes)
        if first is None:
            first = (what, a.dtype)
        elif a.dtype != first[1]:
            raise KernelArgumentError(
                f"wb.kernels.{function}(): {what} is {a.dtype} but {first[0]} is {first[1]}; "
                f"all arrays must have the same dtype (convert one with .astype).")
    return first[1]


def compute_capability() -> tuple[int, int] | None:
    """The active device's compute capability, or None on the simulator
    (which runs the portable variants whatever device it imitates)."""
    b = active_backend()
    if b.simulated:
        return None
    return tuple(b.device_properties().compute_capability)


def multiprocessors() -> int:
    """Multiprocessors of the active device (at least 1)."""
    return max(1, int(getattr(active_backend().device_properties(), "multiprocessors", 1) or 1))


def grid_1d(n: int, block: int = 256, per_thread: int = 1, blocks_per_sm: int = 4) -> int:
    """Blocks for a grid-stride loop over ``n`` items (``per_thread`` each in
    one pass): enough to cover them, at most ``blocks_per_sm`` blocks per
    multiprocessor (each loops over the rest), at least 1."""
    needed = math.ceil(max(int(n), 1) / (block * per_thread))
    return max(1, min(needed, blocks_per_sm * multiprocessors()))
