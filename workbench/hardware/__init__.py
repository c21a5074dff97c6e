"""Devices, live statistics, kernel inspection and occupancy (no Jupyter here).

* :mod:`.properties`: ``devices()`` (choosing one: :mod:`workbench.runtime.devices`)
* :mod:`.live`: NVML statistics and the background :class:`~.live.LiveMonitor`
* :mod:`.occupancy` (rules in :mod:`.occupancy_rules`): ``occupancy(kernel, ...)``
* :mod:`.inspect`: ``inspect_kernel(kernel)``
"""
