"""Compile and launch on the GPU (:class:`CupyKernels`).

Compilation goes through ``cupy.RawModule``, so CuPy's kernel cache (in
memory and on disk under ``~/.cupy/kernel_cache``) is the only cache; a
source built for another architecture goes through NVRTC directly. A kernel's
launcher calls ``cuLaunchKernel`` with the argument block packed by one
``struct`` call, or from C where :mod:`.native_launch` builds.
"""
from __future__ import annotations

import copy
import ctypes
import dataclasses
import io
import os
import struct
import tempfile
import threading
import time
from typing import Sequence

import cupy
import numpy
from cupy.cuda import driver, runtime

from ... import cxx
from ...errors import LaunchConfigError, NameNotFound
from ..contract import (CompiledModule, CompileFailed, CompileOptions, KernelResources, Kernels,
                        normalise_arch)
from ..nvrtc import check_with_nvrtc
from ..nvrtc.headers import standin_include_dir
from . import native_launch, persistent
from .faults import _faults_as_kernel_faults, _kernel_fault


class CupyModule(CompiledModule):
    compiler = "NVRTC"

    def __init__(self, raw: cupy.RawModule, arch: str, log: str,
                 cache_hit: bool, seconds: float, names: dict | None = None):
        self.raw = raw
        self._names = names or {}  # name expression -> lowered (mangled) name
        self.arch = arch
        self.log = log
        self.cache_hit = cache_hit
        self.compile_seconds = seconds
        self._functions: dict[str, cupy.RawKernel] = {}

    def get_function(self, name: str) -> cupy.RawKernel:
        fn = self._functions.get(name)
        if fn is None:
            fn = self._functions[name] = self.raw.get_function(self._names.get(name, name))
        return fn

    #: module variable name -> the name expression that reaches it
    #: (``&ns::name`` for static variables and variables in namespaces)
    variables: dict = {}

    def _global_pointer(self, name: str):
        """The device address of module variable ``name`` (a MemoryPointer)."""
        expr = self.variables.get(name.lstrip(":"))
        symbol = name
        if expr is not None and expr.startswith("&"):
            mapping = self._names or getattr(self.raw.module, "mapping", None) or {}
            symbol = mapping.get(expr, name)
        try:
            return self.raw.get_global(symbol)
        except (driver.CUDADriverError, runtime.CUDARuntimeError):
            raise NameNotFound(
                f"no __constant__ or __device__ variable {name!r} in this module") from None

    def write_global(self, name: str, data: bytes) -> None:
        host = numpy.frombuffer(bytes(data), dtype=numpy.uint8)
        with _faults_as_kernel_faults():
            self._global_pointer(name).copy_from_host(ctypes.c_void_p(host.ctypes.data),
                                                      host.nbytes)

    def read_global(self, name: str, nbytes: int) -> bytes:
        host = numpy.empty(int(nbytes), dtype=numpy.uint8)
        with _faults_as_kernel_faults():
            self._global_pointer(name).copy_to_host(ctypes.c_void_p(host.ctypes.data),
                                                    host.nbytes)
        return host.tobytes()

    def resources(self, name: str) -> KernelResources:
        fn = self.get_function(name)
        return KernelResources(
            registers=fn.num_regs, shared_bytes=fn.shared_size_bytes,
            local_bytes=fn.local_size_bytes, const_bytes=fn.const_size_bytes,
            max_threads_per_block=fn.max_threads_per_block, arch=self.arch)


def _opt_in(function, opted_in: list[int], shared_mem: int) -> None:
    """Let ``function`` take ``shared_mem`` bytes of dynamic shared memory
    (beyond 48 KiB a kernel must ask for it), remembered in ``opted_in``."""
    function.max_dynamic_shared_size_bytes = shared_mem
    opted_in[0] = shared_mem


def _launch_failed(status: int):
    """Raise the error of a launch that returned ``status`` (a CUresult)."""
    exc = driver.CUDADriverError(status)
    raise _kernel_fault(exc) or exc


