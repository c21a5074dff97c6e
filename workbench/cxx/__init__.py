"""The one C/C++ source scanner of the workbench, below the backends.

:mod:`~workbench.cxx.lexer` blanks comments and literals with every offset
kept; :mod:`~workbench.cxx.conditional` blanks what ``#if`` branches leave
out and collects the macros; :mod:`~workbench.cxx.structure` knows brackets,
blocks and file scope; :mod:`~workbench.cxx.globals` finds the module
variables (``__constant__`` / ``__device__``). The core's signature parser and the simulator's
source rewriter both read kernel source through this package, so they see
the same code.
"""
from .conditional import Scan, scan
from .globals import GlobalVariable, find_globals
from .lexer import blank_comments_and_literals, line_col
from .structure import Block, at_file_scope, blocks, matching, split_top_level

__all__ = ["Block", "GlobalVariable", "Scan", "find_globals", "at_file_scope", "blank_comments_and_literals", "blocks", "line_col",
           "matching", "scan", "split_top_level"]
