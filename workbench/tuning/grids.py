"""Kernel Tuner's way of giving a grid: a problem size and grid divisors.

``wb.tune(..., problem_size=(4096, 4096), grid_div_x=["block_size_x",
"tile_size_x"], grid_div_y=["block_size_y", "tile_size_y"])`` launches
``ceil(problem_size[i] / product of the divisors of axis i)`` blocks in each
axis, as ``kernel_tuner.tune_kernel`` does. A divisor is a parameter's name,
an expression over the parameters (``"block_size_x / 32"``, its value
truncated to an int as Kernel Tuner does), a number, a
function of the configuration dict, or a list of these (their product).
When an axis has no divisors given, Kernel Tuner's default is used: the
``block_size_x`` (``_y``, ``_z``) parameter where the space has it, else 1;
``[]`` divides by nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import TuneError
from .space import _EXPRESSION_NAMES

_DEFAULT_DIVISORS = ("block_size_x", "block_size_y", "block_size_z")


def _evaluate(expression, config: dict):
    if isinstance(expression, str):   # an int, as Kernel Tuner takes it: "block_size_x / 3" -> 21
        return int(eval(expression, {"__builtins__": {}, **_EXPRESSION_NAMES}, dict(config)))  # noqa: S307
    if callable(expression):
        return expression(config)
    return expression


def _divisor(divisor, default: str, config: dict) -> float:
    if divisor is None:
        return config.get(default, 1)
    if isinstance(divisor, (list, tuple)):
        return math.prod(_divisor(d, default, config) for d in divisor) if divisor else 1
    return _evaluate(divisor, config)


@dataclass(frozen=True)
class GridDivisors:
    """A grid computed per configuration from a problem size and divisors."""

    problem_size: tuple      # up to three ints or expressions over the parameters
    divisors: tuple          # per axis: None (Kernel Tuner's default), or the divisors given

    @classmethod
    def make(cls, problem_size, grid_div_x=None, grid_div_y=None, grid_div_z=None,
             names=()) -> "GridDivisors":
        if problem_size is None:
            raise TuneError("grid_div_x/_y/_z divide a problem size: give problem_size= (an int "
                            "or a tuple of up to three, as in Kernel Tuner)")
        size = problem_size if isinstance(problem_size, (tuple, list)) else (problem_size,)
        if not 1 <= len(size) <= 3 or not all(isinstance(s, (int, str)) or hasattr(s, "__index__")
                                               for s in size):
            raise TuneError(f"problem_size={problem_size!r}: give an int or a tuple of up to three "
                            "ints (or expressions over the parameters as strings)")
        divisors = tuple(d if d is None or isinstance(d, (list, tuple)) or callable(d) else [d]
                         for d in (grid_div_x, grid_div_y, grid_div_z))
        grid = cls(tuple(s if isinstance(s, str) else int(s) for s in size), divisors)
        grid._check(names)
        return grid

    def _check(self, names) -> None:
        words = [t for d in self.divisors if isinstance(d, (list, tuple))
                 for t in d if isinstance(t, str)]
        words += [s for s in self.problem_size if isinstance(s, str)]
        for text in words:
            try:
                code = compile(text, "<grid divisor>", "eval")
            except SyntaxError as exc:
                raise TuneError(f"grid divisor {text!r} is not a Python expression: "
                                f"{exc.msg}") from None
            unknown = set(code.co_names) - set(names) - set(_EXPRESSION_NAMES)
            if unknown:
                raise TuneError(f"grid divisor or problem size {text!r} names {sorted(unknown)}, "
                                f"which are not parameters of the space ({', '.join(names)})")

    def grid(self, config: dict[str, Any]) -> tuple[int, int, int]:
        """The grid of ``config``: ``ceil(size / divisor)`` per axis."""
        size = [int(_evaluate(s, config)) for s in self.problem_size] + [1, 1]
        out = []
        for axis in range(3):
            d = _divisor(self.divisors[axis], _DEFAULT_DIVISORS[axis], config)
            out.append(int(math.ceil(float(size[axis]) / float(d))))
        return tuple(out)

    def __repr__(self) -> str:
        return f"GridDivisors(problem_size={self.problem_size!r}, divisors={list(self.divisors)!r})"


__all__ = ["GridDivisors"]
