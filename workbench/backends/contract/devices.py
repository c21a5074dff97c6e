"""Devices: how many, which is current, what each is, and which reach each
other's memory."""
from __future__ import annotations

import abc
import os

from ...errors import ArgumentValueError
from .types import DeviceProperties


class Devices(abc.ABC):
    """The devices a backend presents, the current one (per thread, as in
    CUDA), their properties and memory, and peer access between them."""

    @abc.abstractmethod
    def device_count(self) -> int: ...

    @abc.abstractmethod
    def current_device(self) -> int: ...

    @abc.abstractmethod
    def set_device(self, index: int) -> None: ...

    @abc.abstractmethod
    def device_properties(self, index: int | None = None) -> DeviceProperties: ...

    @abc.abstractmethod
    def memory_info(self) -> tuple[int, int]:
        """``(free, total)`` bytes of the current device."""

    def device_name(self, index: int | None = None) -> str:
        """The device's name as a user should read it (a simulated device
        says so)."""
        name = self.device_properties(index).name
        return f"{name} (simulated)" if self.simulated else name

    def device_attribute(self, name: str, index: int | None = None) -> int | None:
        """A CUDA device attribute by its runtime name (``"cudaDevAttrGlobalMemoryBusWidth"``),
        or ``None`` where the backend cannot tell."""
        return None

    def versions(self) -> dict[str, str]:
        """Driver, runtime, compiler and library versions, as strings."""
        return {}

    def can_access_peer(self, index: int, peer: int) -> bool | None:
        """Whether device ``index`` can read and write device ``peer``'s memory
        directly; ``None`` where the backend cannot tell."""
        return None

    def enable_peer_access(self, index: int, peer: int) -> bool:
        """Let device ``index`` address device ``peer``'s memory; False where it cannot."""
        return False

    def child_environment(self) -> dict[str, str]:
        """Environment variables that make a CUDA program started from this
        process run on the active device (``CUDA_VISIBLE_DEVICES``, in this
        process's own numbering of the devices it sees); none on the simulator."""
        if self.simulated:
            return {}
        return {"CUDA_VISIBLE_DEVICES": visible_device(self.current_device(),
                                                       os.environ.get("CUDA_VISIBLE_DEVICES"))}


def visible_device(index: int, visible: str | None) -> str:
    """``CUDA_VISIBLE_DEVICES`` for a child process that is to see only
    device ``index`` of a process whose own ``CUDA_VISIBLE_DEVICES`` is
    ``visible`` (None or empty: every device, numbered as CUDA numbers them):
    the ``index``-th entry of that list (an ordinal or a ``GPU-uuid``)."""
    entries = [e.strip() for e in (visible or "").split(",") if e.strip()]
    if not entries:
        return str(index)
    if not 0 <= index < len(entries):
        raise ArgumentValueError(f"device {index} is not among CUDA_VISIBLE_DEVICES={visible!r}")
    return entries[index]
