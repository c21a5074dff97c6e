"""The virtual devices the simulator can pretend to be.

Figures are those of the real GPUs (CUDA's device attributes), so occupancy
and the panels make sense on the simulator; every one is marked
``simulated=True``.
"""
from __future__ import annotations

import dataclasses

from ...errors import ArgumentValueError
from ...present.units import format_bytes
from ..contract import DeviceProperties, Devices
from ..nvrtc import nvrtc_available, nvrtc_version
from . import build, host_memory

KIB, GIB = 1024, 1024 ** 3

_DEVICES = {
    "H100": dict(name="NVIDIA H100 80GB HBM3", compute_capability=(9, 0), multiprocessors=132,
                 total_memory=80 * GIB, shared_memory_per_block_optin=227 * KIB,
                 shared_memory_per_multiprocessor=228 * KIB, max_threads_per_multiprocessor=2048,
                 max_blocks_per_multiprocessor=32, l2_cache_bytes=50 * 1024 * 1024,
                 clock_khz=1980000, memory_clock_khz=2619000, memory_bus_width=5120),
    "H200": dict(name="NVIDIA H200", compute_capability=(9, 0), multiprocessors=132,
                 total_memory=141 * GIB, shared_memory_per_block_optin=227 * KIB,
                 shared_memory_per_multiprocessor=228 * KIB, max_threads_per_multiprocessor=2048,
                 max_blocks_per_multiprocessor=32, l2_cache_bytes=60 * 1024 * 1024,
                 clock_khz=1980000, memory_clock_khz=3201000, memory_bus_width=6144),
    "A100": dict(name="NVIDIA A100-SXM4-80GB", compute_capability=(8, 0), multiprocessors=108,
                 total_memory=80 * GIB, shared_memory_per_block_optin=163 * KIB,
                 shared_memory_per_multiprocessor=164 * KIB, max_threads_per_multiprocessor=2048,
                 max_blocks_per_multiprocessor=32, l2_cache_bytes=40 * 1024 * 1024,
                 clock_khz=1410000, memory_clock_khz=1593000, memory_bus_width=5120),
    "L4": dict(name="NVIDIA L4", compute_capability=(8, 9), multiprocessors=58,
               total_memory=24 * GIB, shared_memory_per_block_optin=99 * KIB,
               shared_memory_per_multiprocessor=100 * KIB, max_threads_per_multiprocessor=1536,
               max_blocks_per_multiprocessor=24, l2_cache_bytes=48 * 1024 * 1024,
               clock_khz=2040000, memory_clock_khz=6251000, memory_bus_width=192),
    "RTX 4090": dict(name="NVIDIA GeForce RTX 4090", compute_capability=(8, 9), multiprocessors=128,
                     total_memory=24 * GIB, shared_memory_per_block_optin=99 * KIB,
                     shared_memory_per_multiprocessor=100 * KIB, max_threads_per_multiprocessor=1536,
                     max_blocks_per_multiprocessor=24, l2_cache_bytes=72 * 1024 * 1024,
                     clock_khz=2520000, memory_clock_khz=10501000, memory_bus_width=384),
    "T4": dict(name="Tesla T4", compute_capability=(7, 5), multiprocessors=40,
               total_memory=15 * GIB, shared_memory_per_block_optin=64 * KIB,
               shared_memory_per_multiprocessor=64 * KIB, max_threads_per_multiprocessor=1024,
               max_blocks_per_multiprocessor=16, l2_cache_bytes=4 * 1024 * 1024,
               clock_khz=1590000, memory_clock_khz=5001000, memory_bus_width=256),
}
DEFAULT_DEVICE = "H100"


