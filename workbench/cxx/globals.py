"""Module variables: the ``__constant__`` and ``__device__`` variables a
source defines at namespace scope (``static`` ones included), with their
type and array dimensions as written.

The core reads them to give ``Module.set_global`` / ``get_global`` a dtype
and a shape; the backends to reach variables that have no plain symbol
(``static`` ones, or ones inside a namespace). Declarations with no storage
(``extern``), templates and ``__shared__`` variables are not module variables.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .conditional import scan
from .structure import blocks, matching, split_top_level

_SPACE = re.compile(r"\b(__constant__|__device__)\b")
_DECORATION = re.compile(r"__align__\s*\(\s*\d+\s*\)|alignas\s*\([^()]*\)|__attribute__\s*\(\(.*?\)\)")
_DROP = {"static", "__constant__", "__device__", "__managed__", "inline", "__inline__",
         "volatile", "constexpr", "__restrict__"}
_ATTRIBUTE_BEFORE = re.compile(r"(?:__align__|alignas|__attribute__|__launch_bounds__)\s*\($")
_DECLARATOR = re.compile(r"(?P<stars>[*\s]*)(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\[\]]*\]\s*)*)$")


@dataclass(frozen=True)
class GlobalVariable:
    """A module variable: ``name``, its namespace (``"a::b"``, ``""`` at file
    scope), the element type as written (``"float"``, ``"unsigned int"``,
    ``"float4"``), pointer depth, array dimensions as written (``("16",)``,
    ``("N", "4")``), ``"constant"`` or ``"device"``, ``static``, and its line."""

    name: str
    scope: str
    ctype: str
    pointer_depth: int
    dims: tuple[str, ...]
    space: str
    static: bool
    line: int

    @property
    def qualified_name(self) -> str:
        return f"{self.scope}::{self.name}" if self.scope else self.name

    @property
    def plain_symbol(self) -> bool:
        """True when the variable's symbol is its own name (not static, at file scope)."""
        return not self.static and not self.scope


def find_globals(source: str, defines=()) -> tuple[GlobalVariable, ...]:
    """Every module variable of ``source`` (see the module docstring), in order."""
    return _find_globals(source, tuple(defines) if defines is not None else None)


@functools.lru_cache(maxsize=256)
def _find_globals(source: str, defines) -> tuple[GlobalVariable, ...]:
    code = scan(source, defines).active
    if "__constant__" not in code and "__device__" not in code:
        return ()
    all_blocks = blocks(code)
    found: list[GlobalVariable] = []
    seen_statements: set[int] = set()
    for m in _SPACE.finditer(code):
        if any(b.kind == "body" and b.contains(m.start()) for b in all_blocks):
            continue  # inside a function or a class
        start = max(code.rfind(c, 0, m.start()) for c in ";{}") + 1
        if start in seen_statements:
            continue
        seen_statements.add(start)
        variables = _declaration(code, start)
        if not variables:
            continue
        scope = "::".join(b.name for b in all_blocks
                          if b.kind == "namespace" and b.contains(start) and b.name)
        anonymous = any(b.kind == "namespace" and not b.name and b.contains(start)
                        for b in all_blocks)
        line = code.count("\n", 0, m.start()) + 1
        for space, static, ctype, depth, name, dims in variables:
            found.append(GlobalVariable(name, scope, ctype, depth, dims, space,
                                        static or anonymous, line))
    return tuple(found)


def _declaration(code: str, start: int):
    """``(space, static, type, pointer depth, name, dims)`` of each variable
    the statement at ``start`` declares; [] for a function, a template, an
    ``extern`` declaration or a shared variable."""
    i, n, seen_equals = start, len(code), False
    while i < n and code[i] != ";":
        c = code[i]
        if c == "=":
            seen_equals = True
        elif c == "(":
            if not seen_equals and not _ATTRIBUTE_BEFORE.search(code, start, i + 1):
                return []  # a function declaration or definition
            i = matching(code, i)
        elif c in "[{":
            i = matching(code, i)
        i += 1
    if i >= n:
        return []
    statement = _DECORATION.sub(" ", code[start:i])
    words = set(re.findall(r"[A-Za-z_]\w*", statement.split("=")[0]))
    if words & {"extern", "template", "__shared__", "typedef", "using", "__global__"}:
        return []
    space = "constant" if "__constant__" in words else "device"
    static = "static" in words
    out, base = [], None
    for k, part in enumerate(split_top_level(statement, angles=False)):
        decl = re.sub(r"\{.*", "", part.split("=", 1)[0], flags=re.S).strip()  # T x{1}
        m = _DECLARATOR.search(decl)
        if not m:
            return out
        if k == 0:
            base_words = [w for w in re.findall(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*|<[^;]*>",
                                                decl[:m.start()]) if w not in _DROP and w != "const"]
            if not base_words:
                return []
            base = " ".join(base_words).replace(" <", "<")
        stars = m.group("stars").count("*")
        dims = tuple(d.strip() for d in re.findall(r"\[([^\[\]]*)\]", m.group("dims")))
        out.append((space, static, base, stars, m.group("name"), dims))
    return out
