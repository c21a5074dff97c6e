"""The workbench's core: kernel signatures, compile, checked launches, device
arrays and the seed API's aliases.

Above the runtime, hardware and memory layers, below benchmarking; it imports
no IPython, ipywidgets or matplotlib (see docs/architecture.md).
"""
