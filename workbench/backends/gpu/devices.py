"""The GPU backend's devices (:class:`CupyDevices`): count, current device,
properties (read once per device), memory, versions and peer access, from
the CUDA runtime through CuPy."""
from __future__ import annotations

import cupy
from cupy.cuda import runtime

from ..contract import DeviceProperties, Devices


class CupyDevices(Devices):
    """The devices part of :class:`~.backend.CupyBackend` (its
    ``_properties`` cache is made by the backend's constructor)."""

    def device_count(self) -> int:
        return runtime.getDeviceCount()

    def current_device(self) -> int:
        return runtime.getDevice()

    def set_device(self, index: int) -> None:
        cupy.cuda.Device(index).use()

    def device_properties(self, index: int | None = None) -> DeviceProperties:
        i = self.current_device() if index is None else index
        props = self._properties.get(i)
        if props is None:  # static for the life of the process: read once
            props = self._properties[i] = self._read_properties(i)
        return props

    def _read_properties(self, i: int) -> DeviceProperties:
        p = runtime.getDeviceProperties(i)

        def attr(name, default=None):
            code = getattr(runtime, name, None)
            if code is None:
                return default
            try:
                return runtime.deviceGetAttribute(code, i)
            except Exception:
                return default

        name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
        return DeviceProperties(
            index=i, name=name,
            compute_capability=(p["major"], p["minor"]),
            multiprocessors=p["multiProcessorCount"],
            total_memory=p["totalGlobalMem"],
            warp_size=p["warpSize"],
            max_threads_per_block=p["maxThreadsPerBlock"],
            max_block_dims=tuple(p["maxThreadsDim"]),
            max_grid_dims=tuple(p["maxGridSize"]),
            shared_memory_per_block=p["sharedMemPerBlock"],
            shared_memory_per_block_optin=p.get("sharedMemPerBlockOptin", p["sharedMemPerBlock"]),
            shared_memory_per_multiprocessor=p.get("sharedMemPerMultiprocessor", 0),
            registers_per_block=p["regsPerBlock"],
            registers_per_multiprocessor=p.get("regsPerMultiprocessor", p["regsPerBlock"]),
            max_threads_per_multiprocessor=p.get("maxThreadsPerMultiProcessor", 2048),
            max_blocks_per_multiprocessor=p.get("maxBlocksPerMultiProcessor", 32),
            l2_cache_bytes=p.get("l2CacheSize"),
            clock_khz=p.get("clockRate") or attr("cudaDevAttrClockRate"),
            memory_clock_khz=p.get("memoryClockRate") or attr("cudaDevAttrMemoryClockRate"),
            memory_bus_width=p.get("memoryBusWidth") or attr("cudaDevAttrGlobalMemoryBusWidth"),
            simulated=False,
            extra={k: (v.decode(errors="replace") if isinstance(v, bytes) else v)
                   for k, v in p.items()},
        )

    def memory_info(self) -> tuple[int, int]:
        return runtime.memGetInfo()

    def versions(self) -> dict[str, str]:
        def fmt(v):
            return f"{v // 1000}.{(v % 1000) // 10}"
        out = {"cupy": cupy.__version__}
        for key, fn in (("driver", runtime.driverGetVersion),
                        ("runtime", runtime.runtimeGetVersion)):
            try:
                out[key] = fmt(fn())
            except Exception:
                pass
        try:
            from cupy.cuda import nvrtc  # lazy: loads the NVRTC library
            major, minor = nvrtc.getVersion()
            out["nvrtc"] = f"{major}.{minor}"
        except Exception:
            pass
        return out

    def device_attribute(self, name: str, index: int | None = None) -> int | None:
        code = getattr(runtime, name, None)
        if code is None:
            return None
        try:
            return runtime.deviceGetAttribute(code, self.current_device() if index is None else index)
        except runtime.CUDARuntimeError:
            return None

    def can_access_peer(self, index: int, peer: int) -> bool | None:
        try:
            return bool(runtime.deviceCanAccessPeer(index, peer))
        except runtime.CUDARuntimeError:
            return None

    def enable_peer_access(self, index: int, peer: int) -> bool:
        if not self.can_access_peer(index, peer):
            return False
        with cupy.cuda.Device(index):
            try:
                runtime.deviceEnablePeerAccess(peer)
            except runtime.CUDARuntimeError as exc:
                if "already" not in str(exc).lower():  # cudaErrorPeerAccessAlreadyEnabled
                    raise
        return True

    def default_arch(self) -> str:
        major, minor = self.device_properties().compute_capability
        return f"sm_{major}{minor}"