def _native_launcher(backend, function, params, formats: list[str], opted_in: list[int]):
    """The launcher of :meth:`CupyBackend.make_launcher` through the C
    launcher (:mod:`.native_launch`), or None where it cannot take this
    kernel (a parameter type it does not pack) or does not run here."""
    codes = "".join("P" if p.is_pointer else f for p, f in zip(params, formats))
    if not set(codes) <= native_launch.CODES or len(codes) > native_launch.MAX_PARAMS:
        return None
    launch = native_launch.launch_function()
    if launch is None:
        return None
    codes = codes.encode()
    func_ptr = function.kernel.ptr

    def launcher(grid, block, args, shared_mem, stream):
        if shared_mem > opted_in[0]:
            _opt_in(function, opted_in, shared_mem)
        status = launch(func_ptr, codes, args, grid[0], grid[1], grid[2], block[0], block[1],
                        block[2], shared_mem, stream.ptr)
        if status:
            _launch_failed(status)

    def between(start, end, grid, block, args, shared_mem, stream):
        if shared_mem > opted_in[0]:
            _opt_in(function, opted_in, shared_mem)
        status = launch(func_ptr, codes, args, grid[0], grid[1], grid[2], block[0], block[1],
                        block[2], shared_mem, stream.ptr, start, end)
        if status:
            _launch_failed(status)
    launcher.packs_python_numbers = True  # checked ints and floats go in as their C types
    launcher.between = between  # the launch between two event records (raw handles), in one call
    launcher.failed = _launch_failed
    fast_type = native_launch.fast_call_type()
    if fast_type is not None:
        current = cupy.cuda.get_current_stream  # (what current_stream() returns, one call less)

        def fast_call(checks, configs, session, log, template, slots):
            return fast_type(func_ptr, codes, checks, configs, opted_in, current, session, backend, log,
                             template, slots, function)
        launcher.fast_call = fast_call
    return launcher


#: NumPy dtype char -> struct format of the C type, for packed launches.
_STRUCT_CODES = {"?": "?", "b": "b", "B": "B", "h": "h", "H": "H", "i": "i", "I": "I",
                 "l": "q", "L": "Q", "q": "q", "Q": "Q", "e": "e", "f": "f", "d": "d"}


class _ArgumentParam:
    """What :meth:`CupyBackend.make_launcher` reads of a parameter, taken from
    an argument (device arrays and None are pointers, NumPy scalars their dtype)."""

    def __init__(self, index: int, a):
        self.name, self.ctype = f"arg{index}", type(a).__name__
        self.is_pointer = a is None or isinstance(a, cupy.ndarray)
        self.dtype = None if self.is_pointer else numpy.asarray(a).dtype


def _pointer_params(args):
    """Parameters that lay ``args`` out, for a launch with no parsed signature."""
    return [_ArgumentParam(i, a) for i, a in enumerate(args)]


#: A null pointer argument for CuPy's RawKernel call.
_NULL = numpy.uint64(0)

#: CuPy does not say whether its kernel cache answered; NVRTC never compiles
#: a module in less than this, while a cache hit (memory or disk) does.
_CACHE_HIT_SECONDS = 0.005


