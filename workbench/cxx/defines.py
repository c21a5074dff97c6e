"""Preprocessor defines as every compile takes them: the one place that turns
what a user wrote (``{"WIDTH": 512}``, ``["DEBUG", "N=4"]``, ``"N=4"``) into
``-D`` options (``("WIDTH=512",)``), or refuses it with a message that says
what was wrong.

A mapping's values are written as C literals: ``int`` (and NumPy integers)
in decimal, ``float`` with every digit Python keeps (NumPy ``float32`` with
an ``f`` suffix), ``bool`` as ``1``/``0``, a ``str`` as given (``""``
defines the name as empty). A sequence holds ``"NAME"`` (defined as 1) or
``"NAME=VALUE"`` strings. Anything else (``None``, lists, a set of names,
NaN) is refused: a define the compiler would read otherwise than the user
meant is a wrong answer without an error.
"""
from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping

import numpy as np

from ..errors import DefinesError

#: ``NAME`` or a function-like macro's head, ``NAME(a, b)``.
_NAME = re.compile(r"[A-Za-z_]\w*(\([\w\s,.]*\))?\Z")


def normalise_defines(defines, *, what: str = "defines") -> tuple[str, ...]:
    """``defines`` as ``("NAME", "NAME=VALUE", ...)`` (see the module docstring);
    ``what`` names the argument in the message of a refusal."""
    if defines is None:
        return ()
    if isinstance(defines, str):
        return (_checked_text(defines, what),)
    if isinstance(defines, Mapping):
        return tuple(_from_item(name, value, what) for name, value in defines.items())
    if isinstance(defines, (list, tuple)):
        out = []
        for item in defines:
            if not isinstance(item, str):
                raise DefinesError(
                    f"{what}: a list of defines holds strings, \"NAME\" or \"NAME=VALUE\", got "
                    f"{item!r} ({type(item).__name__}); for values, give a dict: "
                    "{\"NAME\": value}")
            out.append(_checked_text(item, what))
        return tuple(out)
    raise DefinesError(f"{what} takes a dict {{\"NAME\": value}} or a list of \"NAME\" / "
                       f"\"NAME=VALUE\" strings, got {type(defines).__name__} {defines!r}")


def _checked_text(text: str, what: str) -> str:
    name, eq, value = text.partition("=")
    _check_name(name.strip(), what)
    if "\n" in value or "\r" in value:
        raise DefinesError(f"{what}: the value of {name.strip()} spans lines ({value!r}); a -D "
                           "define is one line")
    return f"{name.strip()}={value}" if eq else name.strip()


def _check_name(name, what: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise DefinesError(f"{what}: {name!r} is not a macro name (letters, digits and _, not "
                           "starting with a digit)")


def _from_item(name, value, what: str) -> str:
    _check_name(name, what)
    return f"{name}={c_literal(value, f'{what}[{name!r}]')}"


def c_literal(value, what: str = "value") -> str:
    """``value`` written as a C literal (see the module docstring)."""
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    if isinstance(value, numbers.Integral):
        text = str(int(value))
        return f"({text})" if text.startswith("-") else text
    if isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):
            raise DefinesError(f"{what} is {value!r}, which has no C literal; give a string "
                               "such as \"INFINITY\" (from <math.h>) if that is meant")
        text = _float_text(value)
        return f"({text})" if text.startswith("-") else text
    if value is None:
        raise DefinesError(f"{what} is None; give True to define it as 1, \"\" to define it "
                           "empty, or leave the name out")
    if isinstance(value, str):
        if "\n" in value or "\r" in value:
            raise DefinesError(f"{what} spans lines ({value!r}); a -D define is one line")
        return value
    raise DefinesError(f"{what} is {type(value).__name__} {value!r}; a define's value is an int, "
                       "a float, a bool or a string (written into the source as it is)")


def _float_text(value) -> str:
    """A float's shortest decimal that reads back as the same value: a
    ``double`` literal, or for a NumPy ``float32`` a ``float`` one (``f``)."""
    if isinstance(value, np.float32):
        big_or_tiny = value != 0 and not 1e-4 <= abs(value) < 1e16
        text = (np.format_float_scientific(value, unique=True, trim="0") if big_or_tiny
                else np.format_float_positional(value, unique=True, trim="0"))
        return text + "f"
    text = repr(float(value))
    return text if any(c in text for c in ".en") else text + ".0"
