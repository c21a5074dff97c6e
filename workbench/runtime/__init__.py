"""The process's state: the active backend (:mod:`.session`), the current
device (:mod:`.devices`), the compiled modules, the cell being run and the
launch timing log (:mod:`.timing`, its records :mod:`.records`). Part of the
core layer, above the backends."""