class CupyKernels(Kernels):
    """The compile-and-launch part of :class:`~.backend.CupyBackend` (its
    ``_compiled`` modules are made by the backend's constructor)."""

    def compile(self, source: str, options: CompileOptions,
                kernel_names: Sequence[str]) -> CupyModule:
        persistent.refuse_while_running("load a new module")
        # static variables and variables in namespaces have no plain symbol:
        # NVRTC gives their lowered name for the name expression "&name"
        variables = {}
        for v in cxx.find_globals(source, options.defines):
            expr = v.qualified_name if v.plain_symbol else f"&{v.qualified_name}"
            variables[v.qualified_name] = expr
            variables.setdefault(v.name, expr)
        extra = tuple(e for e in dict.fromkeys(variables.values())
                      if e.startswith("&") and e not in options.name_expressions)
        if extra:
            try:
                module = self._compile(source, dataclasses.replace(
                    options, name_expressions=options.name_expressions + extra), kernel_names)
            except CompileFailed:  # a declaration the variable finder misread: without them
                module = self._compile(source, options, kernel_names)
                variables = {}
        else:
            module = self._compile(source, options, kernel_names)
        module.variables = variables
        return module

    def _compile(self, source: str, options: CompileOptions,
                 kernel_names: Sequence[str]) -> CupyModule:
        arch = normalise_arch(options.arch) if options.arch else self.default_arch()
        if arch != self.default_arch():
            return self._compile_for_arch(source, options, kernel_names, arch)
        opts = dataclasses.replace(options, arch=None).nvrtc_options()  # CuPy adds the device's -arch
        # NVRTC has no C library headers: the workbench's stand-ins (<cstdio>, <cmath>...)
        opts += (f"--include-path={standin_include_dir()}",)
        key = (source, opts, options.name_expressions, self.current_device())
        start = time.perf_counter()
        built = self._compiled.get(key)
        if built is not None:
            # An unchanged cell run again: the module CuPy loaded for it (CuPy would hand back
            # the same one, globals and all, after hashing and preprocessing the source again)
            again = copy.copy(built)
            again.cache_hit, again.compile_seconds = True, time.perf_counter() - start
            return again
        log = io.StringIO()
        raw = cupy.RawModule(code=source, options=opts,
                             name_expressions=options.name_expressions or None)
        try:
            raw.compile(log_stream=log)
        except cupy.cuda.compiler.CompileException as exc:
            raise CompileFailed(exc.get_message() if hasattr(exc, "get_message") else str(exc),
                                compiler="NVRTC") from None
        seconds = time.perf_counter() - start
        module = CupyModule(raw, arch, log.getvalue(), seconds < _CACHE_HIT_SECONDS, seconds)
        if len(self._compiled) >= 512:
            self._compiled.clear()
        self._compiled[key] = module
        return module

    def _compile_for_arch(self, source, options, kernel_names, arch) -> CupyModule:
        """Build for an architecture other than the device's (``--arch sm_90a``,
        ``--arch compute_80``) with NVRTC directly -- CuPy's RawModule always
        targets the device -- and load the image through CuPy."""
        start = time.perf_counter()
        result = check_with_nvrtc(source, options, kernel_names, arch=arch)  # CompileFailed on error
        ptx_only = arch.startswith("compute_")
        image = result.ptx.encode() if ptx_only or not result.cubin else result.cubin
        with tempfile.TemporaryDirectory(prefix="workbench-") as tmp:
            path = os.path.join(tmp, "module.ptx" if ptx_only else "module.cubin")
            with open(path, "wb") as f:
                f.write(image)
            module = CupyModule(cupy.RawModule(path=path), arch, result.log,
                                getattr(result, "cache_hit", False), 0.0,
                                names=dict(result.lowered_names))
            module.nvrtc = result
            try:  # load now, while the file exists, and say clearly if it cannot run here
                for name in list(kernel_names) + [e for e in options.name_expressions
                                                  if not e.startswith("&")]:
                    module.get_function(name)
            except (driver.CUDADriverError, runtime.CUDARuntimeError) as exc:
                raise CompileFailed(
                    f"nvrtc: error: code built for {arch} cannot run on this {self.default_arch()} "
                    f"device ({exc}). Leave out --arch to build for the device, or give "
                    f"--arch compute_XX for PTX that the driver compiles for it.",
                    compiler="NVRTC") from None
        module.compile_seconds = time.perf_counter() - start
        return module

    def launch(self, function, grid, block, args, shared_mem=0, stream=None, cooperative=False):
        if cooperative:  # RawKernel's own call cannot launch cooperatively: launch it directly
            return self.make_launcher(function, _pointer_params(args), cooperative=True)(
                grid, block, args, shared_mem, stream or self.current_stream())
        if any(a is None for a in args):  # a null pointer: 8 zero bytes, as CuPy packs a uint64
            args = tuple(_NULL if a is None else a for a in args)
        if shared_mem > 48 * 1024 and function.max_dynamic_shared_size_bytes < shared_mem:
            function.max_dynamic_shared_size_bytes = shared_mem  # opt in above 48 KiB
        if stream is None:
            function(grid, block, args, shared_mem=shared_mem)
        else:
            with stream:
                function(grid, block, args, shared_mem=shared_mem)

    def make_launcher(self, function, params, cooperative=False):
        """A direct ``cuLaunchKernel`` with the argument block packed by one
        ``struct`` call into a buffer prepared once per kernel: cheaper than
        ``RawKernel.__call__``, which re-derives the layout on every launch.
        Kernels with by-value structs or vectors take the RawKernel path."""
        formats = []
        for p in params:
            if p.is_pointer:
                formats.append("Q")
            else:
                dt = p.dtype
                if dt is None or dt.char not in _STRUCT_CODES:
                    if cooperative:
                        raise LaunchConfigError(
                            "a cooperative launch takes pointers and numbers only on the GPU "
                            f"backend; parameter '{p.name}' is a {p.ctype}")
                    return super().make_launcher(function, params)
                formats.append(_STRUCT_CODES[dt.char])
        opted_in = [function.max_dynamic_shared_size_bytes]  # 48 KiB less static shared
        if not cooperative:
            native = _native_launcher(self, function, params, formats, opted_in)
            if native is not None:
                return native
        packer = struct.Struct("<" + "".join(f + "x" * (8 - struct.calcsize(f)) for f in formats))
        count = len(params)
        pointer_slots = tuple(i for i, p in enumerate(params) if p.is_pointer)
        func_ptr = function.kernel.ptr
        launch_kernel = driver.launchKernel
        if cooperative:
            def launch_kernel(f, gx, gy, gz, bx, by, bz, shared, stream_ptr, params, extra):
                driver.launchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shared, stream_ptr, params)
        per_thread = threading.local()  # each thread packs into its own argument block

        def argument_block():
            buffer = (ctypes.c_char * max(8, packer.size))()
            pointers = (ctypes.c_void_p * max(1, count))(
                *[ctypes.addressof(buffer) + 8 * i for i in range(count)])
            per_thread.block = (buffer, pointers, ctypes.addressof(pointers))
            return per_thread.block

        def launcher(grid, block, args, shared_mem, stream):
            if shared_mem > opted_in[0]:
                _opt_in(function, opted_in, shared_mem)
            try:
                buffer, _, pointers_address = per_thread.block
            except AttributeError:
                buffer, _, pointers_address = argument_block()
            values = list(args)  # args may be reused by the caller (benchmarks)
            for i in pointer_slots:
                v = values[i]
                values[i] = 0 if v is None else v.data.ptr
            packer.pack_into(buffer, 0, *values)
            try:
                launch_kernel(func_ptr, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                              shared_mem, stream.ptr, pointers_address, 0)
            except driver.CUDADriverError as exc:
                fault = _kernel_fault(exc)
                if fault is None:
                    raise
                raise fault from None
        launcher.packs_python_numbers = True  # struct packs a checked int or float exactly
        return launcher

    def suggest_block_size(self, function, shared_mem: int = 0) -> int:
        _, block = driver.occupancyMaxPotentialBlockSize(function.kernel.ptr, shared_mem, 0)
        return block

    def launch_path(self) -> str:
        if native_launch.fast_call_type() is not None:
            return "the C launcher (native/launch.c; common calls wholly in C)"
        return f"Python and CuPy's driver binding ({native_launch.unavailable_reason()})"
