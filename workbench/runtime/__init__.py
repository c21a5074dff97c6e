"""The process's state: the active backend, the compiled modules, the cell
being run and the launch timing log. Above the backends, below everything
that reaches a device (hardware, memory, core, benchmarking)."""
