"""``wb.compile``: CUDA C++ source -> a :class:`Module` of checked kernels.

The active backend compiles (NVRTC through CuPy's kernel cache on a GPU, the
simulator's own cache on the CPU); this module finds the kernels in the
source, maps compiler messages to the user's line numbers and keeps the
registry ``wb.modules`` so that re-running a cell replaces its kernels.
"""
from __future__ import annotations

import html
import re
import time

import numpy as np

from .. import cxx

from ..backends.contract import CompileFailed, CompileOptions, normalise_arch
from ..errors import ArgumentTypeError, ArgumentValueError, CompileError, Diagnostic, NameNotFound
from ..diagnostics import parse_log
from .kernel import Kernel, KernelTemplate
from ..runtime.session import backend as _active_backend, session
from .signature import OverloadedKernel, find_kernels
from .variables import evaluate_dim, value_array, variable_dtype

#: Compiled modules by name; re-compiling under a name replaces the entry.
modules: dict = session().modules


class Module:
    """The kernels compiled from one source (one ``%%cuda`` cell).

    ``module["saxpy"]`` is a :class:`~workbench.Kernel`; templates are
    reached by their name expression (``module["scale<float>"]``) or through
    ``module.templates["scale"]``.
    """

    def __init__(self, name, source, options, compiled, backend, kernels, templates,
                 warnings, line_offset, seconds):
        self.name = name
        self.source = source
        self.options = options
        self.compiled = compiled
        self.backend = backend
        self.kernels: dict[str, Kernel] = kernels
        self.templates: dict[str, KernelTemplate] = templates
        self.warnings: list[Diagnostic] = warnings
        self.line_offset = line_offset
        self.seconds = seconds
        #: values written with set_global, by variable: a copy of the module
        #: (pickled for a Dask worker, compiled again by wb.tune) gets them too
        self.assigned: dict[str, np.ndarray] = {}

    @property
    def cache_hit(self) -> bool:
        return bool(self.compiled.cache_hit)

    def __getitem__(self, name: str) -> Kernel:
        if name in self.kernels:
            return self.kernels[name]
        for t in self.templates.values():
            if name in t.instances:
                return t.instances[name]
        raise NameNotFound(f"no kernel {name!r} in module {self.name!r}; it has: "
                           f"{', '.join(self.kernel_names()) or 'no kernels'}")

    def kernel(self, name: str | None = None) -> Kernel:
        """Kernel ``name``, or the module's only kernel when ``name`` is None."""
        if name is not None:
            return self[name]
        names = self.kernel_names()
        if len(names) != 1:
            raise ArgumentValueError(f"module {self.name!r} has {len(names)} kernels "
                                     f"({', '.join(names) or 'none'}); say which with name=")
        return self[names[0]]

    def kernel_names(self) -> list[str]:
        names = list(self.kernels)
        for t in self.templates.values():
            names += list(t.instances)
        return names

    def __iter__(self):
        return iter(self.kernel_names())

    def reduce_kernel(self, kernel: Kernel):
        """``pickle`` support for one of this module's kernels
        (:meth:`Kernel.__reduce__`): the source, options and name, from which
        the receiving process compiles the kernel again on its own active
        backend (a device function cannot travel between processes)."""
        key = kernel.name
        if self.kernels.get(key) is not kernel:
            key = next((e for t in self.templates.values() for e, k in t.instances.items()
                        if k is kernel), key)
        return (rebuild_kernel, (self.source, self.options, self.name, self.line_offset, key,
                                 dict(self.assigned)))

    # -- module variables ---------------------------------------------------------------
    @property
    def variables(self) -> dict:
        """The ``__constant__`` and ``__device__`` variables of the source
        (``static`` ones included), by name, as :class:`workbench.cxx.GlobalVariable`."""
        found = {}
        for v in cxx.find_globals(self.source, self.options.defines + self._predefined):
            found.setdefault(v.qualified_name, v)
            found.setdefault(v.name, v)
        return found

    def _variable(self, name: str):
        v = self.variables.get(name.lstrip(":"))
        if v is None:
            known = ", ".join(sorted({v.qualified_name for v in self.variables.values()})) or "none"
            raise NameNotFound(f"module {self.name!r} has no __constant__ or __device__ variable "
                               f"{name!r} (its variables: {known})")
        return v

    def _dtype(self, v, dtype=None) -> np.dtype:
        """The dtype of variable ``v``'s elements: from its declaration (a
        struct's from the compiler, measured once), or ``dtype``."""
        if dtype is not None:
            return np.dtype(dtype)
        known = self.__dict__.setdefault("_variable_dtypes", {})
        if v.qualified_name not in known:
            macros = cxx.scan(self.source, self.options.defines + self._predefined).macros
            known[v.qualified_name] = variable_dtype(self, v, macros)
        return known[v.qualified_name]

    def _shape(self, v) -> tuple | None:
        """The declared shape of variable ``v`` (``()`` for a scalar), None
        where a dimension is not a constant the workbench can evaluate."""
        macros = cxx.scan(self.source, self.options.defines + self._predefined).macros
        shape = tuple(evaluate_dim(d, macros) for d in v.dims)
        return None if any(d is None for d in shape) else shape

    def set_global(self, name: str, value, dtype=None) -> None:
        """Set the module's ``__constant__`` or ``__device__`` variable ``name``
        (``static`` ones included; ``ns::name`` inside a namespace) to
        ``value``, like ``cudaMemcpyToSymbol``. ``value`` is converted to the
        variable's type and holds the whole variable: an array as many
        elements as it declares (a shorter or longer one is refused), a
        struct a dict of every field (nested dicts, lists for arrays of
        structs) or a NumPy structured value with its field names. A pointer
        variable takes a device array (its address) or None. ``dtype=``
        overrides the declaration (then the value's own size is written)."""
        v = self._variable(name)
        dt = self._dtype(v, dtype)
        if v.pointer_depth and (value is None or self.backend.is_device_array(value)):
            value = 0 if value is None else self.backend.device_pointer(value)
        elif self.backend.is_device_array(value):
            value = self.backend.to_host(value)
        shape = self._shape(v) if dtype is None else None
        data = value_array(value, dt, shape, v.qualified_name)
        self.compiled.write_global(v.qualified_name, data.tobytes())
        if not v.pointer_depth:  # an address means nothing in another process
            self.assigned[v.qualified_name] = data

    def get_global(self, name: str, dtype=None, shape=None):
        """The current value of module variable ``name`` as a NumPy array of
        the declared type and shape (a NumPy scalar for a scalar variable; a
        structured value for a struct, its dtype with the struct's field
        names, offsets and size as compiled); ``dtype``/``shape`` override
        the declaration (types the workbench cannot map, sizes it cannot
        evaluate)."""
        v = self._variable(name)
        dt = self._dtype(v, dtype)
        if shape is None:
            shape = self._shape(v)
            if shape is None:
                raise ArgumentTypeError(
                    f"the size of variable {v.qualified_name!r} "
                    f"([{']['.join(v.dims)}]) is not a constant the workbench can "
                    f"evaluate; pass shape=")
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        count = int(np.prod(shape))
        data = self.compiled.read_global(v.qualified_name, dt.itemsize * count)
        out = np.frombuffer(data, dtype=dt, count=count).reshape(shape).copy()
        return out[()] if out.ndim == 0 else out

    @property
    def _predefined(self) -> tuple:
        return _predefined(self.options.arch, self.backend)

    def summary(self) -> str:
        """One line: what was compiled, how long it took, cache or not."""
        what = ", ".join(self.kernel_names()) or "no kernels"
        how = (f"cache hit ({self.seconds * 1e3:.2f} ms)" if self.cache_hit
               else f"compiled in {self.seconds * 1e3:.0f} ms")
        arch = getattr(self.compiled, "arch", None)
        where = self.backend.name + (f", {arch}" if arch else "")
        warn = f", {len(self.warnings)} warning{'s' if len(self.warnings) != 1 else ''}" if self.warnings else ""
        # a cell's module is named after its first kernel: "saxpy: saxpy" says it twice
        named = what if what == self.name else f"{self.name}: {what}"
        return f"{named} — {how} [{where}{warn}]"

    def __repr__(self) -> str:
        return f"<wb.Module {self.summary()}>"

    def _repr_html_(self) -> str:
        items = "".join(f"<li><code>{html.escape(str(self[n].signature))}</code></li>"
                        for n in self.kernel_names())
        return f"<div>{html.escape(self.summary())}<ul>{items}</ul></div>"


