"""Byte counts for people: ``format_bytes`` and ``parse_size``.

Missing values are :data:`workbench.present.na.NA` (prints as ``N/A``).
"""
from __future__ import annotations

import math
import operator
import re

from ..errors import ArgumentValueError
from .na import NA, is_na

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
_FACTORS = {"": 1, "b": 1,
            "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
            "t": 10**12, "tb": 10**12,
            "ki": 2**10, "kib": 2**10, "mi": 2**20, "mib": 2**20,
            "gi": 2**30, "gib": 2**30, "ti": 2**40, "tib": 2**40}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)

#: How to write a size; every size error ends with it.
SIZE_HINT = ("write bytes as a whole number or with a unit, e.g. 4096, '512MiB', '2GB', "
             "'1.5GiB'")


def format_bytes(n) -> str:
    """``1536`` -> ``"1.50 KiB"``; ``None`` -> ``"N/A"``."""
    if is_na(n):
        return str(NA)
    n = int(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n < 1024:
        return f"{sign}{n} B"
    value = float(n)
    for unit in _UNITS[1:]:
        value /= 1024
        if value < 1024 or unit == _UNITS[-1]:
            return f"{sign}{value:.2f} {unit}"
    raise AssertionError("unreachable")


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit to show ``seconds`` in and its size in seconds:
    ``0.0012`` -> ``("ms", 1e-3)``; below a microsecond, nanoseconds."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return unit, scale
    return "ns", 1e-9


def times_unit(seconds) -> tuple[str, float]:
    """The unit of a column or axis of times, the one rule every table,
    panel and plot follows: :func:`time_unit` of the median of the finite,
    non-zero values (``("s", 1.0)`` when there is none). ``seconds``: any
    iterable, a float array the fastest."""
    import numpy as np  # (lazy: the units of one value need no NumPy)
    if not (isinstance(seconds, np.ndarray) and seconds.dtype.kind == "f"):
        seconds = np.array([math.nan if is_na(v) else float(v) for v in seconds], dtype=float)
    finite = np.abs(seconds[np.isfinite(seconds) & (seconds != 0)])
    if not finite.size:
        return "s", 1.0
    middle = len(finite) // 2
    return time_unit(float(np.partition(finite, middle)[middle]))


def format_fraction(x) -> str:
    """``0.25`` -> ``"25.0%"``; ``None`` -> ``"N/A"``."""
    return str(NA) if is_na(x) else f"{100 * x:.1f}%"


def parse_size(text) -> int:
    """``"512MiB"``, ``"2 GB"``, ``"1e9"``, ``4096`` -> bytes.

    Decimal units (kB, MB, GB) are powers of 1000 and binary ones (KiB, MiB,
    GiB) powers of 1024. A byte count without a unit must be whole (``2.5``
    is refused, not truncated). Raises ValueError saying how to write a size.
    """
    if isinstance(text, bool):
        raise ArgumentValueError(f"not a size: {text!r}; {SIZE_HINT}")
    try:
        number = operator.index(text)   # int, np.int64...
    except TypeError:
        pass
    else:
        if number < 0:
            raise ArgumentValueError(f"a size must not be negative, got {number}; {SIZE_HINT}")
        return number
    match = _SIZE.match(str(text))
    factor = _FACTORS.get(match.group(2).lower()) if match else None
    if factor is None:
        raise ArgumentValueError(f"cannot read {text!r} as a size; {SIZE_HINT}")
    value = float(match.group(1)) * factor
    if factor == 1 and not value.is_integer():
        raise ArgumentValueError(f"{text!r} is not a whole number of bytes; {SIZE_HINT}")
    return int(value)
