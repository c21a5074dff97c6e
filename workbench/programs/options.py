"""Compiler and linker options of a program, as nvcc takes them.

Options come as one shell-like string (``"-O3 -lcurand -Xcompiler -fopenmp"``,
split with :func:`shlex.split`) or as a list of arguments (taken as they
are). :func:`parse_options` sorts them into what each build needs: nvcc gets
them all (with the device's architecture added when none is given); the
simulator's g++ gets the host-side ones (``-D``, ``-I``, ``-O``, ``-std``,
``-l``, ``-L``, ``-Xcompiler`` ...) and leaves out what only concerns GPU code.
"""
from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field
from typing import Sequence

from ..cxx.defines import normalise_defines
from ..errors import WorkbenchError

#: nvcc options that take a value as the next argument (when not given as ``-x=value``).
_WITH_VALUE = {
    "-D", "-U", "-I", "-L", "-l", "-o", "-x", "-arch", "-code", "-gencode", "-std", "-Xcompiler",
    "-Xlinker", "-Xptxas", "-Xnvlink", "-ccbin", "-maxrregcount", "-include", "-isystem",
    "--define-macro", "--undefine-macro", "--include-path", "--library-path", "--library",
    "--output-file", "--gpu-architecture", "--gpu-code", "--generate-code", "--std",
    "--compiler-options", "--linker-options", "--ptxas-options", "--compiler-bindir",
    "--maxrregcount", "--pre-include", "--system-include", "-rdc", "--relocatable-device-code",
    "-t", "--threads",
}
_LONG_NAMES = {"--define-macro": "-D", "--undefine-macro": "-U", "--include-path": "-I",
               "--library-path": "-L", "--library": "-l", "--output-file": "-o",
               "--gpu-architecture": "-arch", "--gpu-code": "-code", "--generate-code": "-gencode",
               "--std": "-std", "--compiler-options": "-Xcompiler", "--linker-options": "-Xlinker",
               "--ptxas-options": "-Xptxas", "--compiler-bindir": "-ccbin",
               "--maxrregcount": "-maxrregcount", "--pre-include": "-include",
               "--system-include": "-isystem", "--relocatable-device-code": "-rdc",
               "--threads": "-t", "--use_fast_math": "-use_fast_math", "--debug": "-g",
               "--device-debug": "-G", "--generate-line-info": "-lineinfo", "--optimize": "-O"}
#: Options with their value glued on (``-DN=4``, ``-I/path``, ``-lcurand``, ``-O3``).
_GLUED = ("-D", "-U", "-I", "-L", "-l", "-O")
_ARCH = {"-arch", "-code", "-gencode"}
#: nvcc options that concern only GPU code (the simulator's g++ leaves them out).
_GPU_ONLY = {"-arch", "-code", "-gencode", "-Xptxas", "-Xnvlink", "-maxrregcount", "-rdc", "-G",
             "-lineinfo", "-use_fast_math", "-t", "-ccbin", "--expt-relaxed-constexpr",
             "--expt-extended-lambda", "--extended-lambda", "-extended-lambda",
             "-expt-relaxed-constexpr", "-dc", "-dlto", "-res-usage", "--resource-usage",
             "-src-in-ptx", "-keep", "-Wno-deprecated-gpu-targets", "--ftz", "--prec-div",
             "--prec-sqrt", "--fmad", "-ftz", "-prec-div", "-prec-sqrt", "-fmad", "-cudart",
             "--cudart", "-x"}


class ProgramOptionError(WorkbenchError, ValueError):
    """What a program build cannot take: an option without its value, ``-o``, a
    stored file that does not exist, an unknown backend."""


@dataclass(frozen=True)
class ProgramOptions:
    """The options, each as ``(option, value)`` in nvcc's short spelling
    (``value`` None for a flag)."""

    items: tuple[tuple[str, str | None], ...] = ()
    written: tuple[str, ...] = field(default=(), compare=False)

    @property
    def arch_given(self) -> bool:
        """True when the options choose the GPU architecture themselves."""
        return any(o in _ARCH for o, _ in self.items)

    @property
    def std(self) -> str | None:
        found = [v for o, v in self.items if o == "-std"]
        return found[-1] if found else None

    @property
    def defines(self) -> tuple[str, ...]:
        return tuple(v for o, v in self.items if o == "-D" and v)

    @property
    def libraries(self) -> tuple[str, ...]:
        return tuple(v for o, v in self.items if o == "-l" and v)

    def nvcc_args(self) -> list[str]:
        """The options for nvcc's command line."""
        out: list[str] = []
        for option, value in self.items:
            if value is None:
                out.append(option)
            elif option in _GLUED:
                out.append(option + value)
            elif option in ("-std", "-arch", "-code", "-rdc", "-maxrregcount"):
                out.append(f"{option}={value}")
            else:
                out += [option, value]
        return out

    def gxx_args(self) -> tuple[list[str], list[str]]:
        """``(compile flags, link flags)`` for the simulator's g++: host-side
        options only; ``-D`` and ``-std`` are passed apart (see :attr:`defines`)."""
        compile_flags: list[str] = []
        link_flags: list[str] = []
        for option, value in self.items:
            if option in _GPU_ONLY or option in ("-D", "-std"):
                continue
            if option == "-Xcompiler":
                pieces = _host_pieces(option, value)
                compile_flags += pieces
                link_flags += [v for v in pieces if v in ("-fopenmp", "-pthread")]
            elif option == "-Xlinker":
                link_flags += [f"-Wl,{v}" for v in _host_pieces(option, value)]
            elif option in ("-l", "-L"):
                link_flags.append(option + (value or ""))
            elif option in ("-U", "-I", "-O"):
                compile_flags.append(option + (value or ""))
            elif value is None:
                compile_flags.append(option)
            else:
                compile_flags += [option, value]
        return compile_flags, link_flags