def _predefined(arch: str | None, b) -> tuple[str, ...]:
    """The macros every CUDA compiler defines for device code, so that the
    scanner sees the ``#ifdef __CUDACC__`` / ``#if __CUDA_ARCH__ >= 800``
    branches NVRTC and the simulator compile."""
    digits = re.sub(r"\D", "", normalise_arch(arch) or "")
    if digits:
        cc = int(digits) * 10
    else:
        major, minor = b.device_properties().compute_capability
        cc = major * 100 + minor * 10
    return ("__CUDACC__", "__CUDACC_RTC__", f"__CUDA_ARCH__={cc}")


def compile(source: str, *, name: str | None = None, arch: str | None = None,
            defines=(), std: str | None = None, fast_math: bool = False,
            options=(), instantiate=(), checked: bool = False,
            line_offset: int = 0) -> Module:
    """Compile CUDA C++ ``source`` on the active backend.

    Every ``extern "C" __global__`` function becomes a :class:`Kernel`; each
    ``instantiate`` entry (``"scale<float>"``) instantiates a template kernel.
    ``defines``: a dict ``{"WIDTH": 512}`` (values written as C literals)
    or a list of ``"NAME"`` / ``"NAME=VALUE"`` strings; anything else raises
    :class:`~workbench.errors.DefinesError`. ``options`` are passed to NVRTC
    verbatim. ``line_offset`` is added to compiler line numbers (a
    ``%%cuda`` cell passes 1 for its magic line). The module is registered in
    ``wb.modules`` under ``name`` (default: its kernels' names), replacing an
    earlier one. A failed compile raises :class:`~workbench.CompileError`.
    """
    if isinstance(options, str):
        options = (options,)
    if isinstance(instantiate, str):
        instantiate = (instantiate,)
    opts = CompileOptions(arch=arch, defines=defines, std=std, fast_math=fast_math,
                          extra=tuple(options), name_expressions=tuple(instantiate),
                          checked=checked)
    b = _active_backend()
    try:
        signatures = find_kernels(source, opts.defines + _predefined(opts.arch, b))
    except OverloadedKernel as exc:
        raise CompileError([Diagnostic("error", str(exc), exc.line + line_offset)],
                           source, "", line_offset, compiler="workbench") from None
    templates = {s.template_name: s for s in signatures if s.is_template}
    templates.update({s.name: s for s in signatures if s.is_template})
    for expr in opts.name_expressions:
        base = expr.split("<", 1)[0].strip()
        if base not in templates:
            raise CompileError([Diagnostic(
                "error", f"--instantiate {expr!r}: no template kernel named {base!r} in this source "
                         f"(kernels: {', '.join(s.name for s in signatures) or 'none'})")],
                source, "", line_offset, compiler="workbench")
    # Plain C++-linkage kernels are reachable through their (qualified) name as a name expression.
    plain = [s.qualified_name for s in signatures if not s.extern_c and not s.is_template]
    if plain:
        opts = CompileOptions(**{**opts.__dict__, "name_expressions": opts.name_expressions + tuple(plain)})
    extern_c = [s.name for s in signatures if s.extern_c and not s.is_template]

    start = time.perf_counter()
    try:
        compiled = b.compile(source, opts, extern_c)
    except CompileFailed as exc:
        diags = parse_log(exc.log, source, line_shift=exc.line_shift, line_offset=line_offset)
        raise CompileError(diags, source, exc.log, line_offset, exc.compiler) from None
    seconds = time.perf_counter() - start

    warnings = [d for d in parse_log(compiled.log, source, line_shift=compiled.line_shift,
                                     line_offset=line_offset) if d.severity != "error"] \
        if compiled.log.strip() else []
    module = Module(name or "+".join(s.name for s in signatures) or "module", source, opts,
                    compiled, b, {}, {}, warnings, line_offset, seconds)
    for s in signatures:
        if s.is_template:
            instances = {e: Kernel(s.instantiate(e), module, compiled.get_function(e))
                         for e in opts.name_expressions
                         if e.split("<", 1)[0].strip() in (s.name, s.qualified_name)}
            module.templates[s.name] = KernelTemplate(s.name, instances)
        else:
            module.kernels[s.name] = Kernel(s, module, compiled.get_function(s.qualified_name))
    modules[module.name] = module
    return module


# -- kernels sent to another process (a Dask worker) -------------------------------------------

#: Modules rebuilt in this process from a pickled kernel: (backend id, source, options) -> Module.
_rebuilt: dict = {}


def rebuild_kernel(source: str, options: CompileOptions, name: str, line_offset: int, key: str,
                   assigned: dict | None = None):
    """The kernel ``key`` of ``source`` compiled with ``options`` on this
    process's active backend (compiled once per process and backend), its
    module variables set to ``assigned`` (what ``set_global`` wrote in the
    original)."""
    b = _active_backend()
    cache_key = (id(b), source, options)
    module = _rebuilt.get(cache_key)
    if module is None or module.backend is not b:
        module = compile(source, name=name, arch=options.arch, defines=options.defines,
                         std=options.std, fast_math=options.fast_math, options=options.extra,
                         instantiate=tuple(e for e in options.name_expressions if "<" in e),
                         checked=options.checked, line_offset=line_offset)
        _rebuilt[cache_key] = module
    for variable, value in (assigned or {}).items():
        module.set_global(variable, value, dtype=value.dtype)
    return module[key]
