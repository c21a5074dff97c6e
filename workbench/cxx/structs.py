"""The structs, type aliases and enums a source defines at namespace scope:
each struct's data members as written (type, pointer depth, array
dimensions), in order, so that a module variable of struct type can be
given a NumPy dtype with the struct's field names. The layout itself (sizes,
offsets, alignment) is the compiler's to say: the core measures it.

A struct the workbench cannot describe field by field carries ``problem``
(a union, a bit-field, a base class, a template, an anonymous member), and
the core then asks for ``dtype=``. Member functions, static members, nested
type definitions without a member and access specifiers are not data members.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .conditional import scan
from .structure import blocks, matching, split_top_level

_HEAD = re.compile(r"\b(?P<typedef>typedef\s+)?(?P<kind>struct|class|union)\b"
                   r"(?P<rest>(?:[^;{}()]|\([^;{}()]*\))*)\{")
_ALIAS_TYPEDEF = re.compile(r"\btypedef\s+(?P<target>[^;{}()\[\]]+?)\s*\b(?P<name>[A-Za-z_]\w*)\s*;")
_ALIAS_USING = re.compile(r"\busing\s+(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<target>[^;{}()]+);")
_ENUM = re.compile(r"\benum\s+(?:class\s+|struct\s+)?(?P<name>[A-Za-z_]\w*)\s*(?::[^{;]*)?\{")
_DECORATION = re.compile(r"__align__\s*\(\s*\d+\s*\)|alignas\s*\([^()]*\)|__attribute__\s*\(\(.*?\)\)"
                         r"|\b__device_builtin__\b|\b__builtin_align__\s*\([^()]*\)")
_ACCESS = re.compile(r"\b(public|private|protected)\s*:(?!:)")
_DECLARATOR = re.compile(r"(?P<stars>[*&\s]*)(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\[\]]*\]\s*)*)$")
_DROP = {"const", "volatile", "mutable", "struct", "class", "union", "enum", "typename",
         "__restrict__", "__device__", "__host__"}
_NOT_DATA = {"static", "using", "typedef", "friend", "template", "enum", "operator", "constexpr",
             "virtual"}


@dataclass(frozen=True)
class Member:
    """A data member: ``name``, its type as written without qualifiers
    (``"float"``, ``"Inner"``, ``"unsigned int"``), pointer depth and array
    dimensions as written (``("4",)``, ``("N", "2")``)."""

    name: str
    ctype: str
    pointer_depth: int
    dims: tuple[str, ...]


@dataclass(frozen=True)
class Struct:
    """A struct (or class) definition: its name, namespace (``"a::b"``), its
    data members in order, and ``problem`` (why it cannot be described field
    by field; ``""`` when it can)."""

    name: str
    scope: str
    members: tuple[Member, ...]
    problem: str = ""
    line: int = 0

    @property
    def qualified_name(self) -> str:
        return f"{self.scope}::{self.name}" if self.scope else self.name


@dataclass(frozen=True)
class Types:
    """What :func:`find_types` found: structs and aliases by their names and
    qualified names, the names of enums."""

    structs: dict
    aliases: dict
    enums: frozenset

    def resolve(self, ctype: str, scope: str = "") -> tuple[str, int]:
        """``(type, pointer depth added)`` after following aliases (``typedef
        Opt* OptPtr``: ``("Opt", 1)``), looked up from ``scope`` outwards."""
        depth, seen = 0, set()
        while ctype not in seen:
            seen.add(ctype)
            target = self.lookup(self.aliases, ctype, scope)
            if target is None:
                break
            depth += target.count("*")
            ctype = _plain(target.replace("*", " "))
        return ctype, depth

    def struct(self, ctype: str, scope: str = "") -> Struct | None:
        return self.lookup(self.structs, ctype, scope)

    def is_enum(self, ctype: str, scope: str = "") -> bool:
        return self.lookup(dict.fromkeys(self.enums, True), ctype, scope) is not None

    @staticmethod
    def lookup(table: dict, ctype: str, scope: str):
        name = ctype.lstrip(":")
        parts = scope.split("::") if scope else []
        for k in range(len(parts), -1, -1):  # the innermost namespace first, as C++ looks names up
            key = "::".join(parts[:k] + [name])
            if key in table:
                return table[key]
        return None


def find_types(source: str, defines=()) -> Types:
    """The structs, aliases and enums of ``source`` (see the module docstring)."""
    return _find_types(source, tuple(defines) if defines is not None else None)


@functools.lru_cache(maxsize=128)
def _find_types(source: str, defines) -> Types:
    code = scan(source, defines).active
    all_blocks = blocks(code)

    def scope_at(pos: int) -> str | None:
        """The namespace at ``pos``; None inside a function or a class body."""
        if any(b.kind == "body" and b.contains(pos) for b in all_blocks):
            return None
        return "::".join(b.name for b in all_blocks if b.kind == "namespace" and b.contains(pos)
                         and b.name)

    structs: dict = {}
    aliases: dict = {}
    enums: set = set()
    for m in _HEAD.finditer(code):
        scope = scope_at(m.start())
        if scope is None:
            continue
        brace = m.end() - 1
        close = matching(code, brace)
        head = _DECORATION.sub(" ", m.group("rest"))
        name_match = re.match(r"\s*(?:final\s+)?([A-Za-z_]\w*)?\s*(?:final\b)?\s*(:[^{]*)?$", head)
        tag = name_match.group(1) if name_match else None
        problem = ""
        if m.group("kind") == "union":
            problem = "a union (its members share their bytes)"
        elif name_match is None:
            problem = "a definition the workbench cannot read"
        elif name_match.group(2):
            problem = "a struct with a base class"
        elif re.search(r"\btemplate\s*<[^;{}]*$", code[max(0, m.start() - 200):m.start()]):
            problem = "a template"
        members, member_problem = _members(code[brace + 1:close])
        problem = problem or member_problem
        after = code[close + 1:code.find(";", close) if code.find(";", close) >= 0 else len(code)]
        names = [tag] if tag else []
        if m.group("typedef"):
            for d in map(_DECLARATOR.search, split_top_level(after)):
                if d and d.group("dims"):
                    continue
                if d and not d.group("stars").strip():
                    names.append(d.group("name"))
                elif d and names:  # typedef struct S {...} S, *SPtr;
                    key = f"{scope}::{d.group('name')}" if scope else d.group("name")
                    aliases.setdefault(key, f"{names[0]} " + "* " * d.group("stars").count("*"))
        line = code.count("\n", 0, m.start()) + 1
        for name in names:
            struct = Struct(name, scope, tuple(members), problem, line)
            structs.setdefault(struct.qualified_name, struct)
    for pattern in (_ALIAS_TYPEDEF, _ALIAS_USING):
        for m in pattern.finditer(code):
            scope = scope_at(m.start())
            target = _DECORATION.sub(" ", m.group("target"))
            if scope is None or re.search(r"\b(struct|class|union)\s*\{", target):
                continue
            key = f"{scope}::{m.group('name')}" if scope else m.group("name")
            aliases.setdefault(key, " ".join(target.replace("*", " * ").split()))
    for m in _ENUM.finditer(code):
        scope = scope_at(m.start())
        if scope is not None:
            enums.add(f"{scope}::{m.group('name')}" if scope else m.group("name"))
    return Types(structs, aliases, frozenset(enums))


def _members(body: str) -> tuple[list[Member], str]:
    """The data members of a struct's ``body`` and the first problem met."""
    members: list[Member] = []
    body = _ACCESS.sub(" ", body)
    for statement, braced in _statements(body):
        text = _DECORATION.sub(" ", statement).strip()
        if not text:
            continue
        words = set(re.findall(r"[A-Za-z_]\w*", text.split("=")[0]))
        if braced == "type":
            if re.search(r"\}\s*[A-Za-z_]", text):
                return members, "an anonymous struct or union member"
            continue  # a nested type definition, no member
        if braced == "function" or words & _NOT_DATA or _is_function(text):
            continue
        if re.search(r"(?<!:):(?!:)", text.split("=")[0]):
            return members, "a bit-field"
        first = True
        base = ""
        for part in split_top_level(text, angles=False):
            decl = re.sub(r"\{.*", "", part.split("=", 1)[0], flags=re.S).strip()
            d = _DECLARATOR.search(decl)
            if d is None:
                return members, f"a member the workbench cannot read ({text.split()[0]} ...)"
            if first:
                base = _plain(decl[:d.start()])
                if not base:
                    return members, f"a member the workbench cannot read ({text})"
                first = False
            if "&" in d.group("stars"):
                return members, "a reference member"
            dims = tuple(x.strip() for x in re.findall(r"\[([^\[\]]*)\]", d.group("dims")))
            members.append(Member(d.group("name"), base, d.group("stars").count("*"), dims))
    return members, ""


