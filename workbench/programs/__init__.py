"""Whole CUDA C++ programs (with ``main()``): built with nvcc for the GPU or
with g++ against the CPU simulator's CUDA runtime, run as a subprocess with
their output streamed (see ``docs/programs.md``).

``wb.program(source, options=..., args=...)`` builds and runs one and returns
a :class:`ProgramRun`; ``wb.programs.build_program`` only builds; :func:`add_file`
stores a header or source file for later builds (``%%cuda_program --name``).
"""
from .options import ProgramOptionError, ProgramOptions, parse_options
from .program import DEFAULT_TIMEOUT_S, add_file, build_program, files, program, remove_file
from .result import ProgramBuild, ProgramRun
from .toolkit import ToolkitCheck, check_toolkit, find_nvcc

__all__ = ["DEFAULT_TIMEOUT_S", "ProgramBuild", "ProgramOptionError", "ProgramOptions", "ProgramRun",
           "ToolkitCheck", "add_file", "build_program", "check_toolkit", "files", "find_nvcc",
           "parse_options", "program", "remove_file"]
