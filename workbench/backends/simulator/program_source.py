"""The source of a whole program, turned into what g++ compiles for the simulator.

Every rewrite keeps each line where it was, so g++ reports the program's own lines:

* ``kernel<<<grid, block, shmem, stream>>>(args)`` becomes a call of the program runtime
  (``__wbsim_launch_program``, program_runtime/wbsim_program_launch.h);
* the few inline PTX statements that only read a special register
  (``asm("mov.u32 %0, %%laneid;" : "=r"(lane))``) become calls that return it;
* a kernel cast to ``void*`` for ``cudaLaunchKernel`` / ``cudaLaunchCooperativeKernel``
  loses the cast: the simulator calls the kernel with its arguments' types.

:func:`gpu_only_features` finds what only a GPU runs (CUDA libraries, the driver API,
NVRTC, graphics interop) before anything is compiled, and :func:`explain_log` turns
g++'s messages about such names into the same words.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from ... import cxx


# -- the launch syntax -------------------------------------------------------------------
def _skip_back(code: str, j: int) -> int:
    while j >= 0 and code[j].isspace():
        j -= 1
    return j


def _match_back(code: str, j: int, opening: str, closing: str) -> int:
    """The offset of the bracket opening the one closed at ``j``, or -1."""
    depth = 0
    while j >= 0:
        if opening == "<" and code[j] == ")":  # (4 > 2) inside template arguments
            j = _match_back(code, j, "(", ")") - 1
            continue
        if code[j] == closing:
            depth += 1
        elif code[j] == opening:
            depth -= 1
            if depth == 0:
                return j
        elif code[j] in ";{}":
            return -1
        j -= 1
    return -1


def _callee_start(code: str, end: int) -> int:
    """Where the kernel expression before ``<<<`` at ``end`` starts (a name,
    ``ns::name``, ``name<T, 4>``, ``(*pointer)``), or -1."""
    j = _skip_back(code, end - 1)
    if j >= 0 and code[j] == ")":
        return _match_back(code, j, "(", ")")
    start = -1
    while j >= 0:
        if code[j] == ">":
            j = _skip_back(code, _match_back(code, j, "<", ">") - 1)
            if j < 0:
                return -1
        m = re.search(r"[A-Za-z_]\w*$", code[max(0, j - 200):j + 1])
        if not m:
            return start
        start = j + 1 - len(m.group())
        j = _skip_back(code, start - 1)
        if j >= 1 and code[j - 1:j + 1] == "::":
            start = j - 1
            j = _skip_back(code, j - 2)
            continue
        return start
    return start


def _chevron_close(code: str, start: int) -> int:
    """The offset of the ``>>>`` closing a launch configuration, or -1."""
    depth = 0
    for k in range(start, len(code)):
        c = code[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ";" and depth <= 0:
            return -1
        elif c == ">" and depth == 0 and code.startswith(">>>", k):
            return k
    return -1


def _macro_parameters(code: str, at: int) -> list[str]:
    """The parameters of the function-like ``#define`` whose body holds
    offset ``at`` of ``code`` (continued lines included), or []."""
    start = code.rfind("\n", 0, at) + 1
    while start > 1 and code[:start - 1].rstrip(" \t").endswith("\\"):
        start = code.rfind("\n", 0, start - 1) + 1
    m = re.match(r"[ \t]*#[ \t]*define[ \t]+\w+\(([^)]*)\)", code[start:at])
    return [p.strip() for p in m.group(1).split(",")] if m else []


def rewrite_launches(source: str) -> str:
    """``source`` with every ``kernel<<<...>>>(args)`` turned into a call of
    the program runtime, each line where it was."""
    code = cxx.blank_comments_and_literals(source)
    if "<<<" not in code:
        return source
    pieces, last = [], 0
    for m in re.finditer("<<<", code):
        at = m.start()
        if at < last:
            continue
        callee = _callee_start(code, at)
        close = _chevron_close(code, at + 3)
        if callee < last or close < 0:
            continue
        paren = close + 3
        while paren < len(code) and code[paren].isspace():
            paren += 1
        if paren >= len(code) or code[paren] != "(":
            continue
        end = cxx.matching(code, paren)
        if end >= len(code):
            continue
        kernel = source[callee:at]
        name = " ".join(kernel.split()).replace("\\", "\\\\").replace('"', '\\"')
        quoted = f'"{name}"'
        if name in _macro_parameters(code, callee):  # #define LAUNCH(k) k<<<...>>>: the argument's name
            quoted = f"#{name}"
        args = source[paren + 1:end]
        text = (f'__wbsim_launch_program({quoted}, __wbsim_cfg({source[at + 3:close]}), '
                f"[&](auto... __wbsim_a) {{ {kernel}(__wbsim_a...); }}"
                + (f", {args})" if args.strip() else ")"))
        text += "\n" * source.count("\n", close, paren)
        pieces += [source[last:callee], text]
        last = end + 1
    pieces.append(source[last:])
    return "".join(pieces)


# -- inline PTX that reads a special register ------------------------------------------------
#: Special registers a ``mov`` may read, and the runtime's function that answers.
PTX_REGISTERS = {"laneid": "laneid", "warpid": "warpid", "smid": "smid", "clock": "clock",
                 "clock64": "clock64", "globaltimer": "globaltimer", "lanemask_lt": "lanemask_lt",
                 "lanemask_le": "lanemask_le", "lanemask_eq": "lanemask_eq",
                 "lanemask_gt": "lanemask_gt", "lanemask_ge": "lanemask_ge"}
_ASM_MOV = re.compile(r'(?:asm|__asm__|__asm)\s*(?:volatile\b|__volatile__\b)?\s*\(\s*'
                      r'"\s*mov\.[usb](?:32|64)\s+%0\s*,\s*%?%(?P<reg>\w+)\s*;?\s*"\s*:\s*'
                      r'"=[rlhn]"\s*\(')


def rewrite_special_registers(source: str) -> str:
    """``source`` with each ``asm("mov.u32 %0, %%laneid;" : "=r"(x))`` turned into
    ``((x) = __wbsim_ptx_laneid())``; any other inline PTX is left (and refused)."""
    if "asm" not in source:
        return source
    code = cxx.blank_comments_and_literals(source)
    pieces, last = [], 0
    for m in re.finditer(r"\b(?:asm|__asm__|__asm)\b", code):
        if m.start() < last:
            continue
        found = _ASM_MOV.match(source, m.start())
        if not found or found["reg"] not in PTX_REGISTERS:
            continue
        open_paren = found.end() - 1
        close = cxx.matching(code, open_paren)
        after = re.compile(r"\s*\)").match(code, close + 1)
        if close >= len(code) or not after:
            continue
        target = source[open_paren + 1:close]
        end = after.end()
        text = f"(({target}) = __wbsim_ptx_{PTX_REGISTERS[found['reg']]}())"
        pieces += [source[last:m.start()], text + "\n" * source.count("\n", m.start(), end)]
        last = end
    pieces.append(source[last:])
    return "".join(pieces)


# -- kernels cast to void* for cudaLaunchKernel ------------------------------------------------
_LAUNCH_CALL = re.compile(r"\b(?:cudaLaunchKernel|cudaLaunchCooperativeKernel)\s*\(")
_VOID_CAST = re.compile(r"^\s*(?:\(\s*(?:const\s+)?void\s*\*\s*\)\s*&?\s*(?P<plain>.+?)"
                        r"|(?:reinterpret_cast|static_cast)\s*<\s*(?:const\s+)?void\s*\*\s*>\s*"
                        r"\(\s*&?\s*(?P<call>.+?)\s*\))\s*$", re.S)


def rewrite_kernel_casts(source: str) -> str:
    """``cudaLaunchKernel((void*)kernel, ...)`` with the cast taken off its kernel."""
    if "cudaLaunch" not in source:
        return source
    code = cxx.blank_comments_and_literals(source)
    pieces, last = [], 0
    for m in _LAUNCH_CALL.finditer(code):
        open_paren = m.end() - 1
        close = cxx.matching(code, open_paren)
        args = cxx.split_top_level(code[open_paren + 1:close])
        if not args:
            continue
        start = open_paren + 1
        end = start + len(args[0])
        cast = _VOID_CAST.match(source[start:end])
        if not cast:
            continue
        kernel = cast["plain"] or cast["call"]
        pieces += [source[last:start], kernel + "\n" * source.count("\n", start, end)]
        last = end
    pieces.append(source[last:])
    return "".join(pieces)


def rewrite(source: str) -> str:
    """Every rewrite of this module (lines kept)."""
    return rewrite_launches(rewrite_kernel_casts(rewrite_special_registers(source)))


# -- what only a GPU runs ----------------------------------------------------------------------
#: Headers of CUDA libraries and other GPU-only features, by the start of their name.
GPU_ONLY_HEADERS = (
    ("cublas", "cuBLAS"), ("cufft", "cuFFT"), ("curand", "cuRAND"), ("cusparse", "cuSPARSE"),
    ("cusolver", "cuSOLVER"), ("cudnn", "cuDNN"), ("cutensor", "cuTENSOR"), ("nccl", "NCCL"),
    ("npp", "NPP"), ("nvjpeg", "nvJPEG"), ("nvrtc", "NVRTC (runtime compilation)"),
    ("cufile", "cuFile"), ("nvml", "NVML"), ("cupti", "CUPTI"), ("thrust/", "Thrust"),
    ("cub/", "CUB"), ("cuda/", "the CUDA C++ standard library (libcu++)"),
    ("cuda_gl_interop", "OpenGL interop"), ("cuda_egl_interop", "EGL interop"),
    ("cudaEGL", "EGL interop"), ("cudaGL", "OpenGL interop"), ("cuda_d3d", "Direct3D interop"),
    ("cudaD3D", "Direct3D interop"), ("cuda_vdpau_interop", "VDPAU interop"),
    ("cudaVDPAU", "VDPAU interop"), ("GL/", "OpenGL"), ("GLES", "OpenGL ES"), ("EGL/", "EGL"),
    ("mma.h", "tensor-core operations (wmma)"), ("cuda_awbarrier", "asynchronous barriers"),
    ("cuda_pipeline", "asynchronous copies (cuda_pipeline)"), ("mpi.h", "MPI"),
)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](?P<name>[^>"\n]+)[>"]', re.M)


def gpu_only_features(source: str, provided: frozenset[str] = frozenset()) -> list[tuple[int, int, str]]:
    """``(line, column, message)`` for every ``#include`` of ``source`` that names a
    CUDA library or another feature only a GPU has (the headers the simulator
    ``provided``, such as ``cuda/barrier``, are not)."""
    code = cxx.blank_comments_and_literals(source)
    found = []
    for m in _INCLUDE.finditer(code):
        name = m["name"].strip()
        if name in provided:
            continue
        for prefix, feature in GPU_ONLY_HEADERS:
            if name.startswith(prefix) or name.startswith("/" + prefix):
                line, col = cxx.line_col(code, m.start("name"))
                found.append((line, col, f"<{name}>: {feature} is not available to programs on the "
                                         "simulator; it runs on a GPU"))
                break
    return found


_UNDECLARED = re.compile(r"^(?P<where>[^:\n]+:\d+:\d+): error: [‘'`](?P<name>(?:cuda|cu|CU|nvrtc|nvtx|nccl)"
                         r"[A-Za-z]\w*)[’'`] (?:was not declared in this scope|does not name a type|"
                         r"has not been declared)(?:; did you mean .*)?$", re.M)
_NO_HEADER = re.compile(r"^(?P<where>[^:\n]+:\d+:\d+): fatal error: (?P<header>[\w./]+): "
                        r"No such file or directory$", re.M)
_LIBRARY_PREFIXES = (("cublas", "cuBLAS"), ("cufft", "cuFFT"), ("curand", "cuRAND"),
                     ("cusparse", "cuSPARSE"), ("cusolver", "cuSOLVER"), ("cudnn", "cuDNN"),
                     ("nccl", "NCCL"), ("nvrtc", "NVRTC (runtime compilation)"), ("npp", "NPP"),
                     ("cudaGraphicsGL", "OpenGL interop"), ("cudaGLSet", "OpenGL interop"),
                     ("cudaGraphicsEGL", "EGL interop"), ("cudaEGL", "EGL interop"),
                     ("cudaGraphicsD3D", "Direct3D interop"), ("cudaGraphics", "graphics interop"))


def _feature_of(name: str) -> str | None:
    """The GPU-only feature a C++ name belongs to, or None (a runtime API name)."""
    for prefix, feature in _LIBRARY_PREFIXES:
        if name.startswith(prefix):
            return feature
    if name.startswith(("cu", "CU")) and not name.startswith("cuda"):
        return "the CUDA driver API"
    return None


@functools.lru_cache(maxsize=4)
def provided_headers(*folders: Path) -> frozenset[str]:
    """The headers the simulator has in ``folders``, by the name a program includes."""
    return frozenset(str(p.relative_to(f)) for f in folders for p in f.rglob("*") if p.is_file())


def explain_log(log: str, supported: tuple[str, ...]) -> str:
    """g++'s log with each undeclared CUDA name, or missing GPU-only header, said in
    one line: what it is, and that it runs on a GPU."""
    def undeclared(m: re.Match) -> str:
        name = m["name"]
        feature = _feature_of(name)
        if feature:
            return f"{m['where']}: error: {name}: {feature} is not available to programs on the simulator; it runs on a GPU"
        return (f"{m['where']}: error: {name} is not supported by the simulator's program runtime "
                f"(it works on a GPU); supported: {', '.join(supported)}")

    def no_header(m: re.Match) -> str:
        header = m["header"]
        for prefix, feature in GPU_ONLY_HEADERS:
            if header.startswith(prefix):
                return (f"{m['where']}: error: <{header}>: {feature} is not available to programs on the "
                        "simulator; it runs on a GPU")
        return m.group()
    return _NO_HEADER.sub(no_header, _UNDECLARED.sub(undeclared, log))


@functools.lru_cache(maxsize=4)
def declared_api(folder: Path) -> tuple[str, ...]:
    """The ``cuda*`` functions the headers of ``folder`` declare (macros that take
    arguments count, object-like ones do not)."""
    names: set[str] = set()
    macros: set[str] = set()
    for header in sorted(folder.rglob("*.h")):
        text = cxx.blank_comments_and_literals(header.read_text())
        macros |= set(re.findall(r"#\s*define\s+(\w+)\b(?!\()", text))
        names |= set(re.findall(r"\b(cuda[A-Z]\w*)\s*\(", text))
    return tuple(sorted(names - macros))
