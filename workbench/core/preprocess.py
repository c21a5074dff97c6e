"""Conditional compilation for the signature scanner: blank the lines of
``#if``/``#ifdef`` branches that the compiler will not see.

Kernels are often written twice under ``#ifdef USE_DOUBLE ... #else ...``
and chosen with ``-D``; the scanner must see the branch that is compiled.
This is not a C preprocessor: it knows ``#define``/``#undef`` of plain names,
``#ifdef``, ``#ifndef``, ``#if``/``#elif`` over integer literals, names,
``defined(NAME)`` and the operators ``! && || == != < <= > >= + - * /``.
A condition it cannot evaluate keeps every branch visible, as before.
"""
from __future__ import annotations

import re

_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*)$")
_TOKEN = re.compile(r"\s*(defined|0[xX][0-9a-fA-F]+|\d+|[A-Za-z_]\w*|&&|\|\||==|!=|<=|>=|[!()<>+\-*/])")
_PY = {"&&": " and ", "||": " or ", "!": " not "}


def _int(text: str) -> int | None:
    text = text.strip().rstrip("uUlL")
    try:
        return int(text, 0)
    except ValueError:
        return None


def evaluate(expression: str, macros: dict[str, str]) -> bool | None:
    """The truth of an ``#if`` condition, or None when it cannot be decided."""
    tokens, pos, expr = [], 0, expression.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            return None
        tokens.append(m.group(1))
        pos = m.end()
    out, i = [], 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "defined":
            name = tokens[i + 2] if i + 1 < len(tokens) and tokens[i + 1] == "(" else (
                tokens[i + 1] if i + 1 < len(tokens) else None)
            if name is None:
                return None
            out.append("1" if name in macros else "0")
            i += 4 if tokens[i + 1] == "(" else 2
            continue
        if re.match(r"[A-Za-z_]", tok):
            value = _int(macros[tok]) if tok in macros else 0  # undefined names are 0
            if value is None:
                return None
            out.append(str(value))
        elif tok[0].isdigit():
            out.append(str(_int(tok)))
        else:
            out.append(_PY.get(tok, tok).replace("/", "//"))
        i += 1
    text = " ".join(out)
    if re.search(r"\d\s*\(", text):  # a function-like macro: not ours to expand
        return None
    try:
        return bool(eval(text, {"__builtins__": {}}, {}))  # noqa: S307 -- digits and operators only
    except Exception:
        return None


def active_text(text: str, defines=()) -> tuple[str, dict[str, str]]:
    """``text`` with the lines of inactive branches and of every directive
    blanked (newlines kept), and the object-like macros defined at the end.

    ``defines`` are ``-D`` options: ``"NAME"`` or ``"NAME=VALUE"``.
    """
    macros: dict[str, str] = {}
    for d in defines:
        name, _, value = d.partition("=")
        macros[name.strip()] = value.strip() if value else "1"
    # each open #if: [this branch visible?, some branch already taken?, decided?]
    stack: list[list] = []
    lines = text.split("\n")
    for k, line in enumerate(lines):
        m = _DIRECTIVE.match(line)
        visible = all(frame[0] for frame in stack)
        if m:
            word, rest = m.group(1), m.group(2).strip()
            if word in ("if", "ifdef", "ifndef"):
                name = rest.split()[0] if rest.split() else ""
                cond = (name in macros if word == "ifdef" else
                        name not in macros if word == "ifndef" else evaluate(rest, macros))
                stack.append([True, False, False] if cond is None else [cond, cond, True])
            elif word == "elif" and stack:
                frame = stack[-1]
                if frame[2]:
                    cond = evaluate(rest, macros)
                    if cond is None:
                        frame[:] = [True, True, False]
                    else:
                        frame[0] = cond and not frame[1]
                        frame[1] = frame[1] or cond
            elif word == "else" and stack:
                frame = stack[-1]
                if frame[2]:
                    frame[0] = not frame[1]
            elif word == "endif" and stack:
                stack.pop()
            elif visible and word == "define":
                parts = rest.split(None, 1)
                if parts and "(" not in parts[0]:
                    macros[parts[0]] = parts[1] if len(parts) > 1 else "1"
            elif visible and word == "undef":
                macros.pop(rest.split()[0] if rest else "", None)
            lines[k] = " " * len(line)
            continue
        if not visible:
            lines[k] = " " * len(line)
    return "\n".join(lines), macros
