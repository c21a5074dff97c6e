"""``NA``: the value shown for what a driver or NVML cannot give.

It is a string (it prints as ``N/A`` in tables, HTML and widget state) that
is false in a boolean test and acts like NaN in arithmetic and comparisons,
so a missing temperature never raises in code that averages or plots it.
"""
from __future__ import annotations

import math


class NAType(str):
    """The type of :data:`NA` (one instance)."""

    _instance: "NAType | None" = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls, "N/A")
        return cls._instance

    def __repr__(self) -> str:
        return "NA"

    def __bool__(self) -> bool:
        return False

    def __float__(self) -> float:
        return math.nan

    def __reduce__(self):  # pickles back to the singleton
        return (NAType, ())

    # Arithmetic gives NaN, like a missing number would.
    def _nan(self, *_):
        return math.nan

    __add__ = __radd__ = __sub__ = __rsub__ = _nan
    __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _nan
    __floordiv__ = __rfloordiv__ = __pow__ = __rpow__ = _nan
    __neg__ = __pos__ = __abs__ = _nan

    # Comparisons with numbers are false, as with NaN; with strings they are
    # string comparisons so that sorting a column of names still works.
    def __lt__(self, other):
        return str.__lt__(self, other) if isinstance(other, str) else False

    def __le__(self, other):
        return str.__le__(self, other) if isinstance(other, str) else False

    def __gt__(self, other):
        return str.__gt__(self, other) if isinstance(other, str) else False

    def __ge__(self, other):
        return str.__ge__(self, other) if isinstance(other, str) else False

    def __eq__(self, other):
        return other is self or (isinstance(other, str) and str.__eq__(self, other))

    __hash__ = str.__hash__


#: The missing value.
NA = NAType()


def is_na(value) -> bool:
    """True for :data:`NA`, ``None`` and NaN."""
    return value is None or value is NA or (isinstance(value, float) and math.isnan(value))


def or_na(value):
    """``value``, or :data:`NA` when it is ``None`` or NaN."""
    return NA if is_na(value) else value


def formatted_fields(obj, labels: dict, text_of) -> dict:
    """``{label: text}`` for each field of ``obj`` named in ``labels``: NA
    prints as N/A, anything else as ``text_of(field, value)`` says."""
    out = {}
    for key, label in labels.items():
        value = getattr(obj, key)
        out[label] = str(NA) if value is NA else text_of(key, value)
    return out
