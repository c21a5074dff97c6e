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

from ..backends.base import CompileFailed, CompileOptions, normalise_arch
from ..errors import CompileError, Diagnostic
from ..diagnostics import parse_log
from .kernel import Kernel, KernelTemplate
from ..runtime.session import backend as _active_backend, session
from .signature import OverloadedKernel, find_kernels

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

    @property
    def cache_hit(self) -> bool:
        return bool(self.compiled.cache_hit)

    def __getitem__(self, name: str) -> Kernel:
        if name in self.kernels:
            return self.kernels[name]
        for t in self.templates.values():
            if name in t.instances:
                return t.instances[name]
        raise KeyError(f"no kernel {name!r} in module {self.name!r}; it has: "
                       f"{', '.join(self.kernel_names()) or 'no kernels'}")

    def kernel(self, name: str | None = None) -> Kernel:
        """Kernel ``name``, or the module's only kernel when ``name`` is None."""
        if name is not None:
            return self[name]
        names = self.kernel_names()
        if len(names) != 1:
            raise ValueError(f"module {self.name!r} has {len(names)} kernels "
                             f"({', '.join(names) or 'none'}); say which with name=")
        return self[names[0]]

    def kernel_names(self) -> list[str]:
        names = list(self.kernels)
        for t in self.templates.values():
            names += list(t.instances)
        return names

    def __iter__(self):
        return iter(self.kernel_names())

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
    ``defines`` are ``"NAME"`` or ``"NAME=VALUE"``; ``options`` are passed to
    NVRTC verbatim. ``line_offset`` is added to compiler line numbers (a
    ``%%cuda`` cell passes 1 for its magic line). The module is registered in
    ``wb.modules`` under ``name`` (default: its kernels' names), replacing an
    earlier one. A failed compile raises :class:`~workbench.CompileError`.
    """
    if isinstance(defines, str):
        defines = (defines,)
    if isinstance(options, str):
        options = (options,)
    if isinstance(instantiate, str):
        instantiate = (instantiate,)
    opts = CompileOptions(arch=arch, defines=tuple(defines), std=std, fast_math=fast_math,
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
