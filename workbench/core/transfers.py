"""Copies and memory kinds: ``wb.copy``, ``wb.memset``, ``wb.pinned``,
``wb.managed``, ``wb.memory.prefetch``, ``wb.memory.advise``.

Every copy and memset goes through the timing log (``kind`` "copy" or
"memset", its bytes and stream; ``wb.timings()`` shows the achieved GB/s),
so it appears on :func:`workbench.timeline` beside the kernels. Copies are
asynchronous on their stream (``sync=True`` waits for the copy); a copy from
pageable host memory cannot overlap anything, which is what pinned arrays
(``wb.pinned``) are for.
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentValueError, DeviceError, OutOfMemoryError, WorkbenchError
from ..memory.kinds import registry as _kinds
from ..memory.oom import is_out_of_memory, out_of_memory
from ..present.units import format_bytes
from ..runtime.devices import check_index
from ..runtime.session import backend, session
from .streams import queued_on, refuse_in_capture

#: Names of the copies in the timing log, by direction.
DIRECTIONS = {"H2D": "host to device", "D2H": "device to host", "D2D": "device to device",
              "P2P": "device to another device"}


def direction(b, dst, src) -> str:
    """"H2D", "D2H", "D2D" or "P2P" for a copy of ``src`` into ``dst``."""
    to_device, from_device = b.is_device_array(dst), b.is_device_array(src)
    if to_device and from_device:
        return "P2P" if b.array_device(dst) != b.array_device(src) else "D2D"
    if to_device:
        return "H2D"
    if from_device:
        return "D2H"
    return "H2H"


def _check_copy(b, dst, src) -> str:
    for what, a in (("dst", dst), ("src", src)):
        if not (b.is_device_array(a) or isinstance(a, np.ndarray)):
            foreign = b.foreign_array(a)
            raise WorkbenchError(f"wb.copy(): {what} is {foreign or type(a).__name__}; pass a "
                                 "device array (wb.to_device, wb.allocate) or a NumPy array")
        flags = a.flags
        if not flags.c_contiguous:
            raise WorkbenchError(f"wb.copy(): {what} is a strided view (shape {a.shape}); copies "
                                 "take contiguous arrays: use ascontiguousarray first")
    if dst.nbytes != src.nbytes:
        raise WorkbenchError(f"wb.copy(): dst holds {dst.nbytes} bytes and src {src.nbytes}; "
                             "copies take arrays of the same size in bytes")
    if dst.dtype != src.dtype:  # a copy moves bytes: int32 bytes read as float32 are other numbers
        raise WorkbenchError(
            f"wb.copy(): dst is {dst.dtype} and src {src.dtype}; a copy moves bytes, it does not "
            f"convert values. Convert first (src.astype(np.{dst.dtype.name})), or, to move the "
            f"bytes as they are, view them alike (src.view(np.{dst.dtype.name}))")
    if isinstance(dst, np.ndarray) and not b.is_device_array(dst) and not dst.flags.writeable:
        raise WorkbenchError("wb.copy(): dst is read-only")
    return direction(b, dst, src)


def copy(dst, src, *, stream=None, sync: bool = False):
    """Copy ``src`` into ``dst`` (the same dtype and number of bytes, both
    contiguous: host NumPy arrays or device arrays, of any device; a copy
    moves bytes and never converts values, so other dtypes are refused) on ``stream`` (a
    :class:`~workbench.Stream`; None: the current one). Asynchronous: returns
    when the copy is queued (from pageable host memory CUDA waits for it);
    ``sync=True`` waits until it is done. Returns ``dst``."""
    b = backend()
    kind = _check_copy(b, dst, src)
    if kind == "H2H":
        np.copyto(dst.reshape(-1).view(np.uint8), src.reshape(-1).view(np.uint8))
        return dst
    log = session().timing_log
    capture = log.capture
    if capture is not None and kind in ("H2D", "D2H"):
        host = src if kind == "H2D" else dst
        if not _kinds().is_pinned(host):
            raise WorkbenchError(
                "wb.copy() inside wb.graph(): a graph copies from and to pinned host memory "
                "only (pageable memory is copied synchronously, which a capture cannot "
                "record); allocate the host array with wb.pinned(shape, dtype)")
    if sync:
        refuse_in_capture("wb.copy(sync=True)")
    with queued_on(b, stream, "wb.copy()") as raw:  # (another device's stream: from that device)
        log.timed_op(b, "copy", f"copy {kind}", int(src.nbytes), raw, b.copy, dst, src, raw,
                     keep=(dst, src))  # referenced until the copy is done, as CuPy's own copies
        if sync:
            b.stream_synchronize(raw)
    return dst


def memset(array, value: int = 0, *, stream=None):
    """Set every byte of device ``array`` to ``value`` (0-255) on ``stream``
    (asynchronous, logged as a "memset"). Returns ``array``."""
    b = backend()
    if not b.is_device_array(array):
        raise WorkbenchError(f"wb.memset() takes a device array, got {type(array).__name__}")
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= 255:
        raise WorkbenchError(f"wb.memset(): value is a byte, 0 to 255, got {value!r}")
    if not array.flags.c_contiguous:
        raise WorkbenchError("wb.memset() takes a contiguous array")
    with queued_on(b, stream, "wb.memset()") as raw:
        session().timing_log.timed_op(b, "memset", "memset", int(array.nbytes), raw, b.memset,
                                      array, int(value), raw, keep=array)
    return array


def check_shape(shape, what: str) -> None:
    """Refuse a shape that is not a count of elements >= 0 or a tuple of them
    (before any memory is asked for)."""
    dims = shape if isinstance(shape, (tuple, list)) else (shape,)
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0
               for d in dims):
        raise ArgumentValueError(
            f"{what}(): shape {shape!r} must be a whole number of elements >= 0 "
            f"or a tuple of them, e.g. {what}(1024) or {what}((64, 64))")


def _nbytes(shape, dtype) -> int:
    shape = shape if isinstance(shape, tuple) else (shape,)
    return int(np.prod(shape)) * np.dtype(dtype).itemsize


def pinned(shape, dtype=np.float32) -> np.ndarray:
    """An uninitialised NumPy array in page-locked (pinned) host memory:
    copies from and to it run at the link's full speed and asynchronously,
    so they can overlap kernels on other streams. Listed by
    ``wb.memory.kinds()`` and ``wb.memory.live()`` (kind "pinned")."""
    check_shape(shape, "wb.pinned")
    b = backend()
    dtype = np.dtype(dtype)
    try:
        array = b.alloc_pinned(shape, dtype)
    except Exception as exc:
        if isinstance(exc, MemoryError) or is_out_of_memory(exc, b):
            raise OutOfMemoryError(
                f"Cannot page-lock {format_bytes(_nbytes(shape, dtype))} of host memory ({exc}); "
                "pinned memory is a scarce share of the host's RAM: use smaller buffers and "
                "reuse them", requested=_nbytes(shape, dtype)) from None
        raise
    _kinds().register(array, array.__array_interface__["data"][0], "pinned", array.nbytes,
                      b.current_device())
    return array


def managed(shape, dtype=np.float32):
    """An uninitialised device array in managed (unified) memory: the host and
    every device address it and the driver moves its pages where they are used
    (``wb.memory.prefetch`` moves them ahead of time). Never larger than the current
    device has free: oversubscribing makes page migration the bottleneck.
    Listed by ``wb.memory.kinds()`` (kind "managed")."""
    check_shape(shape, "wb.managed")
    b = backend()
    dtype = np.dtype(dtype)
    nbytes = _nbytes(shape, dtype)
    free, total = b.memory_info()
    if nbytes > free:
        raise OutOfMemoryError(
            f"Out of device memory: wb.managed() asked for {format_bytes(nbytes)} and device "
            f"{b.current_device()} has {format_bytes(free)} free of {format_bytes(total)}. The "
            "workbench never asks for more managed memory than is free (the pages would "
            "thrash between host and device); free arrays or wb.memory.empty_cache() first.",
            requested=nbytes)
    try:
        array = b.alloc_managed(shape, dtype)
    except Exception as exc:
        if is_out_of_memory(exc, b):
            raise out_of_memory(nbytes, exc) from None
        raise
    _kinds().register(array, b.device_pointer(array), "managed", nbytes, b.current_device())
    return array


def _managed_only(b, array, what: str) -> None:
    if not b.is_device_array(array) or _kinds().kind_of(b.device_pointer(array)) != "managed":
        raise WorkbenchError(f"wb.{what}() takes an array made by wb.managed(), got "
                             f"{type(array).__name__}")


def _managed_target(b, array, device, what: str, cannot: str) -> int:
    """The device ``what`` (prefetch, advise) on managed ``array`` aims at,
    checked (None: the current one; -1: the host)."""
    _managed_only(b, array, what)
    device = b.current_device() if device is None else int(device)
    if device != -1:
        check_index(b, device)
        if not b.managed_prefetch_supported(device):
            raise DeviceError(f"device {device} {cannot}")
    return device


def prefetch(array, device: int | None = None, *, stream=None):
    """Move managed ``array``'s pages to ``device`` (None: the current one;
    -1: the host) ahead of use, queued on ``stream``. Returns ``array``. Where
    the device cannot (``managed_prefetch_supported`` false) this raises
    :class:`~workbench.DeviceError` and the pages still move on demand."""
    b = backend()
    device = _managed_target(b, array, device, "prefetch",
                             "cannot prefetch managed memory (no concurrent managed access); "
                             "its pages move on first use instead")
    with queued_on(b, stream, "wb.memory.prefetch()") as raw:
        session().timing_log.timed_op(b, "copy", "prefetch", int(array.nbytes), raw, b.prefetch,
                                      array, device, raw, keep=array)
    return array


def advise(array, advice: str, device: int | None = None):
    """``cudaMemAdvise`` on managed ``array``: ``advice`` is ``"read_mostly"``,
    ``"preferred_location"`` or ``"accessed_by"`` (``"unset_..."`` undoes it),
    for ``device`` (None: the current one). Returns ``array``."""
    b = backend()
    device = _managed_target(b, array, device, "advise",
                             "takes no advice for managed memory (no concurrent managed access)")
    b.advise(array, advice, device)
    return array
