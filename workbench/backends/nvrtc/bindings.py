"""The NVRTC library, through ``cuda.bindings`` or through CuPy's wrapper.

Both wrappers offer the same two calls: ``version()`` and ``compile(source,
options, name_expressions, headers)``, which returns ``(ok, log, ptx, cubin,
lowered_names)``. :func:`library` picks the first one that loads.
"""
from __future__ import annotations

import functools
from typing import Sequence

#: The name NVRTC gives the source in its log: ``cell.cu(LINE): error: ...``.
PROGRAM_NAME = "cell.cu"


def is_real_arch(options: Sequence[str]) -> bool:
    """True when the options compile for an ``sm_XX`` target (so a cubin exists)."""
    return any(o.startswith("--gpu-architecture=sm_") for o in options)


class CudaBindingsNvrtc:
    """NVRTC calls through ``cuda.bindings.nvrtc`` (each returns a status tuple)."""

    def __init__(self):
        from cuda.bindings import nvrtc  # lazy: optional package, may be missing
        self.lib = nvrtc

    def _check(self, result):
        status, *values = result
        if status != self.lib.nvrtcResult.NVRTC_SUCCESS:
            _, text = self.lib.nvrtcGetErrorString(status)
            raise RuntimeError(f"NVRTC: {text.decode()}")
        return values[0] if len(values) == 1 else values

    def version(self) -> tuple[int, int]:
        return tuple(self._check(self.lib.nvrtcVersion()))

    def supported_archs(self) -> tuple[int, ...]:
        """The ``sm_XY`` numbers this NVRTC compiles for (``(75, 80, ..., 120)``)."""
        return tuple(self._check(self.lib.nvrtcGetSupportedArchs()))

    def compile(self, source, options, name_expressions, headers):
        """``(ok, log, ptx, cubin, lowered_names)``."""
        nv = self.lib
        prog = self._check(nv.nvrtcCreateProgram(
            source.encode(), PROGRAM_NAME.encode(), len(headers),
            [h.encode() for h in headers.values()], [n.encode() for n in headers]))
        try:
            for expr in name_expressions:
                self._check(nv.nvrtcAddNameExpression(prog, expr.encode()))
            (status,) = nv.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
            log = self._read(nv.nvrtcGetProgramLogSize, nv.nvrtcGetProgramLog, prog).decode(errors="replace")
            if status != nv.nvrtcResult.NVRTC_SUCCESS:
                return False, log, "", None, {}
            ptx = self._read(nv.nvrtcGetPTXSize, nv.nvrtcGetPTX, prog).decode(errors="replace")
            cubin = None
            if is_real_arch(options):
                cubin = self._read(nv.nvrtcGetCUBINSize, nv.nvrtcGetCUBIN, prog, text=False) or None
            lowered = {e: self._check(nv.nvrtcGetLoweredName(prog, e.encode())).decode()
                       for e in name_expressions}
            return True, log, ptx, cubin, lowered
        finally:
            nv.nvrtcDestroyProgram(prog)

    def _read(self, get_size, get, prog, text: bool = True) -> bytes:
        size = self._check(get_size(prog))
        buf = b" " * size
        self._check(get(prog, buf))
        # text ends with a NUL; a binary (the cubin) may end in zero bytes that belong to it
        return buf.rstrip(b"\0") if text else buf


class CupyNvrtc:
    """NVRTC calls through CuPy's wrapper (raises ``NVRTCError``)."""

    def __init__(self):
        from cupy_backends.cuda.libs import nvrtc  # lazy: CuPy is optional and slow to import
        self.lib = nvrtc

    def version(self) -> tuple[int, int]:
        return tuple(self.lib.getVersion())

    def supported_archs(self) -> tuple[int, ...]:
        """The ``sm_XY`` numbers this NVRTC compiles for."""
        return tuple(self.lib.getSupportedArchs())

    def compile(self, source, options, name_expressions, headers):
        """``(ok, log, ptx, cubin, lowered_names)``."""
        nv = self.lib
        prog = nv.createProgram(source, PROGRAM_NAME, [h.encode() for h in headers.values()],
                                [n.encode() for n in headers])
        try:
            for expr in name_expressions:
                nv.addNameExpression(prog, expr)
            try:
                nv.compileProgram(prog, list(options))
            except nv.NVRTCError:
                return False, nv.getProgramLog(prog), "", None, {}
            log = nv.getProgramLog(prog)
            ptx = nv.getPTX(prog)
            ptx = ptx.decode(errors="replace") if isinstance(ptx, bytes) else ptx
            cubin = nv.getCUBIN(prog) if is_real_arch(options) else None
            lowered = {e: nv.getLoweredName(prog, e) for e in name_expressions}
            return True, log.rstrip("\0"), ptx.rstrip("\0"), cubin or None, lowered
        finally:
            nv.destroyProgram(prog)


@functools.lru_cache(maxsize=1)
def library():
    """The first NVRTC wrapper that loads and answers, or ``None``. Cached."""
    for wrapper in (CudaBindingsNvrtc, CupyNvrtc):
        try:
            lib = wrapper()
            lib.version()  # loads libnvrtc: fails here when only the Python module exists
            return lib
        except Exception:  # ImportError, missing libnvrtc.so, ...
            continue
    return None


def nvrtc_available() -> bool:
    """True when NVRTC can be loaded (from cuda.bindings or CuPy). Cached."""
    return library() is not None


def supported_archs() -> tuple[int, ...] | None:
    """The architectures (``sm_XY`` as ``XY``) NVRTC compiles for, or None
    without NVRTC (or where it cannot say)."""
    lib = library()
    try:
        return lib.supported_archs() if lib is not None else None
    except Exception:  # an NVRTC or a wrapper without the call
        return None


def nvrtc_version() -> str | None:
    """NVRTC's version as ``"13.0"``, or ``None`` without NVRTC."""
    lib = library()
    if lib is None:
        return None
    major, minor = lib.version()
    return f"{major}.{minor}"
