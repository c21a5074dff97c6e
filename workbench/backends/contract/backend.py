"""``Backend``: the one class both backends are, made of the interfaces of
this package, with what says which backend it is."""
from __future__ import annotations

from .activity import Activity
from .devices import Devices
from .instrumentation import Instrumentation
from .kernels import Kernels
from .memory import Arrays, MemoryKinds, MemoryPool
from .persistent import PersistentKernels
from .streams import Events, Graphs, Streams


class Backend(Devices, Kernels, Arrays, MemoryPool, MemoryKinds, Streams, Events, Graphs,
              PersistentKernels, Activity, Instrumentation):
    """One device and the operations the workbench needs on it: every
    interface of :mod:`workbench.backends.contract` (docs/backends.md)."""

    #: Short identifier: "cupy" or "simulator".
    name: str = "?"

    #: True when kernels run on the CPU and times are simulated.
    simulated: bool = False

    #: Why this backend was chosen (set by the session).
    reason: str = ""

    def configure(self, **options) -> bool:
        """Change ``options`` (those of the constructor) on this instance,
        keeping its arrays, modules and kernels; False where one of them
        cannot change in place (the session then makes a new instance)."""
        return not options

    def describe(self) -> str:
        """One line saying what this backend runs on."""
        return self.name

    def __repr__(self) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"<workbench backend {self.name}: {self.describe()}{why}>"
