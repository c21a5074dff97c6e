"""The workbench's core: kernel signatures, compile, checked launches, device
arrays, streams, copies and graphs.

One layer with :mod:`workbench.memory`, :mod:`workbench.hardware` and
:mod:`workbench.runtime`, below benchmarking; it imports no IPython,
ipywidgets or matplotlib (see docs/architecture.md).
"""
