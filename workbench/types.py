"""The classes of what the workbench's functions return, for ``isinstance``
checks and annotations; nobody makes them directly.

- :class:`Module`: what ``wb.compile`` (and a ``%%cuda`` cell) returns;
- :class:`Graph`: what ``wb.graph()`` captures;
- :class:`Timeline`: what ``wb.timeline()`` draws;
- :class:`BenchResult`: what ``wb.bench`` returns;
- :class:`Diagnostic`: one compiler message (``CompileError.diagnostics``,
  ``Module.warnings``).

``wb.Kernel``, ``wb.Stream`` and ``wb.Event`` stay at the top level; the
capabilities' own result classes live in their namespaces
(``wb.tuning.TuneResult``, ``wb.profiling.NcuReport``, ``wb.rings.Ring``).
"""
from __future__ import annotations

from .benchmarking.result import BenchResult
from .benchmarking.timeline import Timeline
from .core.compiler import Module
from .core.graphs import Graph
from .diagnostics import Diagnostic

__all__ = ["BenchResult", "Diagnostic", "Graph", "Module", "Timeline"]
