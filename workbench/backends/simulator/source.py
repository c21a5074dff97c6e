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

import re
from dataclasses import dataclass
from typing import Sequence

#: The name g++ gives the cell in its messages (the same as NVRTC's).
SOURCE_NAME = "cell.cu"

_UNSUPPORTED = [
    (re.compile(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile\b|__volatile__\b)?\s*\("),
     "inline PTX assembly (asm) cannot run on the CPU simulator; "
     "use a CUDA intrinsic instead or run this cell on a GPU"),
    (re.compile(r"\b(?:tex[123]D\w*|tex1Dfetch|texture\s*<|cudaTextureObject_t|surf[123]D\w*"
                r"|cudaSurfaceObject_t)\b"),
     "textures and surfaces are not supported by the CPU simulator; read the array directly "
     "or run this cell on a GPU"),
    (re.compile(r"\b(?:wmma\s*::|nvcuda\s*::|mma_sync|load_matrix_sync|store_matrix_sync)"
                r"|#\s*include\s*[<\"]mma\.h[>\"]"),
     "tensor-core operations (wmma / mma) are not supported by the CPU simulator; "
     "run this cell on a GPU"),
    (re.compile(r"<<<"),
     "dynamic parallelism (launching a kernel from device code) is not supported by the "
     "CPU simulator; launch kernels from Python"),
    (re.compile(r"#\s*include\s*[<\"]cuda_bf16\.h[>\"]|\b__nv_bfloat16\w*\b|\bnv_bfloat16\b"),
     "bfloat16 (__nv_bfloat16) is not supported by the CPU simulator (g++ has no bfloat16 "
     "type); use __half or float, or run this cell on a GPU"),
    (re.compile(r"#\s*include\s*[<\"](?:curand\w*\.h|cub/\S*|thrust/\S*|cuda/\S*)[>\"]"),
     "this CUDA library header is not available on the CPU simulator; run this cell on a GPU"),
]

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


def blank_comments_and_strings(source: str) -> str:
    """``source`` with comments and the insides of string and character
    literals replaced by spaces (newlines and quotes kept), so that searches
    see only code and positions stay the same."""
    out = list(source)
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == "/" and i + 1 < n and source[i + 1] == "/":
            j = source.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif c == "/" and i + 1 < n and source[i + 1] == "*":
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            # #include <...> and "..." file names must stay visible to the checks
            line_start = source.rfind("\n", 0, i) + 1
            if source[line_start:i].lstrip().startswith("#"):
                j = source.find("\n", i)
                i = n if j < 0 else j
                continue
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def find_unsupported(source: str) -> list[Unsupported]:
    """Every construct of ``source`` the simulator cannot run, in line order."""
    code = blank_comments_and_strings(source)
    found = []
    for pattern, message in _UNSUPPORTED:
        for m in pattern.finditer(code):
            line, col = _line_col(code, m.start())
            found.append(Unsupported(line, col, message))
    found.sort(key=lambda u: (u.line, u.column))
    return found


def _file_scope(code: str, pos: int) -> bool:
    """True when ``pos`` lies outside every function body (namespaces and
    ``extern "C" { }`` blocks do not count as bodies)."""
    stack: list[bool] = []  # True: a brace that opens a namespace or linkage block
    for m in re.finditer(r"[{}]", code[:pos]):
        if m.group() == "{":
            before = code[max(0, m.start() - 200):m.start()]
            stack.append(bool(re.search(r'(?:\bnamespace\b[\w:\s]*|\bextern\s*"\s*C\s*"\s*)$', before)))
        elif stack:
            stack.pop()
    return all(stack)


def rewrite_dynamic_shared(source: str) -> str:
    """Replace each ``extern __shared__ T name[];`` by a pointer to the
    dynamic shared memory buffer, keeping every line where it was."""
    code = blank_comments_and_strings(source)
    pieces = []
    last = 0
    for m in _EXTERN_SHARED.finditer(code):
        decl = m["decl"]
        if "__shared__" not in decl:
            continue
        ctype = " ".join(_ATTRIBUTES.sub(" ", decl).split())
        name = m["name"]
        if _file_scope(code, m.start()):
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


def generate(source: str, kernels: Sequence[str]) -> str:
    """The complete C++ translation unit for ``source`` with launchers for
    ``kernels`` (``extern "C"`` names and template name expressions)."""
    body = rewrite_dynamic_shared(source)
    if not body.endswith("\n"):
        body += "\n"
    lines = ['#include "wbsim_prelude.h"', f'#line 1 "{SOURCE_NAME}"', body.rstrip("\n"),
             '#line 1 "wbsim_launchers"']
    for i, expr in enumerate(kernels):
        quoted = expr.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'extern "C" int {launcher_symbol(i)}(const wbsim_launch* L) '
                     f'{{ return __wbsim_launch<&{expr} >(&{expr}, L, "{quoted}"); }}')
    return "\n".join(lines) + "\n"
