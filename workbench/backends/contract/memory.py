"""Arrays and memory: device arrays and copies (:class:`Arrays`), the pool
they come from (:class:`MemoryPool`) and the other kinds of memory: pinned
host memory, managed memory (:class:`MemoryKinds`)."""
from __future__ import annotations

import abc
from typing import Any, Callable


class Arrays(abc.ABC):
    """Device arrays: made, copied to and from the host, copied and set on a
    stream, and told apart from other objects."""

    @property
    @abc.abstractmethod
    def xp(self):
        """The NumPy-compatible array module whose arrays live on this
        backend's device (``cupy`` on a GPU)."""

    @abc.abstractmethod
    def allocate(self, shape, dtype) -> Any:
        """An uninitialised device array."""

    @abc.abstractmethod
    def to_device(self, host_array) -> Any:
        """Copy a NumPy array (or anything ``numpy.asarray`` takes) to the device."""

    @abc.abstractmethod
    def to_host(self, device_array):
        """Copy a device array to a new NumPy array (synchronises)."""

    @abc.abstractmethod
    def is_device_array(self, obj) -> bool:
        """True when ``obj`` is an array this backend's kernels can take as a pointer."""

    #: The usual type of device arrays, for a fast ``type(a) is ...`` check on
    #: the launch path before :meth:`is_device_array`; ``None`` skips it.
    device_array_type: type | None = None

    def device_pointer(self, array) -> int:
        """The device address of ``array``'s first element."""
        return int(array.data.ptr)

    def array_device(self, array) -> int:
        """The device whose memory holds the device array ``array``."""
        return self.current_device()

    def foreign_array(self, obj) -> str | None:
        """Where ``obj`` is a device array of another instance of this kind
        of backend (not usable here), words that say so; else None."""
        return None

    def copy(self, dst, src, stream=None) -> None:
        """Queue a copy of ``src`` into ``dst`` on ``stream`` (``None``: the current
        one). Each is a C-contiguous host NumPy array or a device array (of any
        device) of the same number of bytes; the core has checked that. A copy from
        or to pageable host memory may return only when it is done (as CUDA's)."""
        raise NotImplementedError(f"the {self.name} backend cannot copy")

    def memset(self, array, value: int, stream=None) -> None:
        """Queue setting every byte of the device array ``array`` to ``value``."""
        raise NotImplementedError(f"the {self.name} backend cannot memset")


class MemoryPool(abc.ABC):
    """The allocator device arrays come from: its counts, its cap, its cache,
    and listeners told of every allocation and free (memory tracking)."""

    @abc.abstractmethod
    def pool_stats(self) -> dict[str, int]:
        """The allocator's own counts: ``used_bytes``, ``total_bytes``
        (reserved), ``free_blocks``, ``largest_free_block``, ``limit``,
        ``pinned_free_blocks``; a key is absent where the pool cannot tell."""

    @abc.abstractmethod
    def pool_reserved_bytes(self) -> int:
        """Bytes the pool holds from the device (in use plus cached). Cheap:
        called on every allocation while memory is tracked."""

    @abc.abstractmethod
    def set_pool_limit(self, nbytes: int | None) -> None:
        """Cap the pool at ``nbytes`` (``None`` or 0: no cap). Allocations
        beyond it raise the backend's out-of-memory error."""

    @abc.abstractmethod
    def empty_cache(self) -> None:
        """Give the pool's cached free blocks (device and pinned host) back."""

    def is_out_of_memory(self, exc: BaseException) -> bool:
        """True when ``exc`` is this backend's out-of-memory error."""
        return isinstance(exc, MemoryError)

    def add_allocation_listener(self, on_alloc: Callable[[int, int], None],
                                on_free: Callable[[int, int], None]) -> Callable[[], None]:
        """Call ``on_alloc(ptr, size)`` / ``on_free(ptr, size)`` for every
        device allocation and free from now on; returns a function that
        removes the listener. Backends that cannot report return a no-op."""
        return lambda: None


class MemoryKinds(abc.ABC):
    """Memory other than plain device arrays: pinned host memory and managed
    memory (prefetch, advice). The defaults say the backend has none."""

    def alloc_pinned(self, shape, dtype):
        """A NumPy array in page-locked host memory (faster, asynchronous copies)."""
        raise NotImplementedError(f"the {self.name} backend has no pinned host memory")

    def release_pinned_cache(self) -> None:
        """Give the pinned (page-locked) host blocks that no array uses back to
        the system (a pool keeps them otherwise)."""

    def alloc_managed(self, shape, dtype):
        """A device array in managed (unified) memory: the host and every device
        address it; the driver moves pages on demand."""
        raise NotImplementedError(f"the {self.name} backend has no managed memory")

    #: True where managed arrays come from the device pool (and count in its figures).
    managed_in_pool: bool = False

    def managed_prefetch_supported(self, index: int | None = None) -> bool:
        """Whether device ``index`` takes prefetch and advice for managed memory
        (``cudaDevAttrConcurrentManagedAccess``)."""
        return False

    def prefetch(self, array, device: int, stream=None) -> None:
        """Queue moving managed ``array``'s pages to ``device`` (-1: the host)."""
        raise NotImplementedError(f"the {self.name} backend cannot prefetch managed memory")

    def advise(self, array, advice: str, device: int) -> None:
        """``cudaMemAdvise``: ``advice`` is ``"read_mostly"``,
        ``"preferred_location"`` or ``"accessed_by"`` (``unset_...`` too)."""
        raise NotImplementedError(f"the {self.name} backend cannot advise managed memory")
