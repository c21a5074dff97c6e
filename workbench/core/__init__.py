"""The workbench's core: compile, kernels, launch, timing and the seed API.

It uses a backend (:mod:`workbench.backends`) and imports no IPython,
ipywidgets or matplotlib; the notebook layer (:mod:`workbench.ipython`,
:mod:`workbench.widgets`) sits on top of it.
"""
