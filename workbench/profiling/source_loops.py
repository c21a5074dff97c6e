"""Whether nvcc unrolls the loop around a source line at run time, read from
the CUDA source (:func:`runtime_unrolled`).

nvcc unrolls an innermost ``for`` loop whose trip count is known only at run
time by 4 when its step is a constant and nothing says otherwise; a loop whose
step is a run-time value (``i += blockDim.x * gridDim.x``), a ``while`` loop,
and a loop after ``#pragma unroll`` (any count: the pragma decides) are issued
as written. The counters use it to tell where a GPU may issue more requests
than counted (:mod:`.counters`, ``LineRow.uneven``).
"""
from __future__ import annotations

import re

_FOR = re.compile(r"\bfor\s*\((.*)\)")
_LOOP_KEYWORD = re.compile(r"\b(for|while|do)\b")
#: ``++i``, ``i++``, ``--i``, ``i--``, ``i += 4``, ``i -= 0x10``
_CONSTANT_STEP = re.compile(r"^\s*(?:(?:\+\+|--)\s*\w+|\w+\s*(?:\+\+|--)"
                            r"|\w+\s*[-+]=\s*(?:\d+|0[xX][0-9a-fA-F]+)[uUlL]*)\s*$")


def runtime_unrolled(lines: list[str], line: int) -> bool:
    """Whether the innermost loop around 1-based ``line`` of ``lines`` is a
    ``for`` loop with a constant step and no ``#pragma unroll`` before it (the
    loops nvcc unrolls when their trip count is known only at run time).
    False where no loop is found (or the line is not in ``lines``)."""
    if not 1 <= line <= len(lines):
        return False
    header = _loop_header(lines, line - 1)
    found = _FOR.search(lines[header]) if header is not None else None
    if not found:
        return False
    clauses = found.group(1).split(";")
    if len(clauses) != 3 or not _CONSTANT_STEP.match(clauses[2]):
        return False
    before = _previous(lines, header)
    return before is None or not lines[before].strip().startswith("#pragma unroll")


def _previous(lines: list[str], index: int) -> int | None:
    """The last line before ``index`` that is not blank."""
    return next((i for i in range(index - 1, -1, -1) if lines[i].strip()), None)


def _loop_header(lines: list[str], index: int) -> int | None:
    """The 0-based line of the innermost loop statement around line ``index``:
    a ``for`` on that line itself (a one-line loop) or, brace-less, on the line
    before; else the nearest enclosing ``{`` whose statement is a loop."""
    if _FOR.search(lines[index]):
        return index
    previous = _previous(lines, index)
    if previous is not None and _FOR.search(lines[previous]) and "{" not in lines[previous] \
            and not lines[previous].rstrip().endswith(";"):
        return previous
    depth = 0
    for i in range(index - 1, -1, -1):
        text = lines[i].split("//")[0]
        for ch in reversed(text):
            if ch == "}":
                depth += 1
            elif ch == "{":
                if depth:
                    depth -= 1
                    continue
                # an enclosing block: its statement is on this line or the one before
                owner = i if text[:text.rfind("{")].strip() else (_previous(lines, i) or i)
                if _LOOP_KEYWORD.search(lines[owner]):
                    return owner
                break   # an if, else or function: look further out
    return None
