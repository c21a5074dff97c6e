"""Benchmarks: accurate kernel timings, sweeps, rates against measured
ceilings, plots and reports.

The public functions are reached through the top-level package::

    import workbench as wb
    r = wb.bench(kernel, x, y, n, grid=..., block=...)
    table = wb.sweep(fn, sizes=[2**k for k in range(10, 24)], setup=...)

Modules: :mod:`.engine` (the measuring shared by ``bench``, ``compare``
and ``sweep``), :mod:`.timer` (``bench``, ``BenchResult``), :mod:`.sweep`,
:mod:`.compare`, :mod:`.points` (one sweep point), :mod:`.ceilings` (and
:mod:`.ceiling_figures`, the record), :mod:`.report`, :mod:`.plots`
(matplotlib, imported only when a plot is drawn), :mod:`.result` and
:mod:`.checks` (results and their checks) and :mod:`.history` (the
session's results).
"""