def _statements(body: str):
    """``(text, braced)`` of each statement of a class body: ``braced`` is
    "function" for a member function with a body, "type" for a nested type
    definition, "" otherwise (a brace initialiser stays in its statement)."""
    i, start, n = 0, 0, len(body)
    while i < n:
        c = body[i]
        if c in "([":
            i = matching(body, i)
        elif c == "{":
            head = body[start:i]
            close = matching(body, i)
            if re.search(r"\b(struct|class|union|enum)\b[^=]*$", head) and "(" not in head:
                end = body.find(";", close)
                end = n if end < 0 else end
                yield body[start:end], "type"
                i, start = end + 1, end + 1
                continue
            if _is_function(head):
                yield head, "function"
                i = close + 1
                while i < n and body[i] in " \t\n;":
                    i += 1
                start = i
                continue
            i = close  # a brace initialiser: the statement goes on to its ';'
        elif c == ";":
            yield body[start:i], ""
            start = i + 1
        i += 1
    if body[start:].strip():
        yield body[start:], ""


def _is_function(text: str) -> bool:
    """A declaration with a parameter list: a function, constructor or operator."""
    head = _DECORATION.sub(" ", text).split("=")[0]
    return bool(re.search(r"[\w>\])]\s*\(", head)) or "operator" in head


def _plain(text: str) -> str:
    """A type as written without qualifiers and keywords: ``"const struct Inner"`` -> ``"Inner"``."""
    words = re.findall(r"::?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*|[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*"
                       r"|<[^;]*>", text)
    kept = [re.sub(r"\s+", "", w) if "::" in w else w for w in words if w not in _DROP]
    return " ".join(kept).replace(" <", "<")
