"""Brackets and braces of blanked source (see :mod:`workbench.cxx.lexer`):
matching brackets, the ``{...}`` blocks and what opens them, file scope."""
from __future__ import annotations

import re
from dataclasses import dataclass

_BRACKETS = {opening: re.compile(re.escape(opening) + "|" + re.escape(closing))
             for opening, closing in (("(", ")"), ("[", "]"), ("{", "}"))}
_BRACES = re.compile(r"[{}]")
# what stands before a brace that opens a namespace or a linkage block, not a body
_OPENER = re.compile(r'(?:\bnamespace\b(?P<name>[\w:\s]*)|\bextern\s*"C(?:\+\+)?"\s*)$')
_LOOK_BACK = 200


@dataclass(frozen=True)
class Block:
    """A ``{...}`` block: the offsets of its braces (``close`` is the text's
    length when it is never closed), its kind and, for a namespace, its name
    (``"a::b"``; ``""`` when anonymous)."""

    open: int
    close: int
    kind: str  # "namespace", "linkage" (extern "C" { }) or "body" (anything else)
    name: str = ""

    def contains(self, pos: int) -> bool:
        return self.open < pos < self.close


def matching(text: str, open_index: int) -> int:
    """The offset of the bracket that closes the one at ``open_index``
    (``(``, ``[`` or ``{``), or ``len(text)`` when it is never closed."""
    opening = text[open_index]
    depth = 0
    for m in _BRACKETS[opening].finditer(text, open_index):
        depth += 1 if m.group() == opening else -1
        if depth == 0:
            return m.start()
    return len(text)


def blocks(code: str) -> tuple[Block, ...]:
    """Every ``{...}`` block of ``code``, in the order of their opening braces."""
    found: list[list] = []
    stack: list[int] = []
    for m in _BRACES.finditer(code):
        pos = m.start()
        if m.group() == "{":
            # what opens a block starts after the previous statement, block or parameter list
            look_from = max(0, pos - _LOOK_BACK)
            start = max(code.rfind(c, look_from, pos) for c in ";{})") + 1 or look_from
            opener = _OPENER.search(code, start, pos)
            if opener is None:
                kind, name = "body", ""
            elif opener.group("name") is not None:
                kind, name = "namespace", _namespace_name(opener.group("name"))
            else:
                kind, name = "linkage", ""
            stack.append(len(found))
            found.append([pos, len(code), kind, name])
        elif stack:
            found[stack.pop()][1] = pos
    return tuple(Block(*b) for b in found)


def _namespace_name(written: str) -> str:
    """``" a :: inline b "`` -> ``"a::b"``."""
    parts = (re.sub(r"^inline\s+", "", p) for p in re.split(r"\s*::\s*", written.strip()))
    return "::".join(p for p in parts if p)


def at_file_scope(all_blocks: tuple[Block, ...], pos: int) -> bool:
    """True when ``pos`` lies outside every function or class body
    (namespaces and ``extern "C" { }`` blocks do not count as bodies)."""
    return all(b.kind != "body" for b in all_blocks if b.contains(pos))


def split_top_level(text: str, sep: str = ",", angles: bool = True) -> list[str]:
    """Split at ``sep`` outside (), [] and {} (and <> with ``angles``; leave
    them out where ``<`` may be a comparison, as in an initialiser). A blank
    last part (a trailing separator) is dropped."""
    opening, closing = ("(<[{", ")>]}") if angles else ("([{", ")]}")
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in opening:
            depth += 1
        elif ch in closing:
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts
