"""DataFrames that hold plain numbers and show themselves for people.

:func:`readable` wraps a DataFrame of results (a sweep's, ``wb.timings()``,
a tune's configurations) in :class:`ReadableFrame`: the data stay what they
were (times in seconds, ``*_s``; ``ms`` in milliseconds; ``start_ms`` in
milliseconds since the epoch), so code reads them as before, while the
notebook shows

* each time column in the unit a person reads, chosen per column from its
  values (ns, µs, ms or s), the unit in the header (``median (µs)``);
* clock times as ``HH:MM:SS.mmm`` (``time``, ``start_ms`` as ``start``);
* one marker, ``N/A``, for every missing value (None, NaN, ``<NA>``);
* by default only the columns the table was made to show first, and a line
  naming the others.

``to_pandas()`` gives the plain DataFrame. Frames derived from one
(``df.tail(3)``, ``df[["kernel", "ms"]]``) show themselves the same way,
with every column they have.
"""
from __future__ import annotations

import datetime as _dt
import functools
import math
import numbers
from typing import Iterable

import numpy as np

from .na import NA, is_na
from .tables import pandas, shorten
from .units import times_unit

MISSING = str(NA)
#: Time columns whose values are milliseconds since the epoch: shown as clock times.
CLOCK_MS = {"start_ms": "start", "end_ms": "end"}
#: Text columns shown shortened (at a word boundary) to this many characters;
#: the data keep them whole.
SHORTENED = {"reason": 80}


def readable(frame, *, shown: Iterable[str] | None = None, hide_empty: bool = False,
             more: str = ""):
    """``frame`` as a :class:`ReadableFrame` (the same data, no copy).
    ``shown``: the columns shown by default, in order (None: all);
    ``hide_empty``: also leave out columns with no value at all; ``more``:
    how to see the rest, said after the list of those left out."""
    out = frame_class()(frame)
    out.attrs = dict(frame.attrs)
    columns = list(out.columns)
    hidden = [c for c in columns if shown is not None and c not in shown]
    empty = [c for c in columns if c not in hidden and _empty(out[c])] if hide_empty else []
    object.__setattr__(out, "_wb_hidden", tuple(hidden))
    object.__setattr__(out, "_wb_empty", tuple(empty))
    object.__setattr__(out, "_wb_more", more)
    if shown is not None:
        object.__setattr__(out, "_wb_order", tuple(c for c in shown if c in columns))
    return out


def _empty(series) -> bool:
    return all(_missing(v) for v in series)


def _missing(value) -> bool:
    if value is None or is_na(value):
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    try:
        return bool(pandas().isna(value)) if not isinstance(value, (tuple, list, str)) else False
    except (TypeError, ValueError):
        return False


def _number(x: float) -> str:
    """Four significant figures at most, never an exponent."""
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.1f}"
    if a >= 10:
        return f"{x:.2f}"
    return f"{x:.3f}"


def _seconds_column(values: list, unit=None) -> tuple[str, list[str]]:
    """Seconds as text in the column's unit (``unit``: (name, seconds), else
    from their median), and the unit."""
    unit, scale = unit or times_unit(v for v in values if not _missing(v))
    return unit, [MISSING if _missing(v) else _number(float(v) / scale) for v in values]


def _clock(value) -> str:
    if _missing(value):
        return MISSING
    if isinstance(value, numbers.Real):
        value = _dt.datetime.fromtimestamp(float(value) / 1e3)
    return f"{value:%H:%M:%S}.{value.microsecond // 1000:03d}"


def _cell(value) -> str:
    if _missing(value):
        return MISSING
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return _significant(float(value))
    return str(value)


def _significant(x: float) -> str:
    """Four significant figures, never an exponent: 7.363e-05 -> 0.00007363."""
    if not math.isfinite(x):
        return MISSING if math.isnan(x) else str(x)
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return np.format_float_positional(x, precision=4, unique=False, fractional=False, trim="-")


def shown_column(name: str, series) -> tuple[str, list]:
    """A column's header and its cells as people read them (text, or the
    values themselves where pandas shows them well: whole numbers and truth
    values with none missing)."""
    header, cells, _ = _column_cells(name, series, None)
    return header, cells


def _column_cells(name: str, series, positions) -> tuple[str, list, bool]:
    """:func:`shown_column` of the rows at ``positions`` (None: all): the
    header, their cells and whether those are the values themselves. What
    the whole column decides (its kind, its unit of time) comes from all of it."""
    pd = pandas()
    values = list(series if positions is None else series.iloc[positions])
    if name in CLOCK_MS:
        return CLOCK_MS[name], [_clock(v) for v in values], False
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return name, [_clock(v) for v in values], False
    numeric = pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(
        series.dtype)
    is_number = numeric or all(_missing(v) or (isinstance(v, numbers.Real)
                                               and not isinstance(v, bool)) for v in series)
    if is_number and (name.endswith("_s") or name == "ms"):
        whole = (series.to_numpy(dtype=float, na_value=np.nan) if numeric
                 else [v for v in series if not _missing(v)])
        if name == "ms":
            values = [v if _missing(v) else float(v) / 1e3 for v in values]
            whole = np.asarray(whole, dtype=float) / 1e3
        unit, cells = _seconds_column(values, times_unit(whole))
        base = "duration" if name == "ms" else name[:-2]
        return f"{base} ({unit})", cells, False
    if (pd.api.types.is_integer_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype)) \
            and not series.isna().any():
        return name, values, True  # (shown by pandas as they are: nothing to say otherwise)
    if name in SHORTENED:
        return name, [MISSING if _missing(v) else shorten(str(v), SHORTENED[name]) or MISSING
                      for v in values], False
    return name, [_cell(v) for v in values], False


def _shown_positions(n: int):
    """The positions of the rows pandas shows of ``n`` (its display.max_rows
    and display.min_rows: a head and a tail), a few more to spare; None: all."""
    pd = pandas()
    max_rows, min_rows = pd.get_option("display.max_rows"), pd.get_option("display.min_rows")
    if not max_rows or n <= max_rows:
        return None
    end = min(min_rows, max_rows) if min_rows else max_rows  # (pandas shows half of it each end)
    return np.r_[0:end, n - end:n]


@functools.lru_cache(maxsize=None)
def frame_class():
    """The :class:`ReadableFrame` class (made on first use: pandas is
    imported lazily)."""
    pd = pandas()

    class ReadableFrame(pd.DataFrame):
        """A DataFrame of results that shows itself for people (see
        :mod:`workbench.present.frames`); ``to_pandas()``: the plain frame."""

        @property
        def _constructor(self):
            return ReadableFrame

        def to_pandas(self):
            """The plain DataFrame: every column, times in seconds (``*_s``)
            or milliseconds (``ms``), missing values as pandas keeps them."""
            plain = pd.DataFrame(self)
            plain.attrs = dict(self.attrs)
            return plain

        def _wb_view(self):
            """(the DataFrame of text shown, the columns left out)."""
            hidden = set(getattr(self, "_wb_hidden", ())) | set(getattr(self, "_wb_empty", ()))
            order = list(getattr(self, "_wb_order", ()))
            names = order + [c for c in self.columns if c not in order and c not in hidden]
            names = [c for c in names if c in self.columns and c not in hidden]
            positions, data = _shown_positions(len(self)), {}
            for name in names:
                header, cells, as_they_are = _column_cells(str(name), self[name], positions)
                if positions is None:
                    data[header] = cells
                elif as_they_are:
                    data[header] = self[name].to_numpy()
                else:  # (the rows pandas leaves out are never formatted)
                    column = np.full(len(self), "", dtype=object)
                    column[positions] = cells
                    data[header] = column
            view = pd.DataFrame(data, index=self.index)
            return view, [c for c in self.columns if c in hidden]

        def _wb_note(self, left_out: list) -> str:
            empty = set(getattr(self, "_wb_empty", ()))
            chosen = [str(c) for c in left_out if c not in empty]
            blank = [str(c) for c in left_out if c in empty]
            parts = []
            if chosen:
                more = getattr(self, "_wb_more", "") or "df.to_pandas() has them"
                parts.append(f"also {', '.join(chosen)}: {more}")
            if blank:
                parts.append(f"no values in {', '.join(blank)}")
            return "; ".join(parts)

        def __repr__(self) -> str:
            view, left_out = self._wb_view()
            note = self._wb_note(left_out)
            with pd.option_context("display.max_colwidth", None):  # (cells are cut already,
                text = repr(view)                                 # at word boundaries)
            return text + (f"\n{note}" if note else "")

        def _repr_html_(self) -> str:
            import html  # (a notebook's display only)
            view, left_out = self._wb_view()
            note = self._wb_note(left_out)
            with pd.option_context("display.max_colwidth", None):
                body = view._repr_html_() or ""
            return body + (f"<div><i>{html.escape(note)}</i></div>" if note else "")

    ReadableFrame.__module__ = __name__
    ReadableFrame.__qualname__ = "ReadableFrame"
    return ReadableFrame


def __getattr__(name: str):
    if name == "ReadableFrame":  # (pickle finds the class here, made on first use)
        return frame_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