def virtual_device(device=None, memory_bytes: int | None = None) -> DeviceProperties:
    """Properties of the simulated device: a model name (H100, H200, A100, L4,
    RTX 4090, T4), a :class:`DeviceProperties`, or a dict of overrides of the
    default."""
    if isinstance(device, DeviceProperties):
        props = dataclasses.replace(device, simulated=True)
    else:
        overrides = {}
        key = DEFAULT_DEVICE
        if isinstance(device, dict):
            overrides = dict(device)
        elif device is not None:
            key = _lookup(str(device))
        fields = dict(_DEVICES[key])
        fields.update(overrides)
        props = DeviceProperties(index=0, **fields, simulated=True)
        props.extra = {"simulated": True, "model": key, **props.extra}
    if memory_bytes is not None:
        if int(memory_bytes) < 1 << 20:
            raise ArgumentValueError(
                f"memory_bytes={memory_bytes} is too small; give at least 1 MiB")
        props = dataclasses.replace(props, total_memory=int(memory_bytes))
    return props


def simulated_device(device=None, memory_bytes: int | None = None) -> DeviceProperties:
    """:func:`virtual_device`, its memory at most the host's available
    memory unless ``memory_bytes`` sets it (see :mod:`.host_memory`); a capped
    device says so in ``extra["memory_note"]``."""
    props = virtual_device(device, memory_bytes)
    cap = host_memory.device_cap() if memory_bytes is None else None
    if cap is not None and cap < props.total_memory:
        note = (f"at most the host's available memory: {format_bytes(cap)} of the "
                f"{format_bytes(props.total_memory)} of a real {props.name}")
        props = dataclasses.replace(props, total_memory=cap,
                                    extra={**props.extra, "memory_note": note})
    return props


def _lookup(name: str) -> str:
    norm = name.upper().replace("NVIDIA", "").replace("GEFORCE", "").replace("-", " ").strip()
    for key in _DEVICES:
        if norm == key or norm.startswith(key):
            return key
    raise ArgumentValueError(
        f"unknown simulated device {name!r}; choose one of {', '.join(_DEVICES)} "
        "or pass a dict of DeviceProperties fields")


class SimulatorDevices(Devices):
    """The devices part of :class:`~.backend.SimulatorBackend`: ``devices``
    virtual devices, alike but for their index, the current one per thread."""

    def device_count(self) -> int:
        return self.devices

    def current_device(self) -> int:
        return getattr(self._device_local, "index", 0)

    def set_device(self, index: int) -> None:
        if not 0 <= int(index) < self.devices:
            raise ArgumentValueError(
                f"the simulator has {self.devices} device{'s' if self.devices != 1 else ''}"
                f" (index 0 to {self.devices - 1}), not {index}; more: "
                f"wb.backend('simulator', devices=N) or WORKBENCH_SIM_DEVICES=N")
        self._device_local.index = int(index)

    def device_properties(self, index: int | None = None) -> DeviceProperties:
        i = self.current_device() if index is None else index
        if not 0 <= int(i) < self.devices:
            raise ArgumentValueError(
                f"the simulator has {self.devices} device{'s' if self.devices != 1 else ''}"
                f" (index 0 to {self.devices - 1}), not {index}")
        if i == 0:
            return self._properties
        return dataclasses.replace(self._properties, index=int(i))

    def can_access_peer(self, index: int, peer: int) -> bool | None:
        return index != peer and 0 <= index < self.devices and 0 <= peer < self.devices

    def enable_peer_access(self, index: int, peer: int) -> bool:
        return bool(self.can_access_peer(index, peer))

    def memory_info(self) -> tuple[int, int]:
        """``(free, total)`` as cudaMemGetInfo gives them: what the pool has
        reserved (in use and cached) is not free, as on a GPU."""
        total = self._properties.total_memory
        reserved = self._arena.reserved_bytes() if self._arena is not None else 0
        return max(0, total - reserved), total

    def versions(self) -> dict[str, str]:
        out = {"simulator": build.SIMULATOR_VERSION, "g++": build.compiler_version() or "missing"}
        if nvrtc_available():
            version = nvrtc_version()
            if version:
                out["nvrtc"] = str(version)
        return out
