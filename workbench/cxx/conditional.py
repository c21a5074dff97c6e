"""Conditional compilation: which lines of a source the compiler sees.

``#if`` expressions are evaluated by pcpp's preprocessor (C99 integer
arithmetic, ``defined``, macro expansion, function-like macros defined in the
source); this module only walks the directives, keeps the ``#if`` stack and
the macros, and blanks what the compiler will not see. A condition that
cannot be decided (an unknown function-like macro, ``__has_include``, a macro
whose definition depends on an undecided branch) keeps every branch visible.
"""
from __future__ import annotations

import functools
import re
import threading
import types
from dataclasses import dataclass
from typing import Iterable, Mapping

import pcpp

from .lexer import blank, blank_comments_and_literals

# one logical directive line: "#" first on its line, with its continuation lines
_DIRECTIVE = re.compile(r"^[ \t]*#[^\n\\]*(?:\\[\s\S][^\n\\]*)*", re.M)
_WORD = re.compile(r"[ \t]*#[ \t]*(\w*)(.*)", re.S)
_NAME = re.compile(r"[A-Za-z_]\w*")
_SEPARATED_NUMBER = re.compile(r"(?<![\w.])\.?\d(?:[eEpP][+-]|[\w.'])*")
_CONDITIONALS = {"if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif"}


@dataclass(frozen=True)
class Scan:
    """What the compiler sees of a source, as texts of the same length and
    lines as the source, with comments and literals blanked
    (:func:`~workbench.cxx.lexer.blank_comments_and_literals`).

    ``active``: the lines of inactive branches and of every directive
    blanked; what a parser of declarations reads.
    ``visible``: the lines of inactive branches and the conditional
    directives blanked; the active ``#include``, ``#define``, ``#pragma`` ...
    lines stay; what a search for constructs reads.
    ``macros``: the object-like macros defined at the end (``-D`` options
    included), name -> replacement text.
    """

    active: str
    visible: str
    macros: Mapping[str, str]


class _Evaluator(pcpp.Preprocessor):
    """pcpp's preprocessor used only to evaluate ``#if`` expressions."""

    def __init__(self):
        super().__init__()
        self.macros.pop("__PCPP__", None)
        self.define("true 1")   # C++ keywords that #if reads as 1 and 0
        self.define("false 0")
        self.errors = 0
        self._predefined = dict(self.macros)

    def reset(self) -> "_Evaluator":
        """Forget every macro defined since construction."""
        self.macros = dict(self._predefined)
        return self

    def on_error(self, file, line, msg):
        self.errors += 1

    def on_unknown_macro_function_in_expr(self, ident):
        return None  # undecidable, instead of the C rule "0"

    def truth(self, expression: str) -> bool | None:
        expression = _SEPARATED_NUMBER.sub(lambda m: m.group().replace("'", ""), expression)
        tokens = self.tokenize(expression)
        if not any(t.type not in self.t_WS for t in tokens):
            return None
        self.errors = 0
        value, partial = self.evalexpr(tokens)
        if partial is not None or self.errors:
            return None
        return bool(value)


_evaluators = threading.local()


def _thread_evaluator() -> _Evaluator:
    """This thread's evaluator: building one costs more than a scan of a cell."""
    if not hasattr(_evaluators, "evaluator"):
        _evaluators.evaluator = _Evaluator()
    return _evaluators.evaluator


class _Frame:
    """One open ``#if``: ``state`` is "on", "off" or "undecided" (every
    branch visible); ``taken``: an earlier branch was on; ``dead``: the
    enclosing text is inactive, so every branch is."""

    __slots__ = ("state", "taken", "dead")

    def __init__(self, state: str, dead: bool = False):
        self.state, self.taken, self.dead = state, state == "on", dead


