"""The lexer-level pass: comments and literals blanked, positions kept.

Every later search (kernels, directives, unsupported constructs) runs over
this text, so it must agree with the C++ lexer on what is code: a ``'``
inside ``1'000'000`` separates digits, ``\\"`` does not end a string, a raw
string ``R"x(...)x"`` ends only at its delimiter, and the header name of an
``#include`` is code (the simulator checks which headers a cell uses).
"""
from __future__ import annotations

import re

# the lookahead skips at once the positions where no alternative can start
_LEXEME = re.compile(r"""(?=[\#/"'\dRuUL])(?:
  (?P<include>\#[ \t]*(?:include_next|include|import)[ \t]*(?:<[^>\n]*>|"[^"\n]*"))
| (?P<line_comment>//[^\n\\]*(?:\\[\s\S][^\n\\]*)*)
| (?P<block_comment>/\*[\s\S]*?(?:\*/|\Z))
| (?P<raw>(?<!\w)(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{0,16})\([\s\S]*?\)(?P=delim)")
| (?P<number>(?<![\w.])\d(?:[eEpP][+-]|[\w.])*(?:'\w(?:[eEpP][+-]|[\w.])*)+)
| (?P<string>"[^"\\\n]*(?:\\[\s\S][^"\\\n]*)*")
| (?P<char>'[^'\\\n]*(?:\\[\s\S][^'\\\n]*)*')
)""", re.X)


def blank(text: str) -> str:
    """``text`` with every character but newlines replaced by a space."""
    if "\n" not in text:
        return " " * len(text)
    return "\n".join(" " * len(part) for part in text.split("\n"))


def blank_comments_and_literals(source: str) -> str:
    """``source`` with comments and the insides of string and character
    literals replaced by spaces; quotes, newlines and therefore every offset
    and line number stay where they were. Digit separators, escaped quotes
    and raw strings are understood; ``#include`` header names and the
    ``"C"`` of ``extern "C"`` stay visible. A quote with no closing quote on
    its line is left as it is."""
    if "/" not in source and '"' not in source and "'" not in source:
        return source
    pieces: list[str] = []
    last = 0
    for m in _LEXEME.finditer(source):
        kind = m.lastgroup
        if kind in ("include", "number"):
            continue
        start, end = m.span()
        pieces.append(source[last:start])
        if kind in ("line_comment", "block_comment"):
            pieces.append(blank(source[start:end]))
        else:
            lexeme = m.group()
            opening = lexeme.index(lexeme[-1])  # after a prefix such as u8 or R
            body = lexeme[opening + 1:-1]
            if body == "C" and kind == "string":
                pieces.append(lexeme)
            else:
                pieces.append(lexeme[:opening + 1] + blank(body) + lexeme[-1])
        last = end
    pieces.append(source[last:])
    return "".join(pieces)


def line_col(text: str, pos: int) -> tuple[int, int]:
    """The 1-based line and column of offset ``pos`` in ``text``."""
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1
