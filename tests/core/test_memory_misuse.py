"""What memory calls did silently and now refuse or do as they say: a copy
between dtypes (bytes read as other numbers), a pool limit of 0 (taken as no
limit), ``wb.xp`` creation functions that built the array on the host first
(NumPy's MemoryError, twice the memory), and a simulated device larger than
the host's memory (the out-of-memory killer instead of an error)."""
import time
import tracemalloc

import numpy as np
import pytest

import workbench as wb
from workbench.backends.simulator import host_memory

from helpers import using_backend


# -- wb.copy between dtypes ---------------------------------------------------------------

@pytest.mark.parametrize("where", ["H2D", "D2D", "D2H"])
def test_a_copy_between_dtypes_is_refused_and_says_how_to_convert(backend, where):
    ints = np.arange(8, dtype=np.int32)
    floats = np.zeros(8, np.float32)
    dst, src = {"H2D": (wb.to_device(floats), ints), "D2D": (wb.to_device(floats), wb.to_device(ints)),
                "D2H": (floats, wb.to_device(ints))}[where]
    with pytest.raises(wb.WorkbenchError, match=r"dst is float32 and src int32.*astype\(np.float32\)"):
        wb.copy(dst, src, sync=True)
    np.testing.assert_array_equal(wb.to_host(dst) if where != "D2H" else dst, floats)  # untouched
    wb.copy(dst, src.astype(np.float32), sync=True)  # converted first: the values, not the bytes
    np.testing.assert_array_equal(wb.to_host(dst) if where != "D2H" else dst, np.arange(8))


# -- wb.memory.set_limit ---------------------------------------------------------------------

def test_a_limit_of_zero_is_refused_and_none_removes_the_limit(backend):
    try:
        wb.memory.empty_cache()  # (a cached block would be reused under any limit)
        wb.memory.set_limit(bytes=64 << 20)
        for zero in ({"bytes": 0}, {"bytes": "0B"}, {"fraction": 0}, {"fraction": 1e-30}):
            with pytest.raises(ValueError, match="limit of 0 bytes.*set_limit\\(\\) to remove"):
                wb.memory.set_limit(**zero)
            assert wb.memory.stats().limit == 64 << 20  # the limit before stays
        with pytest.raises(wb.OutOfMemoryError):
            wb.allocate((128 << 20) // 4, np.float32)
        assert wb.memory.set_limit(bytes=None).limit is None
        assert wb.allocate((128 << 20) // 4, np.float32).nbytes == 128 << 20
    finally:
        wb.memory.set_limit()


# -- wb.xp allocations -------------------------------------------------------------------------

def test_xp_creation_makes_arrays_in_device_memory_without_a_host_copy(backend):
    n = 1 << 24  # 64 MiB of float32
    template = wb.xp.empty(n, dtype=np.float32)
    small = wb.xp.empty(4, dtype=np.float32)
    for warm in (wb.xp.zeros(4, np.float32), wb.xp.ones(4, np.float32), wb.xp.full(4, 2.5, np.float32),
                 wb.xp.zeros_like(small), wb.xp.full_like(small, 7)):  # (kernels compiled, outside)
        assert warm.size == 4
    made = {}
    tracemalloc.start()
    try:
        made["zeros"] = wb.xp.zeros(n, dtype=np.float32)
        made["ones"] = wb.xp.ones((n // 4, 4), dtype=np.float32)
        made["full"] = wb.xp.full(n, 2.5, dtype=np.float32)
        made["zeros_like"] = wb.xp.zeros_like(template)
        made["full_like"] = wb.xp.full_like(template, 7)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak} bytes on the host for 320 MiB of device arrays"
    assert all(wb.backend().is_device_array(a) for a in made.values())
    sample = {k: wb.to_host(v.reshape(-1)[-3:]) for k, v in made.items()}
    assert [list(v) for v in sample.values()] == [[0] * 3, [1] * 3, [2.5] * 3, [0] * 3, [7] * 3]
    assert made["full_like"].dtype == np.float32 and made["ones"].shape == (n // 4, 4)


@pytest.mark.parametrize("make", [
    lambda xp: xp.zeros(1 << 42, dtype=np.float32),
    lambda xp: xp.ones((1 << 21, 1 << 21), dtype=np.float32),
    lambda xp: xp.empty(1 << 42, dtype=np.float32),
    lambda xp: xp.full(1 << 42, 1.0, dtype=np.float32),
    lambda xp: xp.zeros_like(xp.zeros(4, np.float32), shape=(1 << 42,)),
], ids=["zeros", "ones", "empty", "full", "zeros_like"])
def test_a_huge_xp_array_is_refused_at_once_with_the_workbench_message(backend, make):
    start = time.perf_counter()
    with pytest.raises(wb.OutOfMemoryError) as caught:
        make(wb.xp)
    assert time.perf_counter() - start < 5
    text = str(caught.value)
    assert text.startswith("Out of device memory: asked for 16.00 TiB") and "can never fit" in text
    assert caught.value.requested == 1 << 44
    assert wb.xp.zeros(4).sum() == 0  # the device goes on


# -- the simulated device and the host's memory --------------------------------------------------

def test_the_simulated_device_is_at_most_the_hosts_available_memory():
    cap = host_memory.device_cap()
    if cap is None:
        pytest.skip("this system does not say how much memory is available")
    with using_backend("simulator") as b:
        props = b.device_properties()
        assert props.total_memory <= max(cap, 1 << 20) and b.memory_info()[1] == props.total_memory
        if cap < 80 << 30:  # smaller than the H100 it simulates: capped, and it says so
            assert props.total_memory == cap
            assert "at most the host's available memory" in b.describe()
            assert "at most the host's available memory" in props.extra["memory_note"]


def test_an_allocation_past_the_device_or_the_host_is_refused(private_simulator, monkeypatch):
    b = private_simulator()
    if b.device_properties().total_memory < 60 << 30:
        with pytest.raises(wb.OutOfMemoryError, match="(?s)asked for 60.00 GiB.*more than the whole device"):
            wb.allocate((60 << 30) // 4, np.float32)
    # a device set larger than what the host has available now: what it cannot back is refused
    big = private_simulator(memory_bytes=4 << 30)
    assert big.device_properties().total_memory == 4 << 30
    monkeypatch.setattr(host_memory, "available_bytes", lambda: 1 << 30)
    with pytest.raises(wb.OutOfMemoryError, match="host has 1.00 GiB available to back it"):
        wb.allocate((2 << 30) // 4, np.float32)
    assert wb.allocate((512 << 20) // 4, np.float32).nbytes == 512 << 20  # what fits is taken


def test_the_device_panel_says_the_memory_is_capped(simulator):
    from workbench.widgets.device_panel import _activity_fields
    row = {"threads": 2, "busy": float("nan"), "launches_per_s": float("nan"), "in_use": 0,
           "reserved": 0}
    (field,) = [f for f in _activity_fields(row, 1 << 30, "at most the host's available memory")
                if f[0] == "Virtual device memory"]
    assert field[1] == "1.00 GiB" and "at most the host's available memory" in field[2]
