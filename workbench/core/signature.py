"""Find the ``__global__`` functions of CUDA C++ source and parse their signatures.

This is a small purpose-built parser, not a C++ front end: it reads the text
that :mod:`workbench.cxx` leaves of the source (comments, literals, directives
and inactive ``#if`` branches blanked), uses its ``extern "C" { ... }`` and
namespace blocks, reads ``template<...>`` heads, and splits parameter lists at
top-level commas. It understands what kernels are written with in practice:
multi-line declarations, ``const``, ``__restrict__``, pointer-to-pointer,
``unsigned``/``size_t``/``long long``, vector types (``float4*``), ``__half``,
template parameters, array parameters (``float a[]``).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from .. import cxx

# C type (after normalisation) -> NumPy dtype
_SCALAR_DTYPES = {
    "bool": np.bool_,
    "char": np.int8, "signed char": np.int8, "unsigned char": np.uint8,
    "short": np.int16, "unsigned short": np.uint16,
    "int": np.int32, "unsigned int": np.uint32,
    "long": np.int64, "unsigned long": np.uint64,
    "long long": np.int64, "unsigned long long": np.uint64,
    "int8_t": np.int8, "uint8_t": np.uint8, "int16_t": np.int16, "uint16_t": np.uint16,
    "int32_t": np.int32, "uint32_t": np.uint32, "int64_t": np.int64, "uint64_t": np.uint64,
    "size_t": np.uint64, "ptrdiff_t": np.int64, "ssize_t": np.int64,
    "intptr_t": np.int64, "uintptr_t": np.uint64,
    "uchar": np.uint8, "ushort": np.uint16, "uint": np.uint32, "ulong": np.uint64,
    "float": np.float32, "double": np.float64,
    "__half": np.float16, "half": np.float16,
    "float16": np.float16,
}

# vector type -> (component dtype, count); CUDA's char1..double4 families
_VECTOR_BASES = {"char": np.int8, "uchar": np.uint8, "short": np.int16, "ushort": np.uint16,
                 "int": np.int32, "uint": np.uint32, "long": np.int64, "ulong": np.uint64,
                 "longlong": np.int64, "ulonglong": np.uint64,
                 "float": np.float32, "double": np.float64}
_VECTOR_TYPES = {f"{b}{n}": (np.dtype(dt), n) for b, dt in _VECTOR_BASES.items() for n in (1, 2, 3, 4)}
_VECTOR_TYPES["__half2"] = (np.dtype(np.float16), 2)
_VECTOR_TYPES["half2"] = (np.dtype(np.float16), 2)

_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct",
               "class", "typename", "signed", "__grid_constant__"}
_TYPE_WORDS = {"unsigned", "signed", "short", "long", "int", "char", "float", "double", "bool",
               "void"}

_TOKEN = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*|\*|&|\[[^\]]*\]|<[^<>]*(?:<[^<>]*>[^<>]*)*>|\S")


@dataclass(frozen=True)
class Param:
    """One kernel parameter."""

    name: str
    ctype: str          # as written, whitespace-normalised: "const float* __restrict__"
    base: str           # the pointee / value type without qualifiers: "float", "unsigned int"
    pointer_depth: int  # 0 for a value, 1 for T*, 2 for T** ...
    is_const: bool = False
    default: str | None = None  # the default argument as written (``NULL``, ``1.0f``), if any

    @property
    def is_pointer(self) -> bool:
        return self.pointer_depth > 0

    @property
    def dtype(self) -> np.dtype | None:
        """The NumPy dtype of the value (or of the pointee for ``T*``);
        ``None`` for ``T**`` and types with no NumPy equivalent."""
        if self.pointer_depth > 1:
            return None
        return scalar_dtype(self.base)

    @property
    def has_default(self) -> bool:
        return self.default is not None

    def default_value(self):
        """The default argument as a Python value: ``None`` (a null pointer)
        for ``NULL``/``nullptr``/``0`` of a pointer, a number for a numeric
        literal; raises ValueError for anything else (a macro, an expression)."""
        text = (self.default or "").strip()
        if self.is_pointer:
            if text in ("NULL", "nullptr", "0", "0L", "0LL", "__null"):
                return None
            raise ValueError(text)
        if text in ("true", "false"):
            return text == "true"
        return _number(text)

    @property
    def vector(self) -> tuple[np.dtype, int] | None:
        """``(component dtype, count)`` for CUDA vector types such as float4."""
        return _VECTOR_TYPES.get(self.base)

    def __str__(self) -> str:
        return f"{self.ctype} {self.name}" + (f" = {self.default}" if self.has_default else "")


@dataclass(frozen=True)
class KernelSignature:
    """A ``__global__`` function: name, parameters, template head, linkage."""

    name: str
    params: tuple[Param, ...]
    template_params: tuple[tuple[str, str], ...] = ()  # (kind, name): ("typename", "T")
    extern_c: bool = False
    line: int = 0  # 1-based line of the kernel's name in the source
    qualified_name: str = ""  # ns::name for kernels inside namespaces (C++ linkage)

    def __post_init__(self):
        if not self.qualified_name:
            object.__setattr__(self, "qualified_name", self.name)

    @property
    def is_template(self) -> bool:
        return bool(self.template_params)

    def __str__(self) -> str:
        head = ""
        if self.template_params:
            head = "template <" + ", ".join(f"{k} {n}" for k, n in self.template_params) + "> "
        return f"{head}__global__ void {self.name}({', '.join(map(str, self.params))})"

    def instantiate(self, name_expression: str) -> "KernelSignature":
        """The signature of ``name<args...>`` with template arguments substituted."""
        m = re.fullmatch(r"\s*([A-Za-z_][\w:]*)\s*<(.*)>\s*", name_expression, re.S)
        if not m or m.group(1) not in (self.name, self.qualified_name):
            raise ValueError(f"{name_expression!r} is not an instantiation of {self.name}")
        args = cxx.split_top_level(m.group(2))
        mapping = {name: arg.strip() for (_, name), arg in zip(self.template_params, args)}
        params = tuple(parse_param(_substitute(p.ctype, mapping) + " " + p.name
                                   + (f" = {p.default}" if p.has_default else ""), i)
                       for i, p in enumerate(self.params))
        return KernelSignature(name_expression.strip(), params, (), False, self.line)

    @property
    def template_name(self) -> str:
        """What a name expression starts with: ``ns::name`` or ``name``."""
        return self.qualified_name


def scalar_dtype(ctype: str) -> np.dtype | None:
    dt = _SCALAR_DTYPES.get(ctype)
    return np.dtype(dt) if dt is not None else None


def _substitute(text: str, mapping: dict[str, str]) -> str:
    if not mapping:
        return text
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, mapping)) + r")\b")
    return pattern.sub(lambda m: mapping[m.group(1)], text)


_INT_LITERAL = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)(?:[uU]?[lL]{0,2}|[lL]{1,2}[uU])")
_FLOAT_LITERAL = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[fFlL]?")


def _number(text: str):
    """A C numeric literal (``-3``, ``0x10u``, ``1.5f``, ``2e-3``) as int or float."""
    text = text.replace("'", "")  # C++14 digit separators
    m = _INT_LITERAL.fullmatch(text)
    if m:
        return int(m.group(1) + m.group(2), 0) if not m.group(2).startswith("0") or m.group(2) == "0" \
            or m.group(2)[1:2] in "xXbB" else int(m.group(1) + m.group(2), 8)
    if _FLOAT_LITERAL.fullmatch(text) and any(c.isdigit() for c in text):
        return float(text.rstrip("fFlL"))
    raise ValueError(text)


def parse_param(text: str, index: int) -> Param:
    """Parse one parameter declaration (``const float* __restrict__ x``)."""
    declaration, eq, default = text.partition("=")
    tokens = _TOKEN.findall(declaration.strip())
    arrays = [t for t in tokens if t.startswith("[")]
    tokens = [t for t in tokens if not t.startswith("[")]
    idents = [t for t in tokens if t not in ("*", "&") and t not in _QUALIFIERS
              and not t.startswith("<")]
    name = f"arg{index}"
    if (len(idents) >= 2 and tokens and tokens[-1] == idents[-1]
            and idents[-1] not in _TYPE_WORDS):
        name = tokens.pop()
        idents.pop()
    pointer_depth = tokens.count("*") + len(arrays)
    base = _normalise_base(idents + [t for t in tokens if t.startswith("<")], "signed" in tokens)
    ctype = re.sub(r"\s+\*", "*", " ".join(tokens)) + "*" * len(arrays)
    return Param(name=name, ctype=ctype, base=base, pointer_depth=pointer_depth,
                 is_const="const" in tokens, default=" ".join(default.split()) if eq else None)


def _normalise_base(core: list[str], signed: bool) -> str:
    """``["unsigned", "long", "long", "int"]`` -> ``"unsigned long long"``."""
    template_args = "".join(w for w in core if w.startswith("<"))
    words = [w for w in core if not w.startswith("<")]
    if words and all(w in _TYPE_WORDS for w in words):
        unsigned = "unsigned" in words
        longs = words.count("long")
        if "char" in words:
            kind = "char"
        elif "short" in words:
            kind = "short"
        elif longs >= 2:
            kind = "long long"
        elif longs == 1 and "double" not in words:
            kind = "long"
        elif "double" in words:
            kind = "double"
        elif "float" in words:
            kind = "float"
        elif "bool" in words:
            kind = "bool"
        elif "void" in words:
            kind = "void"
        else:
            kind = "int"
        if unsigned:
            return f"unsigned {kind}"
        if signed and kind == "char":
            return "signed char"
        return kind
    if not words and signed:
        return "int"
    return " ".join(words) + template_args


_GLOBAL = re.compile(r"\b__global__\b")
_TEMPLATE_HEAD = re.compile(r"template\s*<((?:[^<>]|<[^<>]*>)*)>\s*$", re.S)


def find_kernels(source: str, defines=()) -> list[KernelSignature]:
    """Every ``__global__`` function defined or declared in ``source``, in
    order of appearance, one entry per name; branches of ``#if``/``#ifdef``
    that ``defines`` (``-D`` options) leave out are skipped."""
    return list(_find_kernels(source, tuple(defines)))


class OverloadedKernel(ValueError):
    """Two kernels of C++ linkage share a name with different parameters."""

    def __init__(self, name: str, line: int):
        self.name, self.line = name, line
        super().__init__(f"kernel {name!r} is overloaded; the workbench binds kernels by name: "
                         f"give the overloads distinct names or make one a template")


@functools.lru_cache(maxsize=256)  # re-running an unchanged cell re-parses nothing
def _find_kernels(source: str, defines: tuple) -> tuple[KernelSignature, ...]:
    scanned = cxx.scan(source, defines)
    text = scanned.active
    for name, value in scanned.macros.items():  # #define KERNEL extern "C" __global__
        if "__global__" in value and name != "__global__":
            text = re.sub(rf"\b{re.escape(name)}\b", lambda _m, v=value: v, text)
    blocks = cxx.blocks(text)
    extern_blocks = [b for b in blocks if b.kind == "linkage"]
    namespaces = [b for b in blocks if b.kind == "namespace" and b.name]
    found: dict[str, KernelSignature] = {}
    for m in _GLOBAL.finditer(text):
        open_paren = text.find("(", m.end())
        if open_paren < 0:
            continue
        # skip __launch_bounds__(...) and similar attribute parentheses
        head = text[m.end():open_paren]
        while re.search(r"\b(__launch_bounds__|__cluster_dims__|__maxnreg__)\s*$", head):
            close = cxx.matching(text, open_paren)
            open_paren = text.find("(", close + 1)
            head = text[m.end():open_paren]
        name_match = re.search(r"([A-Za-z_]\w*)\s*$", head)
        if not name_match:
            continue
        name = name_match.group(1)
        close = cxx.matching(text, open_paren)
        params_text = text[open_paren + 1:close]
        raw_params = [p for p in cxx.split_top_level(params_text) if p.strip() not in ("", "void")]
        params = tuple(parse_param(p, i) for i, p in enumerate(raw_params))
        # what stands in front of __global__ on the same declaration
        decl_start = max(text.rfind(c, 0, m.start()) for c in ";{}") + 1
        prefix = text[decl_start:m.start()].strip()
        template = _TEMPLATE_HEAD.search(re.sub(r'extern\s+"C"\s*$', "", prefix).rstrip())
        template_params: tuple = ()
        if template:
            template_params = tuple(_template_param(p) for p in cxx.split_top_level(template.group(1)))
        extern_c = bool(re.search(r'extern\s+"C"', prefix)) or any(
            b.contains(m.start()) for b in extern_blocks)
        scope = "::".join(b.name for b in namespaces if b.contains(m.start()))
        line = text.count("\n", 0, m.end() + name_match.start()) + 1
        sig = KernelSignature(name, params, template_params, extern_c, line,
                              f"{scope}::{name}" if scope and not extern_c else name)
        if name not in found:
            found[name] = sig
        elif found[name].params != params and not extern_c:
            raise OverloadedKernel(name, line)
    return tuple(found.values())


def _template_param(text: str) -> tuple[str, str]:
    words = text.split("=")[0].split()
    kind = " ".join(words[:-1]) or "typename"
    return kind, words[-1] if words else "?"
