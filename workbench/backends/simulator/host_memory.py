"""What the host can give the simulated device: its available memory.

The simulator's device memory is a shared mapping whose pages cost nothing
until a kernel or a copy touches them. A device larger than the host's free
memory would take allocations it cannot back, and the first kernel writing
them would meet the operating system's out-of-memory killer. So the
simulated device is, by default, at most the host's available memory (read
once per process: a device's size does not change under the notebook), and
a large allocation is checked against what is available at that moment.

Available memory is ``MemAvailable`` of ``/proc/meminfo``, within the
process's cgroup (v2) limit where one is set; None where neither can be read
(another system): then nothing is capped.
"""
from __future__ import annotations

import functools
import os

#: Allocations at least this large are checked against the host's available
#: memory at the moment (smaller ones cannot, alone, exhaust it; reading
#: /proc/meminfo on every allocation would cost a system call each).
CHECK_FROM_BYTES = 64 << 20


def available_bytes() -> int | None:
    """Bytes the host can give now: ``MemAvailable``, within the cgroup's limit."""
    found = [v for v in (_meminfo_available(), _cgroup_room()) if v is not None]
    return min(found) if found else None


@functools.lru_cache(maxsize=1)
def device_cap() -> int | None:
    """The largest simulated device by default: the host's available memory
    when first asked in this process (whole MiB), or None where unknown."""
    available = available_bytes()
    return None if available is None else max(1 << 20, available >> 20 << 20)


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """``memory.max - memory.current`` of this process's cgroup (v2), None
    where there is no limit or no cgroup v2."""
    try:
        with open("/proc/self/cgroup") as f:
            path = next((ln.split(":", 2)[2].strip() for ln in f if ln.startswith("0::")), None)
        if path is None:
            return None
        folder = os.path.join("/sys/fs/cgroup", path.lstrip("/"))
        with open(os.path.join(folder, "memory.max")) as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open(os.path.join(folder, "memory.current")) as f:
            current = int(f.read().strip())
        return max(0, int(limit) - current)
    except (OSError, ValueError, IndexError):
        return None