def known_long_option(name: str) -> bool:
    """Whether ``--name`` is an nvcc long option the workbench knows."""
    return name in _LONG_NAMES or name in _LONG_NAMES.values()


def _host_pieces(option: str, value: str | None) -> list[str]:
    """The host compiler's (or linker's) arguments in an ``-Xcompiler`` /
    ``-Xlinker`` value: split at commas as nvcc does, then each piece as a
    shell would (``-Xcompiler "-Wall -Wextra"``)."""
    out: list[str] = []
    for piece in (value or "").split(","):
        try:
            out += shlex.split(piece)
        except ValueError as exc:  # an unclosed quote
            raise ProgramOptionError(f"cannot split {option} {value!r}: {exc}") from None
    return out


def parse_options(options: str | Sequence[str] | None) -> ProgramOptions:
    """Parse nvcc options given as a shell-like string or a list of arguments.

    ``-O3``, ``-lcurand``, ``-DN=4``, ``-I dir``, ``-std=c++20``,
    ``-Xcompiler -fopenmp``, ``--gpu-architecture sm_90``, ``-gencode
    arch=compute_90,code=sm_90`` ... are understood; ``-o`` is refused (the
    workbench names the executable)."""
    if options is None:
        tokens: list[str] = []
    elif isinstance(options, str):
        try:
            tokens = shlex.split(options)
        except ValueError as exc:  # an unclosed quote
            raise ProgramOptionError(f"cannot split the options {options!r}: {exc}") from None
    else:
        tokens = [str(t) for t in options]
    items: list[tuple[str, str | None]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        name, eq, value = tok.partition("=")
        if tok.startswith("--") and name in _LONG_NAMES:
            name = _LONG_NAMES[name]
        elif tok.startswith("--"):
            name = tok if not eq else name
        if eq and (name in _WITH_VALUE or name in _LONG_NAMES.values()):
            items.append((name, value))
            continue
        if not eq and name in _WITH_VALUE:
            if i >= len(tokens):
                raise ProgramOptionError(f"the option {tok} needs a value (for example {tok} "
                                         f"{_EXAMPLES.get(name, 'VALUE')})")
            items.append((name, tokens[i]))
            i += 1
            continue
        if tok.startswith("--"):
            items.append((tok if eq else name, None))  # a flag (--use_fast_math -> -use_fast_math)
            continue
        glued = next((g for g in _GLUED if tok.startswith(g) and len(tok) > len(g)), None)
        if glued is not None and tok not in _GPU_ONLY:  # -lineinfo is not -l ineinfo
            items.append((glued, tok[len(glued):]))
            continue
        items.append((tok, None))
    for option, _ in items:
        if option == "-o":
            raise ProgramOptionError("leave out -o: the workbench names the executable (and caches it)")
        if not option.startswith("-"):
            raise ProgramOptionError(
                f"{option!r} is not an option; source files are given with files=[...] (or stored "
                "with %%cuda_program --name FILE), program arguments with args=[...]")
    return ProgramOptions(tuple(items), tuple(tokens))


_EXAMPLES = {"-D": "NAME=1", "-I": "include", "-L": "/usr/local/lib", "-l": "curand",
             "-arch": "sm_90", "-gencode": "arch=compute_90,code=sm_90", "-std": "c++17",
             "-Xcompiler": "-fopenmp", "-Xlinker": "-rpath,/opt/lib"}


def with_defines(opts: ProgramOptions, defines) -> ProgramOptions:
    """``opts`` with ``-D`` options for ``defines`` (a dict or a list, as
    :func:`workbench.compile` takes them) after its own."""
    extra = normalise_defines(defines, what="defines")
    if not extra:
        return opts
    return dataclasses.replace(opts, items=opts.items + tuple(("-D", d) for d in extra),
                               written=opts.written + tuple(f"-D{d}" for d in extra))