class _Conditions:
    """The macros and the ``#if`` stack while walking a source."""

    def __init__(self, defines: Iterable[str] | None):
        self.evaluate = defines is not None
        self.macros: dict[str, str | None] = {}  # None: a function-like macro
        self.uncertain: set[str] = set()  # (un)defined inside an undecided branch
        self.stack: list[_Frame] = []
        self._pending: list[tuple[str, str]] = []
        self._evaluator: _Evaluator | None = None
        for d in defines or ():
            name, eq, value = d.partition("=")
            self.define(f"{name.strip()} {value.strip() if eq else '1'}")

    @property
    def visible(self) -> bool:
        return all(f.state != "off" and not f.dead for f in self.stack)

    def define(self, text: str) -> None:
        m = _NAME.match(text)
        if not m:
            return
        name, rest = m.group(), text[m.end():]
        self.macros[name] = None if rest.startswith("(") else (rest.strip() or "1")
        self._note(name, ("define", text))

    def undef(self, text: str) -> None:
        m = _NAME.match(text)
        if m:
            self.macros.pop(m.group(), None)
            self._note(m.group(), ("undef", m.group()))

    def _note(self, name: str, operation: tuple[str, str]) -> None:
        if any(f.state == "undecided" for f in self.stack):
            self.uncertain.add(name)
        self._pending.append(operation)

    def defined(self, name: str) -> bool | None:
        if not self.evaluate or name in self.uncertain:
            return None
        return name in self.macros

    def truth(self, expression: str) -> bool | None:
        if not self.evaluate or self.uncertain.intersection(_NAME.findall(expression)):
            return None
        if self._evaluator is None:
            self._evaluator = _thread_evaluator().reset()
        for operation, text in self._pending:
            getattr(self._evaluator, operation)(text)
        self._pending.clear()
        return self._evaluator.truth(expression)

    def condition(self, word: str, rest: str) -> bool | None:
        if word in ("ifdef", "ifndef", "elifdef", "elifndef"):
            m = _NAME.match(rest.strip())
            found = self.defined(m.group()) if m else None
            if found is None:
                return None
            return found if word.endswith("ifdef") else not found
        return self.truth(rest)

    def directive(self, word: str, rest: str) -> None:
        """Apply one directive (its text after the directive name)."""
        if word in ("if", "ifdef", "ifndef"):
            if not self.visible:
                self.stack.append(_Frame("off", dead=True))
                return
            cond = self.condition(word, rest)
            self.stack.append(_Frame("undecided" if cond is None else "on" if cond else "off"))
        elif word in ("elif", "elifdef", "elifndef", "else") and self.stack:
            frame = self.stack[-1]
            if frame.dead or frame.state == "undecided":
                return
            if frame.taken:
                frame.state = "off"
                return
            cond = True if word == "else" else self.condition(word, rest)
            frame.state = "undecided" if cond is None else "on" if cond else "off"
            frame.taken = cond is True
        elif word == "endif" and self.stack:
            self.stack.pop()
        elif word in ("define", "undef") and self.visible:
            getattr(self, word)(rest.strip())


def _walk(code: str, defines: Iterable[str] | None) -> Scan:
    state = _Conditions(defines)
    active: list[str] = []
    visible: list[str] = []
    last = 0
    for m in _DIRECTIVE.finditer(code):
        between = code[last:m.start()]
        shown = between if state.visible else blank(between)
        active.append(shown)
        visible.append(shown)
        line = m.group()
        word, rest = _WORD.match(line.replace("\\\n", "  ")).groups()
        was_visible = state.visible
        state.directive(word, rest)
        hidden = blank(line)
        active.append(hidden)
        visible.append(line if was_visible and word not in _CONDITIONALS else hidden)
        last = m.end()
    tail = code[last:] if state.visible else blank(code[last:])
    active.append(tail)
    visible.append(tail)
    macros = {k: v for k, v in state.macros.items() if v is not None}
    return Scan("".join(active), "".join(visible), types.MappingProxyType(macros))


def scan(source: str, defines: Iterable[str] | None = ()) -> Scan:
    """Scan ``source`` as the compiler would with ``defines`` (``-D``
    options: ``"NAME"`` or ``"NAME=VALUE"``). ``defines=None`` means they are
    not known: every condition is then undecided and every branch visible.
    Results are cached by source and defines."""
    return _scan(source, None if defines is None else tuple(defines))


@functools.lru_cache(maxsize=256)  # re-running an unchanged cell scans nothing
def _scan(source: str, defines: tuple[str, ...] | None) -> Scan:
    return _walk(blank_comments_and_literals(source), defines)
