"""HTML tables for ``_repr_html_`` and JSON-safe cell values.

Every result object of the workbench shows itself in a notebook through these
two functions, so that all its tables look alike: :func:`html_table` for rows
under a header, :func:`html_fields` for one object's fields (name, value[,
note]) down the page. Cells are escaped; missing values (``None``, NaN, NA)
print as ``N/A``; numbers are right-aligned, text left-aligned.
"""
from __future__ import annotations

import html
import math
import numbers
import textwrap
from typing import Iterable, Sequence

import numpy as np

from .na import NA, is_na


def _missing(value) -> bool:
    return value is None or is_na(value) or (isinstance(value, float) and math.isnan(value))


def cell_text(value) -> str:
    """A cell as text: ``N/A`` for missing values, ``str`` otherwise."""
    return str(NA) if _missing(value) else str(value)


def _is_fraction(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral)


def _cell(tag: str, value, bold: bool = False, align: str | None = None,
          number_format: str | None = None) -> str:
    if align is None:
        align = "right" if isinstance(value, numbers.Number) and not isinstance(value, bool) else "left"
    if number_format and _is_fraction(value) and not _missing(value):
        text = html.escape(format(value, number_format))
    else:
        text = html.escape(cell_text(value))
    if bold:
        text = f"<b>{text}</b>"
    return f"<{tag} style='text-align:{align}'>{text}</{tag}>"


def _column_align(align: Sequence[str | None] | None, column: int) -> str | None:
    return align[column] if align is not None and column < len(align) else None


def _frame(body: str, head: str, title: str | None, caption: str | None,
           notes: Iterable[str]) -> str:
    # left, as the text below the table (a caption is centred by default)
    cap = f"<caption style='text-align:left'>{html.escape(caption)}</caption>" if caption else ""
    top = f"<div><b>{html.escape(title)}</b></div>" if title else ""
    below = "".join(f"<div><i>{html.escape(n)}</i></div>" for n in notes)
    return f"<div>{top}<table>{cap}{head}<tbody>{body}</tbody></table>{below}</div>"


def _head(header: Sequence[str] | None, align: Sequence[str | None] | None = None) -> str:
    """The header row; a column's header is aligned as its cells are."""
    if not header:
        return ""
    return ("<thead><tr>" + "".join(
        f"<th style='text-align:{_column_align(align, j) or 'left'}'>{html.escape(h)}</th>"
        for j, h in enumerate(header)) + "</tr></thead>")


def _value_align(value) -> str:
    return "right" if isinstance(value, numbers.Number) and not isinstance(value, bool) else "left"


def _columns_align(rows: list, align: Sequence[str | None] | None) -> list[str]:
    """Each column's alignment: as ``align`` says, else by its first present value."""
    width = max((len(r) for r in rows), default=0)
    out = []
    for j in range(width):
        given = _column_align(align, j)
        if given is None:
            present = (r[j] for r in rows if j < len(r) and not _missing(r[j]))
            given = _value_align(next(present, ""))
        out.append(given)
    return out


def html_table(rows: Iterable[Sequence], header: Sequence[str] | None = None, *,
               title: str | None = None, caption: str | None = None,
               bold_rows: Iterable[int] = (), notes: Iterable[str] = (),
               align: Sequence[str | None] | None = None,
               number_format: str | None = None) -> str:
    """Rows under a header. ``title`` is a bold line above the table (escaped),
    ``caption`` the table's own caption, ``bold_rows`` the indices of rows to
    emphasise and ``notes`` lines in italics below it. ``align`` gives a
    column's alignment (``"left"``, ``"right"``; ``None``: by the value's
    type: a column of numbers, its header too, is right-aligned),
    ``number_format`` a format spec for non-integer numbers (``".4g"``)."""
    bold = set(bold_rows)
    rows = [list(r) for r in rows]
    columns = _columns_align(rows, align)
    body = "".join("<tr>" + "".join(_cell("td", v, i in bold, columns[j], number_format)
                                    for j, v in enumerate(row)) + "</tr>"
                   for i, row in enumerate(rows))
    return _frame(body, _head(header, columns), title, caption, notes)


def html_fields(fields: Iterable[Sequence], *, title: str | None = None,
                caption: str | None = None, notes: Iterable[str] = (),
                header: Sequence[str] | None = None,
                align: Sequence[str | None] | None = None) -> str:
    """One object's fields down the page: each item is ``(name, value)`` or
    ``(name, value, note)``; the name is a row header. Several objects side
    by side: ``(name, value_1, value_2, ...)`` under ``header`` (its first
    entry heads the names). ``align`` gives the alignment of the columns
    after the names (``None``: by the value's type)."""
    body = "".join("<tr><th style='text-align:left'>" + html.escape(str(f[0])) + "</th>"
                   + "".join(_cell("td", v, align=_column_align(align, j))
                             for j, v in enumerate(f[1:])) + "</tr>" for f in fields)
    return _frame(body, _head(header), title, caption, notes)


def shorten(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` characters, " …" included where it
    was cut: at a word boundary (:func:`textwrap.shorten`), or within a first
    word longer than ``width``."""
    text = " ".join(str(text).split())
    cut = textwrap.shorten(text, width, placeholder=" …")
    if cut == "…" and text:  # (no whole word fits)
        return text[:max(0, width - 2)] + " …" if width >= 2 else "…"
    return cut


def plain_value(value):
    """JSON-safe version of a NumPy scalar, parameter value or table cell:
    NumPy scalars become Python numbers, NaN becomes None, tuples lists, and
    anything else its ``repr``."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (tuple, list)):
        return [plain_value(v) for v in value]
    return repr(value)


def pandas():
    """The pandas module, imported on first use: it costs a few tenths of a
    second, which ``import workbench`` and a launch must not pay."""
    import pandas as pd  # lazy: see the docstring
    return pd
