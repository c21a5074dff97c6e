"""Every device's static properties and capabilities.

    >>> wb.devices()          # a table: one row per GPU (the virtual H100 on the simulator)
    >>> wb.devices()[0].shared_memory_per_block_optin

Choosing the device is :func:`workbench.device` (:mod:`workbench.runtime.devices`).

A figure the driver cannot give is :data:`~workbench.present.na.NA`
(printed ``N/A``), never an exception.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..backends.contract import Backend, DeviceProperties
from ..errors import DeviceError
from ..present.na import NA, formatted_fields, or_na
from ..present.tables import html_fields, pandas
from ..present.units import format_bytes
from ..runtime.devices import device
from ..runtime.session import backend
from . import live

# capability -> (key in the CUDA runtime's device properties, cudaDevAttr name)
_CAPABILITIES = {
    "cooperative_launch": ("cooperativeLaunch", "cudaDevAttrCooperativeLaunch"),
    "managed_memory": ("managedMemory", "cudaDevAttrManagedMemory"),
    "concurrent_managed_access": ("concurrentManagedAccess", "cudaDevAttrConcurrentManagedAccess"),
    "mapped_host_memory": ("canMapHostMemory", "cudaDevAttrCanMapHostMemory"),
}


@dataclass(frozen=True)
class DeviceInfo:
    """One device, as :func:`devices` lists it. Sizes in bytes, clocks in MHz."""

    index: int
    name: str
    compute_capability: str           # "9.0"
    multiprocessors: int
    total_memory: int
    l2_cache: object
    shared_memory_per_multiprocessor: int
    shared_memory_per_block: int
    shared_memory_per_block_optin: int
    registers_per_multiprocessor: int
    registers_per_block: int
    warp_size: int
    max_threads_per_block: int
    max_threads_per_multiprocessor: int
    max_blocks_per_multiprocessor: int
    clock_mhz: object
    memory_clock_mhz: object
    memory_bus_width: object          # bits
    pcie_link: object                 # "Gen5 x16 (max Gen5 x16)"
    driver_version: object            # the display driver (NVML)
    cuda_driver_version: object       # the CUDA version the driver supports
    runtime_version: object
    nvrtc_version: object
    cooperative_launch: object
    managed_memory: object
    concurrent_managed_access: object
    mapped_host_memory: object
    peer_access: object               # indices of devices this one can access
    simulated: bool

    LABELS = {
        "index": "Index", "name": "Name", "compute_capability": "Compute capability",
        "multiprocessors": "Multiprocessors", "total_memory": "Memory", "l2_cache": "L2 cache",
        "shared_memory_per_multiprocessor": "Shared memory per SM",
        "shared_memory_per_block": "Shared memory per block",
        "shared_memory_per_block_optin": "Shared memory per block (opt-in)",
        "registers_per_multiprocessor": "Registers per SM",
        "registers_per_block": "Registers per block", "warp_size": "Warp size",
        "max_threads_per_block": "Max threads per block",
        "max_threads_per_multiprocessor": "Max threads per SM",
        "max_blocks_per_multiprocessor": "Max blocks per SM",
        "clock_mhz": "SM clock (MHz)", "memory_clock_mhz": "Memory clock (MHz)",
        "memory_bus_width": "Memory bus (bits)", "pcie_link": "PCIe link",
        "driver_version": "Driver", "cuda_driver_version": "CUDA driver",
        "runtime_version": "CUDA runtime", "nvrtc_version": "NVRTC",
        "cooperative_launch": "Cooperative launch", "managed_memory": "Managed memory",
        "concurrent_managed_access": "Concurrent managed access",
        "mapped_host_memory": "Mapped host memory", "peer_access": "Peer access to",
        "simulated": "Simulated",
    }
    _BYTES = ("total_memory", "l2_cache", "shared_memory_per_multiprocessor",
              "shared_memory_per_block", "shared_memory_per_block_optin")

    def to_dict(self) -> dict:
        """Field -> value (NA stays "N/A", peers a list), JSON-safe."""
        d = asdict(self)
        if isinstance(d["peer_access"], tuple):
            d["peer_access"] = list(d["peer_access"])
        return d

    def formatted(self) -> dict:
        """Label -> text, as tables and panels show it."""
        def text_of(key, value):
            if key in self._BYTES:
                return format_bytes(value)
            if isinstance(value, bool):
                return "yes" if value else "no"
            if key == "peer_access":
                return ", ".join(map(str, value)) if value else "none"
            return str(value)
        return formatted_fields(self, self.LABELS, text_of)

    def __repr__(self) -> str:
        width = max(map(len, self.LABELS.values()))
        return "\n".join(f"{k:<{width}}  {v}" for k, v in self.formatted().items())

    def _repr_html_(self) -> str:
        return html_fields(self.formatted().items())

    def to_pandas(self):
        """One row with every field."""
        return pandas().DataFrame([self.to_dict()])


class DeviceList(tuple):
    """The devices :func:`devices` found; a tuple of :class:`DeviceInfo`."""

    def to_pandas(self):
        """One row per device, one column per property (field names)."""
        return pandas().DataFrame([d.to_dict() for d in self]).set_index("index")

    def _columns(self) -> dict[str, dict]:
        """``{"GPU 0": {label: text}, ...}``: what the tables show."""
        return {f"GPU {d.index}": d.formatted() for d in self}

    def __repr__(self) -> str:
        if not self:
            return "No devices"
        return pandas().DataFrame(self._columns()).to_string()

    def _repr_html_(self) -> str:
        if not self:
            return "<i>No devices</i>"
        columns = self._columns()
        labels = next(iter(columns.values())).keys()
        return html_fields([(label, *(c[label] for c in columns.values())) for label in labels],
                           header=["", *columns])


def _versions(b: Backend) -> dict:
    try:
        return dict(b.versions())
    except Exception:
        return {}


def _attribute(b: Backend, index: int, attr_name: str):
    value = b.device_attribute(attr_name, index)
    return NA if value is None else value


def _capability(b: Backend, p: DeviceProperties, key: str, attr_name: str):
    value = (p.extra or {}).get(key)
    if value is None:
        value = _attribute(b, p.index, attr_name)
    return NA if value is NA else bool(value)


def _peers(b: Backend, index: int, count: int):
    others = [j for j in range(count) if j != index]
    if not others:
        return ()
    access = {j: b.can_access_peer(index, j) for j in others}
    if any(v is None for v in access.values()):
        return NA
    return tuple(j for j in others if access[j])


def _pcie_text(b: Backend, index: int):
    if b.simulated:
        return NA
    link = live.pcie_link(index)
    if link["generation"] is NA:
        return NA
    text = f"Gen{link['generation']} x{link['width']}"
    if link["max_generation"] is not NA:
        text += f" (max Gen{link['max_generation']} x{link['max_width']})"
    return text


def _mhz(khz):
    return NA if not khz else khz // 1000


def device_info(index: int, b: Backend | None = None) -> DeviceInfo:
    """The :class:`DeviceInfo` of device ``index`` of backend ``b`` (default:
    the active backend)."""
    if b is None:
        b = backend()
    p = b.device_properties(index)
    count = b.device_count()
    versions = _versions(b)
    caps = {name: _capability(b, p, key, attr) for name, (key, attr) in _CAPABILITIES.items()}
    bus = p.memory_bus_width or _attribute(b, index, "cudaDevAttrGlobalMemoryBusWidth")
    return DeviceInfo(
        index=p.index, name=p.name,
        compute_capability=f"{p.compute_capability[0]}.{p.compute_capability[1]}",
        multiprocessors=p.multiprocessors, total_memory=p.total_memory,
        l2_cache=or_na(p.l2_cache_bytes),
        shared_memory_per_multiprocessor=p.shared_memory_per_multiprocessor,
        shared_memory_per_block=p.shared_memory_per_block,
        shared_memory_per_block_optin=p.shared_memory_per_block_optin,
        registers_per_multiprocessor=p.registers_per_multiprocessor,
        registers_per_block=p.registers_per_block, warp_size=p.warp_size,
        max_threads_per_block=p.max_threads_per_block,
        max_threads_per_multiprocessor=p.max_threads_per_multiprocessor,
        max_blocks_per_multiprocessor=p.max_blocks_per_multiprocessor,
        clock_mhz=_mhz(p.clock_khz), memory_clock_mhz=_mhz(p.memory_clock_khz),
        memory_bus_width=or_na(bus or None),
        pcie_link=_pcie_text(b, index),
        driver_version=NA if b.simulated else live.driver_version(),
        cuda_driver_version=versions.get("driver", NA),
        runtime_version=versions.get("runtime", NA),
        nvrtc_version=versions.get("nvrtc", NA),
        peer_access=_peers(b, index, count),
        simulated=bool(p.simulated or b.simulated),
        **caps)


def devices() -> DeviceList:
    """Every device of the active backend with its properties and capabilities.

    On the simulator: the one virtual device (an H100's properties,
    ``simulated=True``).
    """
    b = backend()
    return DeviceList(device_info(i, b) for i in range(b.device_count()))


def use_device(index: int) -> DeviceInfo:
    """``wb.use_device(i)``, deprecated: :func:`workbench.device` makes device
    ``index`` current; this also returns its :class:`DeviceInfo`."""
    device(index)
    return device_info(index)
