"""Turn a cell's CUDA C++ into the C++ the simulator compiles with g++.

The user's text is kept line for line (``#line 1 "cell.cu"``), so g++ reports
the cell's own line numbers. Two things change:

* ``extern __shared__ T name[];`` (dynamic shared memory) becomes a pointer
  to this OS thread's dynamic shared memory buffer, on the same line;
* a launcher per kernel is appended after ``#line 1 "wbsim_launchers"``.

Features the CPU cannot run (inline PTX, textures, tensor cores, dynamic
parallelism, bfloat16) are found first and reported at their line.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Sequence

from ... import cxx

#: The name g++ gives the cell in its messages (the same as NVRTC's).
SOURCE_NAME = "cell.cu"

# (pattern, message, words one of which every match contains: a quick test before the search)
_UNSUPPORTED = [
    (re.compile(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile\b|__volatile__\b)?\s*\("),
     "inline PTX assembly (asm) cannot run on the CPU simulator; "
     "use a CUDA intrinsic instead or run this cell on a GPU", ("asm",)),
    (re.compile(r"\b(?:tex[123]D\w*|tex1Dfetch|texture\s*<|cudaTextureObject_t|surf[123]D\w*"
                r"|cudaSurfaceObject_t)\b"),
     "textures and surfaces are not supported by the CPU simulator; read the array directly "
     "or run this cell on a GPU", ("tex", "Texture", "surf", "Surface")),
    (re.compile(r"\b(?:wmma\s*::|nvcuda\s*::|mma_sync|load_matrix_sync|store_matrix_sync)"
                r"|#\s*include\s*[<\"]mma\.h[>\"]"),
     "tensor-core operations (wmma / mma) are not supported by the CPU simulator; "
     "run this cell on a GPU", ("mma", "nvcuda", "matrix_sync")),
    (re.compile(r"<<<"),
     "dynamic parallelism (launching a kernel from device code) is not supported by the "
     "CPU simulator; launch kernels from Python", ("<<<",)),
    (re.compile(r"#\s*include\s*[<\"]cuda_bf16\.h[>\"]|\b__nv_bfloat16\w*\b|\bnv_bfloat16\b"),
     "bfloat16 (__nv_bfloat16) is not supported by the CPU simulator (g++ has no bfloat16 "
     "type); use __half or float, or run this cell on a GPU", ("bf16", "bfloat16")),
    (re.compile(r"#\s*include\s*[<\"](?:curand\w*\.h|cub/\S*|thrust/\S*|cuda/\S*)[>\"]"),
     "this CUDA library header is not available on the CPU simulator; run this cell on a GPU",
     ("include",)),
]

#: What whole programs have that cells do not (see find_unsupported); a program's
#: includes of GPU-only headers are found by program_source.gpu_only_features.
_PROGRAMS_HAVE = (("<<<",), ("tex", "Texture", "surf", "Surface"), ("bf16", "bfloat16"), ("include",))

_EXTERN_SHARED = re.compile(r"\bextern\b(?P<decl>[^;{}()]*?(?:\([^;{}]*?\)[^;{}()]*?)*?)"
                            r"\b(?P<name>[A-Za-z_]\w*)\s*\[\s*\]\s*;")
_ATTRIBUTES = re.compile(r"__align__\s*\(\s*\d+\s*\)|alignas\s*\([^)]*\)|__attribute__\s*\(\(.*?\)\)"
                         r"|\b__shared__\b")


@dataclass(frozen=True)
class Unsupported:
    """A construct the simulator cannot run, at ``line`` (1-based) of the cell."""

    line: int
    column: int
    message: str

    def log_line(self) -> str:
        return f"{SOURCE_NAME}:{self.line}:{self.column}: error: {self.message}"


def find_unsupported(source: str, defines: Sequence[str] | None = None,
                     program: bool = False) -> list[Unsupported]:
    """Every construct of ``source`` the simulator cannot run, in line order.

    With ``defines`` (the ``-D`` options g++ gets), constructs in ``#if``
    branches those leave out are not reported; without them every branch is
    searched. In a whole ``program``, ``<<<`` is the host's launch syntax
    (a launch from a kernel is found when it runs), texture objects and
    bfloat16 are supported (the program runtime has them), and includes are
    left to ``program_source.gpu_only_features``."""
    return list(_find_unsupported(source, None if defines is None else tuple(defines), program))


@functools.lru_cache(maxsize=256)  # re-running an unchanged cell searches nothing
def _find_unsupported(source: str, defines: tuple[str, ...] | None,
                      program: bool = False) -> tuple[Unsupported, ...]:
    code = cxx.scan(source, defines).visible
    found = []
    for pattern, message, words in _UNSUPPORTED:
        if program and words in _PROGRAMS_HAVE:
            continue
        if not any(w in code for w in words):
            continue
        for m in pattern.finditer(code):
            line, col = cxx.line_col(code, m.start())
            found.append(Unsupported(line, col, message))
    found.sort(key=lambda u: (u.line, u.column))
    return tuple(found)


@functools.lru_cache(maxsize=256)  # re-running an unchanged cell rewrites nothing
def rewrite_dynamic_shared(source: str) -> str:
    """Replace each ``extern __shared__ T name[];`` by a pointer to the
    dynamic shared memory buffer, keeping every line where it was."""
    code = cxx.scan(source, None).visible
    if "__shared__" not in code:
        return source
    blocks = cxx.blocks(code)
    pieces = []
    last = 0
    for m in _EXTERN_SHARED.finditer(code):
        decl = m["decl"]
        if "__shared__" not in decl:
            continue
        ctype = " ".join(_ATTRIBUTES.sub(" ", decl).split())
        name = m["name"]
        if cxx.at_file_scope(blocks, m.start()):
            text = (f"static thread_local {ctype}* const {name} = "
                    f"reinterpret_cast<{ctype}*>(__wbsim_dsmem);")
        else:
            text = f"{ctype}* const {name} = reinterpret_cast<{ctype}*>(__wbsim_dsmem);"
        text += "\n" * source.count("\n", m.start(), m.end())
        pieces.append(source[last:m.start()])
        pieces.append(text)
        last = m.end()
    pieces.append(source[last:])
    return "".join(pieces)


def launcher_symbol(index: int) -> str:
    return f"__wbsim_launch_{index}"


def global_symbol(index: int) -> str:
    return f"__wbsim_global_{index}"


def generate(source: str, kernels: Sequence[str], variables: Sequence[str] = (),
             defines: Sequence[str] = ()) -> str:
    """The complete C++ translation unit for ``source`` with launchers for
    ``kernels`` (``extern "C"`` names and template name expressions) and an
    accessor (address and size) for each module variable of ``variables``
    (qualified names: static ones and ones in namespaces have no plain symbol).
    ``defines`` (``NAME`` or ``NAME=VALUE``) become ``#define`` lines after
    the whole prelude, which they must not rewrite."""
    body = rewrite_dynamic_shared(source)
    if not body.endswith("\n"):
        body += "\n"
    lines = ['#include "wbsim_all.h"' if defines else '#include "wbsim_prelude.h"']
    for d in defines:
        name, _, value = d.partition("=")
        lines.append(f"#define {name} {value if _ else '1'}")
    lines += [f'#line 1 "{SOURCE_NAME}"', body.rstrip("\n"),
             '#line 1 "wbsim_launchers"']
    for i, expr in enumerate(kernels):
        quoted = expr.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'extern "C" int {launcher_symbol(i)}(const wbsim_launch* __wbsim_l) '
                     f'{{ return __wbsim_launch<&{expr} >(&{expr}, __wbsim_l, "{quoted}"); }}')
    for i, name in enumerate(variables):
        lines.append(f'extern "C" void* {global_symbol(i)}(unsigned long long* __wbsim_n) '
                     f'{{ *__wbsim_n = sizeof(::{name}); return (void*)&::{name}; }}')
    return "\n".join(lines) + "\n"


_GXX_LINE = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<kind>fatal error|error|note|warning)?:?\s*(?P<msg>.*)$")
_GXX_REQUIRED = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+):\s+required from")
_NAMED = re.compile(r"[‘'`]([^’'`]+)[’'`]")
_CG_MEMBER = re.compile(r"[‘'`](\w+)[’'`] is not a member of [‘'`](?:cooperative_groups|cg)[’'`]")


def simulator_lacks(log: str, nvrtc_accepted: bool) -> str:
    """g++'s log of a cell, rewritten where it means that the simulator
    lacks a CUDA feature: one error a line of the cell, saying so and that
    the code works on a GPU, never the prelude's template errors.

    ``nvrtc_accepted``: real NVRTC compiled the cell, so every g++ error is
    the simulator's (each cell line g++ blames, or whose template
    instantiation failed, gets one such error); otherwise only errors that
    name a cooperative-groups function the prelude lacks are rewritten."""
    lines = log.splitlines()
    if not nvrtc_accepted:
        out = []
        for text in lines:
            m = _CG_MEMBER.search(text)
            g = _GXX_LINE.match(text)
            if m and g and g["file"].endswith(SOURCE_NAME):
                text = (f"{g['file']}:{g['line']}:{g['col']}: error: cooperative_groups::{m.group(1)} "
                        "is not supported by the CPU simulator; it works on a GPU")
            out.append(text)
        return "\n".join(out)
    found: dict[int, tuple[int, str]] = {}   # cell line -> (column, what g++ said first)
    pending: list[tuple[int, int]] = []       # cell lines of the instantiation being reported
    for text in lines:
        req = _GXX_REQUIRED.match(text)
        if req and req["file"].endswith(SOURCE_NAME):
            pending.append((int(req["line"]), int(req["col"])))
            continue
        g = _GXX_LINE.match(text)
        if not g or g["kind"] not in ("error", "fatal error"):
            continue
        if g["file"].endswith(SOURCE_NAME):
            found.setdefault(int(g["line"]), (int(g["col"]), g["msg"]))
        for line, col in pending:
            found.setdefault(line, (col, g["msg"]))
        pending = []
    if not found:
        return log
    out = []
    for line, (col, msg) in sorted(found.items()):
        named = _NAMED.search(msg)
        what = f"'{named.group(1)}'" if named else "this code"
        out.append(f"{SOURCE_NAME}:{line}:{col}: error: the CPU simulator lacks {what}, which NVRTC "
                   f"accepts: it works on a GPU (g++: {msg.strip()})")
    return "\n".join(out)
