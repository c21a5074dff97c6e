"""The doctor's GPU rows: the GPU and its driver (through NVML), MIG, clock
slowdowns, CuPy, NVRTC and nvcc against the driver, CUPTI.

:func:`gpus` asks NVML once; every check below reads what it found.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass, field

from ..backends import NO_GPU, gpu_extra, gpu_unavailable_reason, nvidia_gpu_present
from ..backends.gpu import native_cupti as cupti_native
from ..backends.nvrtc import DEFAULT_ARCH, bindings
from ..programs import toolkit
from .result import Check

#: Where the fix of a GPU-only row says nothing is needed.
GPU_ONLY = "nothing to do: only needed with an NVIDIA GPU"
#: NVML's clock event reasons that slow a GPU down, and what each means.
SLOWDOWNS = {0x4: "the power cap", 0x8: "a hardware slowdown (power or temperature)",
             0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
             0x80: "the power brake"}


@dataclass
class Device:
    name: str
    cc: tuple[int, int] | None
    memory: int | None
    mig: bool | None            # MIG mode on (None: the GPU has no MIG)
    slowdowns: list[str] = field(default_factory=list)


@dataclass
class Gpus:
    """What NVML says: the driver, its CUDA version and the devices, or why
    it says nothing (``error``)."""

    error: str | None = None
    driver: str | None = None
    cuda: tuple[int, int] | None = None
    devices: list[Device] = field(default_factory=list)

    @property
    def present(self) -> bool:
        return bool(self.devices)

    def arch(self) -> str:
        """The architecture the workbench compiles for: the first GPU's, else
        the simulator's default."""
        cc = self.devices[0].cc if self.devices else None
        return f"sm_{cc[0]}{cc[1]}" if cc else DEFAULT_ARCH


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpus() -> Gpus:
    """Ask NVML (nvidia-ml-py) for the driver and every GPU; nothing slow."""
    try:
        import pynvml  # lazy: loads libnvidia-ml; only the doctor and the live panels ask
    except ImportError:
        return Gpus(error="nvidia-ml-py is not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return Gpus(error=str(exc))
    try:
        out = Gpus(driver=_text(pynvml.nvmlSystemGetDriverVersion()))
        try:
            version = pynvml.nvmlSystemGetCudaDriverVersion_v2()
            out.cuda = (version // 1000, version % 1000 // 10)
        except pynvml.NVMLError:
            pass
        reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            device = Device(_text(pynvml.nvmlDeviceGetName(handle)), None, None, None)
            for attribute, call in (("cc", pynvml.nvmlDeviceGetCudaComputeCapability),
                                    ("memory", lambda h: pynvml.nvmlDeviceGetMemoryInfo(h).total),
                                    ("mig", lambda h: bool(pynvml.nvmlDeviceGetMigMode(h)[0]))):
                try:
                    setattr(device, attribute, tuple(call(handle)) if attribute == "cc" else call(handle))
                except pynvml.NVMLError:
                    pass
            try:
                mask = reasons(handle)
                device.slowdowns = [words for bit, words in SLOWDOWNS.items() if mask & bit]
            except pynvml.NVMLError:
                pass
            out.devices.append(device)
        return out
    except pynvml.NVMLError as exc:
        return Gpus(error=str(exc))
    finally:
        pynvml.nvmlShutdown()


def _v(version) -> str:
    return f"{version[0]}.{version[1]}" if version else "?"


def check_gpu(g: Gpus) -> Check:
    if g.present:
        names = sorted({f"{d.name} (sm_{d.cc[0]}{d.cc[1]})" if d.cc else d.name for d in g.devices})
        return Check("GPU and driver", "ok",
                     f"{len(g.devices)} × {', '.join(names)}; driver {g.driver} (CUDA {_v(g.cuda)})")
    if nvidia_gpu_present():
        return Check("GPU and driver", "error",
                     f"the NVIDIA driver shows a GPU but NVML cannot read it ({g.error})",
                     "check the driver with nvidia-smi (a driver updated without a reboot "
                     "answers this way: reboot)")
    return Check("GPU and driver", "missing", f"{NO_GPU}: the CPU simulator runs your kernels",
                 "nothing to do; on a machine with an NVIDIA GPU, pip install "
                 "'cuda-workbench[cuda13]' ([cuda12] for a driver older than 580)")


def check_mig(g: Gpus) -> Check:
    if not g.present:
        return Check("MIG", "missing", "no NVIDIA GPU (NVML)", GPU_ONLY)
    on = [i for i, d in enumerate(g.devices) if d.mig]
    if on:
        return Check("MIG", "warning", f"MIG is on for GPU {', '.join(map(str, on))}: kernels run "
                     "on a slice of the GPU, and Nsight Compute cannot measure every counter",
                     "for whole-GPU timings and profiles use a GPU with MIG off (an administrator: "
                     "nvidia-smi -i N -mig 0)")
    known = any(d.mig is not None for d in g.devices)
    return Check("MIG", "ok", "off" if known else "these GPUs have no MIG")


def check_clocks(g: Gpus) -> Check:
    if not g.present:
        return Check("clocks", "missing", "no NVIDIA GPU (NVML)", GPU_ONLY)
    slow = [f"GPU {i}: {', '.join(d.slowdowns)}" for i, d in enumerate(g.devices) if d.slowdowns]
    if slow:
        return Check("clocks", "warning", f"clocks held down now by {'; '.join(slow)}: timings "
                     "are slower and vary", "let the GPU cool or idle and measure again; check "
                     "the power limit with nvidia-smi -q -d PERFORMANCE,POWER")
    return Check("clocks", "ok", "no slowdown (power or thermal) reported")


def cupy_packages() -> dict[str, str]:
    """Installed CuPy distributions: name -> version."""
    found = {}
    for name in ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def check_cupy(g: Gpus) -> Check:
    packages = cupy_packages()
    if not packages:
        if g.present:
            return Check("CuPy", "missing", "not installed: the GPU cannot run kernels", gpu_extra())
        return Check("CuPy", "missing", "not installed (the GPU backend's library)", GPU_ONLY)
    text = ", ".join(f"{n} {v}" for n, v in packages.items())
    if len(packages) > 1:
        return Check("CuPy", "error", f"{text}: several CuPy packages overwrite each other",
                     f"pip uninstall {' '.join(packages)}, then {gpu_extra()}")
    built_for = {"cupy-cuda13x": 13, "cupy-cuda12x": 12, "cupy-cuda11x": 11}.get(next(iter(packages)))
    if built_for and g.cuda and built_for > g.cuda[0]:
        return Check("CuPy", "error", f"{text} is built for CUDA {built_for}; the driver supports "
                     f"CUDA {_v(g.cuda)}", f"update the NVIDIA driver, or pip uninstall "
                     f"{next(iter(packages))} and {gpu_extra()}")
    reason = gpu_unavailable_reason()
    if reason is None:
        return Check("CuPy", "ok", f"{text}, sees the GPU")
    if not g.present:
        return Check("CuPy", "ok", f"{text}; no GPU here, so the simulator runs the kernels")
    return Check("CuPy", "error", f"{text}: {reason}",
                 "run nvidia-smi; in a container, start it with the GPU (--gpus all)")


def _verdict(name: str, version, driver) -> tuple[str, str]:
    """``(status, words)`` for code compiled by ``version`` of CUDA under this driver."""
    check = toolkit.check_toolkit(version, driver)
    if check.verdict == "incompatible":
        return "error", f"{name} {_v(version)} is newer than the driver (CUDA {_v(driver)}): its code cannot load"
    if check.verdict == "sass-only":
        return "ok", (f"{name} {_v(version)} is newer than the driver (CUDA {_v(driver)}): the "
                      "device's own machine code runs, PTX would not (\"unsupported toolchain\")")
    return "ok", f"{name} {_v(version)}" + (f", driver CUDA {_v(driver)}" if driver else "")


def check_nvrtc(g: Gpus, versions: dict) -> Check:
    """``versions``: the active backend's (the NVRTC its compiles go through)."""
    text = versions.get("nvrtc") or bindings.nvrtc_version()
    arch = g.arch()
    if text is None:
        if g.present:
            return Check("NVRTC", "missing", "not found (CuPy brings it)", gpu_extra())
        return Check("NVRTC", "missing", "not installed: the simulator compiles with g++ alone "
                     "(g++'s messages, no register or shared-memory figures)",
                     "pip install 'cuda-workbench[nvrtc]' for NVIDIA's own compile errors and "
                     "resource figures on the simulator")
    version = toolkit.parse_version(text)
    status, words = _verdict("NVRTC", version, g.cuda if g.present else None)
    archs = bindings.supported_archs() if bindings.nvrtc_version() == text else None
    wanted = int(arch[3:]) if arch[3:].isdigit() else None
    if archs and wanted and wanted not in archs and wanted > max(archs):
        return Check("NVRTC", "error", f"{words}; it cannot compile for {arch} (newest: "
                     f"sm_{max(archs)})", "install a newer CuPy / cuda-workbench[cuda13] (a newer NVRTC)")
    words += f"; compiles for {arch}" + (" (the GPU's)" if g.present else " (the simulated device's)")
    fix = ("update the NVIDIA driver, or install CuPy for the driver's CUDA "
           f"({gpu_extra()})" if status == "error" else "nothing to do")
    return Check("NVRTC", status, words, fix)


def check_toolkit(g: Gpus) -> Check:
    nvcc = toolkit.find_nvcc()
    where = "install the CUDA toolkit (developer.nvidia.com/cuda-downloads) or set WORKBENCH_NVCC"
    if nvcc is None:
        if not g.present:
            return Check("CUDA toolkit (nvcc)", "missing", "nvcc not found: %%cuda_program "
                         "builds programs with g++ for the simulator", GPU_ONLY)
        return Check("CUDA toolkit (nvcc)", "missing", "nvcc not found: %%cuda_program cannot "
                     "build for the GPU (%%cuda cells do not need it)", where)
    _, version = toolkit.nvcc_version(nvcc)
    if not g.present:
        return Check("CUDA toolkit (nvcc)", "ok", f"nvcc {_v(version)} at {nvcc} (no GPU to run "
                     "what it builds)")
    check = toolkit.check_toolkit(version, g.cuda)
    status = {"ok": "ok", "sass-only": "warning", "incompatible": "error"}.get(check.verdict, "warning")
    fix = "nothing to do" if status == "ok" else (
        "update the NVIDIA driver, or set WORKBENCH_NVCC to the nvcc of a toolkit no newer "
        f"than CUDA {_v(g.cuda)}")
    return Check("CUDA toolkit (nvcc)", status, f"nvcc {_v(version)} at {nvcc}: {check.message}", fix)


def check_cupti(g: Gpus) -> Check:
    sets, library, reason = cupti_native.locate()
    python_package = importlib.util.find_spec("cupti") is not None
    if sets and library:
        found = f"headers in {sets[0][0]}, {library}" + (", cupti-python" if python_package else "")
    elif python_package:
        found = "cupti-python (no CUPTI headers: its records cost more per launch)"
    else:
        found = None
    if not g.present:
        return Check("CUPTI", "ok", found) if found else Check("CUPTI", "missing", "not found", GPU_ONLY)
    if found:
        return Check("CUPTI", "ok", f"{found}: launches are timed from CUPTI's kernel records")
    return Check("CUPTI", "warning", f"not found ({reason}): each launch is timed by two CUDA "
                 "events", "pip install 'cuda-workbench[cupti]', or install the CUDA toolkit "
                 "(its CUPTI headers let the workbench build a cheaper C collector)")
