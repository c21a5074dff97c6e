"""The search space of a tune: parameters, their kinds, and restrictions.

A parameter is one of three kinds, told apart by its name:

* ``block`` (and ``block_x``/``block_y``/``block_z``): the launch's block
  size, no recompilation; Kernel Tuner's ``block_size_x``/``_y``/``_z``:
  the block size, and defines as well (its kernels read them as macros);
* a template parameter name of the kernel (``template <int TILE> ...``):
  the kernel is instantiated with the value (``kern<16>``);
* any other name: a preprocessor define, compiled with ``-D NAME=value``.

Restrictions are callables taking the configuration as keywords (or one
dict) and returning a truth value, or Python expressions over the
parameter names (``"TILE * TILE <= block"``), evaluated with no builtins but
a few pure functions (min, max, abs, ...).
"""
from __future__ import annotations

import inspect
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..errors import ArgumentTypeError, TuneError

LAUNCH_NAMES = ("block", "block_x", "block_y", "block_z", "block_size_x", "block_size_y",
                "block_size_z")

#: What a string restriction may call: pure helpers, nothing that reaches outside.
_EXPRESSION_NAMES = {"min": min, "max": max, "abs": abs, "round": round, "int": int,
                     "float": float, "log2": math.log2, "sqrt": math.sqrt, "len": len,
                     "True": True, "False": False}


def _as_values(name: str, values) -> list:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TuneError(f"space[{name!r}] must be a list of values, got {values!r}")
    out = list(values)
    if not out:
        raise TuneError(f"space[{name!r}] is empty; give at least one value")
    if len(set(map(repr, out))) != len(out):
        raise TuneError(f"space[{name!r}] lists a value twice: {out!r}")
    return out


class Restriction:
    """One restriction: ``ok(config) -> bool``; ``text`` says what it is."""

    def __init__(self, rule, names: Sequence[str]):
        if isinstance(rule, str):
            self.text = rule
            try:
                code = compile(rule, "<restriction>", "eval")
            except SyntaxError as exc:
                raise TuneError(f"restriction {rule!r} is not a Python expression: "
                                f"{exc.msg}") from None
            unknown = set(code.co_names) - set(names) - set(_EXPRESSION_NAMES)
            if unknown:
                raise TuneError(f"restriction {rule!r} names {sorted(unknown)}, which are "
                                f"not parameters of the space ({', '.join(names)})")
            self._fn = lambda config: eval(code, {"__builtins__": {}, **_EXPRESSION_NAMES},
                                           dict(config))
        elif callable(rule):
            self.text = getattr(rule, "__name__", "restriction")
            self._fn = _keyword_caller(rule, names)
        else:
            raise ArgumentTypeError(f"a restriction is a callable or an expression string, "
                                    f"got {type(rule).__name__}")

    def ok(self, config: Mapping[str, Any]) -> bool:
        return bool(self._fn(config))

    def __repr__(self) -> str:
        return f"Restriction({self.text!r})"


def _keyword_caller(fn: Callable, names: Sequence[str]) -> Callable[[Mapping], Any]:
    """``fn(**config)`` when ``fn`` takes the parameters as keywords (or
    ``**kwargs``), else ``fn(config)``."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return lambda config: fn(config)
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return lambda config: fn(**config)
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if len(named) == 1 and not named <= set(names):
        return lambda config: fn(config)
    return lambda config: fn(**{k: v for k, v in config.items() if k in named})


@dataclass
class Space:
    """Parameters (name -> values, in the order given), their kinds and the
    restrictions between them."""

    params: dict[str, list]
    template_names: tuple[str, ...] = ()
    restrictions: list[Restriction] = field(default_factory=list)

    @classmethod
    def make(cls, space: Mapping[str, Sequence], restrictions=(), template_names=()) -> "Space":
        example = "for example {'block': [64, 128, 256], 'TILE': [8, 16, 32]}"
        if not isinstance(space, Mapping):
            raise TuneError(f"space= takes a dict {{parameter: [values, ...]}}, got "
                            f"{type(space).__name__}; {example}")
        if not space:
            raise TuneError(f"space= is empty: give at least one parameter and its values, "
                            f"{example}")
        params = {str(k): _as_values(str(k), v) for k, v in space.items()}
        if callable(restrictions) or isinstance(restrictions, str):
            restrictions = [restrictions]
        names = list(params)
        return cls(params, tuple(t for t in template_names),
                   [Restriction(r, names) for r in restrictions or ()])

    @property
    def names(self) -> list[str]:
        return list(self.params)

    def kind(self, name: str) -> str:
        """"launch", "template" or "define"."""
        if name in LAUNCH_NAMES:
            return "launch"
        if name in self.template_names:
            return "template"
        return "define"

    @property
    def size(self) -> int:
        """Configurations before restrictions."""
        return math.prod(len(v) for v in self.params.values())

    def allowed(self, config: Mapping[str, Any]) -> tuple[bool, str]:
        """Whether ``config`` passes every restriction; else the one it fails.
        A restriction that raises counts as failed, with its error."""
        for r in self.restrictions:
            try:
                if not r.ok(config):
                    return False, f"restricted: {r.text}"
            except Exception as exc:  # noqa: BLE001 - a rule that cannot judge excludes
                return False, f"restriction {r.text} raised {type(exc).__name__}: {exc}"
        return True, ""

    def configurations(self) -> list[dict[str, Any]]:
        """Every configuration that passes the restrictions, in grid order
        (the first value of each parameter first)."""
        names = self.names
        out = []
        for combo in itertools.product(*self.params.values()):
            config = dict(zip(names, combo))
            if self.allowed(config)[0]:
                out.append(config)
        return out

    def default(self) -> dict[str, Any]:
        """The first allowed configuration in grid order."""
        for config in self.configurations():
            return config
        raise TuneError("the restrictions exclude every configuration of the space; "
                        "loosen them or add values")

    def key(self, config: Mapping[str, Any]) -> tuple:
        return tuple(repr(config[n]) for n in self.names)

    def describe(self) -> str:
        return ", ".join(f"{n} ({self.kind(n)}): {len(v)}" for n, v in self.params.items())
