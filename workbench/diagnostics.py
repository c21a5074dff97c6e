"""Turn compiler logs into :class:`Diagnostic` lists on the
user's own line numbers, and show them with the offending source lines.

Two log dialects are understood: NVRTC's ``file(LINE): error: message``
(with an echoed source line and a caret under the column) and GCC's
``file:LINE:COL: error: message`` (the simulator builds with g++).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Diagnostic:
    """One compiler message, located in the user's own source.

    ``line`` and ``column`` are 1-based and count lines of the cell (for a
    ``%%cuda`` cell the magic line is line 1) or of the string passed to
    :func:`workbench.compile`. ``line`` is ``None`` for messages that point at
    no line (for example an unknown option).
    """

    severity: str  # "error" | "warning" | "note"
    message: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else "(no line)"
        if self.line is not None and self.column is not None:
            where += f", column {self.column}"
        return f"{where}: {self.severity}: {self.message}"

    def to_dict(self) -> dict:
        return {"severity": self.severity, "message": self.message,
                "line": self.line, "column": self.column}


_NVRTC = re.compile(r"^(?P<file>[^\n()]*?)\((?P<line>\d+)\): (?P<sev>error|warning|remark|note)"
                    r"(?: #\S+(?:-D)?)?: (?P<msg>.*)$")
_GCC = re.compile(r"^(?P<file>[^\n:]*?):(?P<line>\d+):(?:(?P<col>\d+):)? "
                  r"(?:fatal )?(?P<sev>error|warning|note): (?P<msg>.*)$")
_HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".inl", ".hxx")


def _is_header(filename: str) -> bool:
    base = filename.rsplit("/", 1)[-1]
    return base.endswith(_HEADER_SUFFIXES) or "." not in base


def parse_log(log: str, source: str, *, line_shift: int = 0, line_offset: int = 0,
              main_file: str | None = None) -> list[Diagnostic]:
    """Diagnostics of ``log``. A message at compiled line ``L`` of the main
    file lands on cell line ``L - line_shift + line_offset``; messages inside
    headers keep their file in the text and get no line, and so do messages
    in any file but ``main_file`` where one is named (a program of several
    source files)."""
    src_lines = source.splitlines()
    lines = log.splitlines()
    out: list[Diagnostic] = []
    for i, text in enumerate(lines):
        m = _NVRTC.match(text) or _GCC.match(text)
        if not m:
            continue
        sev = {"remark": "note"}.get(m["sev"], m["sev"])
        msg = m["msg"].strip()
        src_line = int(m["line"]) - line_shift
        col = int(m["col"]) if m.groupdict().get("col") else _caret_column(lines, i, src_lines, src_line)
        other = main_file is not None and m["file"].strip().rsplit("/", 1)[-1] != main_file
        if other or _is_header(m["file"]) or not (1 <= src_line <= max(len(src_lines), 1)):
            out.append(Diagnostic(sev, f"{msg} (in {m['file'].strip()}:{m['line']})"))
            continue
        if col is not None:
            col = _char_column(src_lines[src_line - 1] if src_lines else "", col)
        out.append(Diagnostic(sev, msg, src_line + line_offset, col))
    if not out and log.strip():  # a message with no location (an option, the driver)
        first = next((ln for ln in lines if ln.strip()), log.strip()).strip()
        severity = "warning" if re.search(r"\bwarning\b", first) and "error" not in first else "error"
        out.append(Diagnostic(severity, first))
    return out


def _char_column(text: str, byte_column: int) -> int:
    """The 1-based character column of 1-based byte column ``byte_column``
    of ``text`` (both compilers count bytes of UTF-8: g++ is asked to)."""
    if text.isascii():
        return byte_column
    return len(text.encode("utf-8")[:byte_column - 1].decode("utf-8", "ignore")) + 1


def _display_prefix(text: str, column: int) -> str:
    """Blanks that reach character column ``column`` of ``text`` on screen:
    tabs kept, wide characters (CJK, emoji) two blanks."""
    return "".join("\t" if c == "\t" else "  " if unicodedata.east_asian_width(c) in "WF" else " "
                   for c in text[:column - 1])


def _caret_column(lines, i, src_lines, src_line) -> int | None:
    """NVRTC echoes the source line and puts ``^`` under the column."""
    if i + 2 >= len(lines) or not (1 <= src_line <= len(src_lines)):
        return None
    echo, caret = lines[i + 1], lines[i + 2]
    if caret.strip() != "^":
        return None
    original = src_lines[src_line - 1]
    stripped = original.strip()
    at = echo.find(stripped) if stripped else -1
    if at < 0:
        return None
    prefix = at - (len(original) - len(original.lstrip()))
    return caret.index("^") - prefix + 1


def format_diagnostics(diagnostics, source: str, line_offset: int = 0, context: int = 1) -> str:
    """Plain-text rendering: each message, then its source lines with a marker."""
    src_lines = source.splitlines()
    blocks = []
    for d in diagnostics:
        block = [str(d)]
        if d.line is not None:
            idx = d.line - line_offset  # 1-based line of ``source``
            lo, hi = max(1, idx - context), min(len(src_lines), idx + context)
            width = len(str(hi + line_offset))
            for k in range(lo, hi + 1):
                mark = ">" if k == idx else " "
                block.append(f"  {mark} {k + line_offset:>{width}} | {src_lines[k - 1]}")
                if k == idx and d.column:
                    block.append(f"    {' ' * width} | {_display_prefix(src_lines[k - 1], d.column)}^")
        blocks.append("\n".join(block))
    return "\n".join(blocks)
