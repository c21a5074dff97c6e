"""Tensor maps for the Tensor Memory Accelerator (TMA) of Hopper GPUs.

A tensor map is a 128-byte descriptor of a matrix in device memory (address,
sizes, row stride, the box one copy moves, its shared-memory swizzle) that the
kernel's ``cp.async.bulk.tensor`` instructions name. Only the driver can make
one: :func:`encode_tiled` calls ``cuTensorMapEncodeTiled`` of ``libcuda``
through ``ctypes`` (no Python binding needed; the driver is loaded already
wherever a GPU backend runs). The kernels of this library read their maps from
device memory, so a launch passes one pointer whatever the launcher.

A map depends only on what it describes, so :class:`TensorMapCache` keeps the
device copies by those parameters: a matrix used again (a benchmark, a
training loop) costs a dictionary look-up, not an encode and a copy.
"""
from __future__ import annotations

import ctypes
import functools
from collections import OrderedDict

import numpy as np

from ..errors import ArgumentValueError, WorkbenchError

__all__ = ["TensorMapUnavailable", "encode_tiled", "TensorMapCache", "DATA_TYPES", "SWIZZLES"]

#: CUtensorMapDataType codes of the element types the library's kernels take.
DATA_TYPES = {"float16": 6, "bfloat16": 9, "float32": 7}
#: CUtensorMapSwizzle codes by the swizzle's span in bytes.
SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
_INTERLEAVE_NONE = 0
_L2_PROMOTION_256B = 3
_OOB_FILL_ZEROS = 0
_MAP_BYTES = 128


class TensorMapUnavailable(WorkbenchError):
    """The driver cannot make a tensor map here (no libcuda, or it refused)."""


@functools.lru_cache(maxsize=1)
def _libcuda():
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise TensorMapUnavailable(f"the CUDA driver (libcuda.so.1) cannot be loaded: {exc}") from None


def _error_name(driver, code: int) -> str:
    name = ctypes.c_char_p()
    try:
        if driver.cuGetErrorName(ctypes.c_int(code), ctypes.byref(name)) == 0 and name.value:
            return name.value.decode()
    except AttributeError:
        pass
    return f"CUresult {code}"


def encode_tiled(address: int, dtype: str, shape: tuple[int, int], box: tuple[int, int],
                 swizzle: int = 128, driver=None) -> np.ndarray:
    """The tensor map of a row-major ``shape = (rows, cols)`` matrix of
    ``dtype`` (``"float16"``, ``"bfloat16"``, ``"float32"``) at device
    ``address``, copied ``box = (box_rows, box_cols)`` at a time into shared
    memory laid out with the ``swizzle``-byte pattern; elements outside the
    matrix read as zeros. Returns its 128 bytes as 16 uint64.

    ``driver`` is the ``ctypes`` library to call (default: ``libcuda.so.1``).
    Raises ValueError for a matrix TMA cannot describe (address not 16-byte
    aligned, a row stride not a multiple of 16 bytes, a box row wider than the
    swizzle) and :class:`TensorMapUnavailable` when the driver is missing or
    refuses."""
    if dtype not in DATA_TYPES:
        raise ArgumentValueError(f"tensor maps here take {', '.join(DATA_TYPES)}, not {dtype!r}")
    if swizzle not in SWIZZLES:
        raise ArgumentValueError(f"swizzle is one of {sorted(SWIZZLES)} bytes, not {swizzle!r}")
    itemsize = 4 if dtype == "float32" else 2
    rows, cols = (int(v) for v in shape)
    box_rows, box_cols = (int(v) for v in box)
    if rows < 1 or cols < 1:
        raise ArgumentValueError(
            f"a tensor map needs a matrix of at least one element, got shape {shape}")
    if address % 16:
        raise ArgumentValueError(
            f"TMA needs a 16-byte aligned matrix; this one starts at {address:#x}")
    if cols * itemsize % 16:
        raise ArgumentValueError(
            f"TMA needs rows of a multiple of 16 bytes; {cols} {dtype} values are "
            f"{cols * itemsize} bytes")
    if not (1 <= box_rows <= 256 and 1 <= box_cols <= 256):
        raise ArgumentValueError(f"a box side is 1 to 256 elements, got {box}")
    if swizzle and box_cols * itemsize > swizzle:
        raise ArgumentValueError(f"a box row of {box_cols * itemsize} bytes is wider than the "
                                 f"{swizzle}-byte swizzle")
    driver = _libcuda() if driver is None else driver
    storage = (ctypes.c_uint8 * (_MAP_BYTES + 64))()   # the driver wants the map 64-byte aligned
    offset = -ctypes.addressof(storage) % 64
    target = ctypes.addressof(storage) + offset
    dims = (ctypes.c_uint64 * 2)(cols, rows)            # innermost first
    strides = (ctypes.c_uint64 * 1)(cols * itemsize)    # bytes, of every dimension but the first
    boxes = (ctypes.c_uint32 * 2)(box_cols, box_rows)
    steps = (ctypes.c_uint32 * 2)(1, 1)
    try:
        status = driver.cuTensorMapEncodeTiled(
            ctypes.c_void_p(target), ctypes.c_int(DATA_TYPES[dtype]), ctypes.c_uint32(2),
            ctypes.c_void_p(address), dims, strides, boxes, steps, ctypes.c_int(_INTERLEAVE_NONE),
            ctypes.c_int(SWIZZLES[swizzle]), ctypes.c_int(_L2_PROMOTION_256B),
            ctypes.c_int(_OOB_FILL_ZEROS))
    except AttributeError:
        raise TensorMapUnavailable("this CUDA driver has no cuTensorMapEncodeTiled (it needs "
                                   "CUDA 12 or later)") from None
    if status != 0:
        raise TensorMapUnavailable(f"cuTensorMapEncodeTiled refused the {rows} x {cols} {dtype} "
                                   f"matrix with box {box}: {_error_name(driver, status)}")
    raw = bytes(storage[offset:offset + _MAP_BYTES])
    return np.frombuffer(raw, dtype=np.uint64).copy()


class TensorMapCache:
    """Device copies of tensor maps, by what they describe (least recently
    used ones dropped past ``size``). ``get(key, make)`` returns the device
    array for ``key``, calling ``make()`` (host uint64 maps, concatenated) and
    ``to_device`` on a miss."""

    def __init__(self, to_device, size: int = 64):
        self._to_device = to_device
        self._size = size
        self._entries: OrderedDict = OrderedDict()

    def get(self, key, make):
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            return found
        found = self._entries[key] = self._to_device(np.ascontiguousarray(make(), dtype=np.uint64))
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return found

    def __len__(self) -> int:
        return len(self._entries)
