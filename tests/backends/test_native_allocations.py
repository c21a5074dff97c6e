"""The C allocator of memory tracking on the GPU (workbench/backends/gpu/native/
allocations.c), checked without a GPU: it wraps a stand-in pool, as CuPy's
allocator wraps the default MemoryPool, and must hand out memory objects of
the BaseMemory class it was given, append records in the memory tracker's
format with the user's frames, report each free before the block goes back
to the pool, and keep the tracker's figures exact. Each test runs with a
BaseMemory built here in C (the shape of CuPy's: no GC, ``ptr``/``size``/
``device_id`` attributes) and, where CuPy can be imported, with CuPy's own
classes. On the GPU, the gpu-marked memory tests cover it through CuPy."""
from __future__ import annotations

import gc
import sys
import time

import numpy as np
import pytest

from workbench.backends import native_build
from workbench.backends.gpu import NATIVE_DIR
from workbench.memory import sources
from workbench.memory.tracker import Tracker
from workbench.runtime.session import session

rng = np.random.default_rng(12)

# A BaseMemory of the shape of CuPy's (cython.no_gc, settable ptr/size/device_id),
# for machines without CuPy. Its dealloc drops the instance's reference to its
# (heap) type, as heap types' deallocs must: the C allocator has to cope both
# with this and with CuPy's static type, which does not.
_STAND_IN_BASE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
typedef struct { PyObject_HEAD Py_ssize_t ptr; Py_ssize_t size; int device_id; } Mem;
static PyMemberDef members[] = {
    {"ptr", T_PYSSIZET, offsetof(Mem, ptr), 0, NULL},
    {"size", T_PYSSIZET, offsetof(Mem, size), 0, NULL},
    {"device_id", T_INT, offsetof(Mem, device_id), 0, NULL},
    {NULL, 0, 0, 0, NULL}};
static void dealloc(PyObject *o) { PyTypeObject *tp = Py_TYPE(o); tp->tp_free(o); Py_DECREF(tp); }
static PyType_Slot slots[] = {{Py_tp_members, members}, {Py_tp_dealloc, (void *)dealloc}, {0, NULL}};
static PyType_Spec spec = {"_wb_test_memory.BaseMemory", sizeof(Mem), 0,
                           Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, slots};
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_wb_test_memory", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__wb_test_memory(void) {
    PyObject *m = PyModule_Create(&def), *t = m ? PyType_FromSpec(&spec) : NULL;
    if (t == NULL || PyModule_AddObject(m, "BaseMemory", t) < 0) return NULL;
    return m;
}
"""


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    built, why = native_build.build(NATIVE_DIR / "allocations.c", "_wb_allocations",
                                    "WORKBENCH_NATIVE_ALLOCATIONS")
    if built is None:
        pytest.skip(f"the C allocator cannot be built here: {why}")
    return built


class _Pointer:
    """What the allocator needs of CuPy's MemoryPointer: MemoryPointer(mem, offset)."""

    def __init__(self, mem, offset):
        self.mem, self.ptr, self.device_id = mem, mem.ptr + offset, mem.device_id


@pytest.fixture(scope="module", params=["stand-in", "cupy"])
def classes(request, native, tmp_path_factory):
    """``(BaseMemory, MemoryPointer)``."""
    if request.param == "cupy":
        try:
            from cupy.cuda import memory
        except Exception as exc:  # noqa: BLE001 -- no CuPy (or no CUDA libraries) here
            pytest.skip(f"CuPy's classes cannot be imported here ({type(exc).__name__}: {exc})")
        return memory.BaseMemory, memory.MemoryPointer
    cc = native_build.compiler()
    tmp = tmp_path_factory.mktemp("base")
    source, target = tmp / "base.c", tmp / "_wb_test_memory.so"
    source.write_text(_STAND_IN_BASE)
    complaint = native_build.compile_source(cc, source, target)
    assert complaint is None, complaint
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.ExtensionFileLoader("_wb_test_memory", str(target))
    module = importlib.util.module_from_spec(
        importlib.util.spec_from_file_location("_wb_test_memory", str(target), loader=loader))
    loader.exec_module(module)
    return module.BaseMemory, _Pointer


class _Pool:
    """Stands in for CuPy's MemoryPool.malloc: blocks rounded up to 512 bytes,
    addresses reused after a block comes back, each release logged."""

    def __init__(self, base, pointer, log, device=0):
        self.log, self.device, self.used, self.next, self.free = log, device, 0, 1 << 20, {}
        self.pointer = pointer
        pool = self

        class Block(base):
            def __del__(self):
                pool.used -= self.size
                pool.free.setdefault(self.size, []).append(self.ptr)
                pool.log.append(("released", self.ptr))
        self.block = Block

    def __call__(self, size):
        if size > 1 << 40:
            raise MemoryError(f"out of memory allocating {size} bytes")
        rounded = -(-size // 512) * 512
        block = self.block()
        if size == 0:
            block.ptr, block.size = 0, 0
        else:
            reuse = self.free.get(rounded)
            block.ptr = reuse.pop() if reuse else self.next
            block.size = rounded
            if not reuse:
                self.next += rounded
            self.used += rounded
        block.device_id = self.device
        return self.pointer(block, 0)


class _Session:
    cell = 5


def _sink(records, count_now=None, count_every=1 << 30, reserved=lambda: 1 << 30):
    return (records, _Session(), reserved, count_now, count_every, {}, sources.frame_kind, 3)


def _allocate(allocator, size):
    return allocator(size), sources.capture(1)   # on one line: the same user frames


def _lines(frames):
    return [(code, sources.line_of(code, offset)) for code, offset in frames]


@pytest.fixture
def setup(native, classes):
    base, pointer = classes
    log: list = []
    pool = _Pool(base, pointer, log)
    allocator = native.Allocator(native.memory_type(base, pointer), pool)
    allocator.configure(0, None, None, _sink(log))
    return allocator, pool, log, base


def test_records_have_the_trackers_format_and_the_users_frames(setup, native):
    allocator, pool, log, base = setup
    before = time.perf_counter()
    p, python_frames = _allocate(allocator, 1000)
    after = time.perf_counter()
    assert len(log) == 1
    size, t, cell, frames, reserved, ptr = log[0]
    assert (size, cell, reserved, ptr) == (1024, 5, 1 << 30, p.ptr)
    assert before <= t <= after                        # time.perf_counter's clock
    assert before <= native.now() - (after - before) <= time.perf_counter()
    assert _lines(frames) == _lines(python_frames)     # what the Python callbacks would capture
    assert frames[0][0] is _allocate.__code__
    assert "allocator(size)" in sources.resolve(frames)[0].text
    assert isinstance(p.mem, base) and type(p.mem).__name__ == "WatchedMemory"
    assert (p.mem.ptr, p.mem.size, p.mem.device_id) == (p.ptr, 1024, 0)
    assert not gc.is_tracked(p.mem)                    # never cleared by the collector
    with pytest.raises(TypeError):
        type(p.mem)()                                  # made by the allocator only


def test_frames_follow_the_allocating_line(setup):
    allocator, pool, log, _ = setup
    kept = [allocator(64) for _ in range(3)]           # one line three times
    kept.append(allocator(64))                         # then another
    lines = [sources.resolve(e[3])[0].line for e in log]
    assert lines[0] == lines[1] == lines[2] != lines[3]
    assert [sources.resolve(e[3])[0].text for e in log][2:] == [
        "kept = [allocator(64) for _ in range(3)]           # one line three times",
        "kept.append(allocator(64))                         # then another"]


def test_a_free_is_recorded_before_the_block_goes_back_to_the_pool(setup):
    allocator, pool, log, _ = setup
    p = allocator(100)
    ptr = p.ptr
    del p
    assert [e[0] for e in log[1:]] == [ptr, "released"]
    free = log[1]
    assert free[:2] == (ptr, 512) and free[3] == 5 and free[2] >= log[0][1]
    q = allocator(100)                                 # the address again, after its free
    assert q.ptr == ptr and log[-1][-1] == ptr and len(log[-1]) == 6
    assert pool.used == 512


def test_memory_in_garbage_cycles_is_freed_and_reported(setup):
    allocator, pool, log, _ = setup

    class Holder:
        pass
    gc.disable()
    try:
        for _ in range(3):
            h = Holder()
            h.p, h.me = allocator(4096), h
            del h
        assert pool.used == 3 * 4096
    finally:
        gc.enable()
    gc.collect()
    assert pool.used == 0
    frees = [e for e in log if len(e) == 4]
    released = [e for e in log if e[0] == "released"]
    assert len(frees) == len(released) == 3
    for free in frees:                                 # each free heard before its release
        assert log.index(free) < log.index(("released", free[0]))


def test_the_memory_type_keeps_its_reference_count_over_many_allocations(setup):
    allocator, pool, log, _ = setup
    kind = type(allocator(8).mem)
    before = sys.getrefcount(kind)
    for _ in range(2000):
        allocator(int(rng.integers(1, 10_000)))
    kept = [allocator(64) for _ in range(100)]
    assert sys.getrefcount(kind) == before + 100
    del kept
    assert sys.getrefcount(kind) == before and pool.used == 0


def test_listeners_device_and_empty_blocks(setup, native):
    allocator, pool, log, _ = setup
    heard = []

    def broken(ptr, size):
        raise RuntimeError("a listener's bug")
    allocator.configure(0, lambda p, s: heard.append(("alloc", p, s)), broken, None)
    p = allocator(10)
    ptr = p.ptr
    del p                                              # the listener's error is dropped
    assert heard == [("alloc", ptr, 512)] and log == [("released", ptr)]
    empty = allocator(0)                               # no memory: the pool's block as it is
    assert empty.ptr == 0 and type(empty.mem) is pool.block
    allocator.configure(1, lambda p, s: heard.append(p), None, _sink(log))
    del log[:], heard[:]
    q = allocator(10)                                  # another device's: served, not reported
    del q
    assert heard == [] and [e[0] for e in log] == ["released"]


def test_pool_errors_reach_the_caller_and_nothing_is_recorded(setup):
    allocator, pool, log, _ = setup
    with pytest.raises(MemoryError, match="out of memory allocating"):
        allocator(1 << 41)
    assert log == [] and pool.used == 0
    with pytest.raises(TypeError):
        allocator(1, 2)


def test_the_owner_counts_when_records_pile_up(setup):
    allocator, pool, log, _ = setup
    counted = []

    def count_now():
        counted.append(len(log))
        del log[:]
    allocator.configure(0, None, None, _sink(log, count_now, count_every=3))
    kept = [allocator(100) for _ in range(7)]
    assert counted == [3, 3] and len(log) == 1
    del kept


def test_an_unreadable_pool_total_is_recorded_as_none(setup):
    allocator, pool, log, _ = setup

    def reserved():
        raise RuntimeError("no pool")
    allocator.configure(0, None, None, _sink(log, reserved=reserved))
    p = allocator(100)
    assert log[0][4] is None and log[0][5] == p.ptr


class _Backend:
    """A backend whose device allocations go through the C allocator around
    the stand-in pool, as the GPU backend's do around CuPy's."""

    name = "stand-in"

    def __init__(self, allocator, pool):
        self.allocator, self.pool = allocator, pool

    def pool_stats(self):
        return {"used_bytes": self.pool.used}

    def pool_reserved_bytes(self):
        return 1 << 30

    def add_allocation_listener(self, on_alloc, on_free):
        self.allocator.configure(0, None, None, on_alloc.native_sink)

        def remove():
            self.allocator.configure(0, None, None, None)
        remove.reports_earlier_frees = False
        return remove


def test_the_trackers_figures_stay_exact_through_the_c_allocator(setup):
    allocator, pool, log, _ = setup
    early = pool(2048)                                 # the pool's own, from before: untracked
    backend = _Backend(allocator, pool)
    tracker = Tracker()
    tracker.start(backend)
    try:
        kept, peak = {}, pool.used
        for _ in range(3000):
            if kept and rng.random() < 0.45:
                kept.pop(int(rng.choice(list(kept))))
            else:
                p = allocator(int(rng.integers(1, 20_000)))
                kept[p.ptr] = p
            peak = max(peak, pool.used)
        assert tracker.in_use == pool.used
        assert tracker.untracked_bytes == 2048 and tracker.peak == peak
        assert set(tracker.live) == set(kept)
        sites = {a.sites[0].text for a in tracker.allocations()}
        assert sites == {"p = allocator(int(rng.integers(1, 20_000)))"}
        assert {a.cell for a in tracker.allocations()} == {session().cell}
        del early, p                                   # early's free reaches no allocator:
        kept.clear()                                   # the tracker re-reads the pool for it
        assert tracker.in_use == pool.used == 0
        counts = tracker.cell_counts()
        assert sum(c.n_allocs for c in counts) == sum(c.n_frees for c in counts)
    finally:
        tracker.stop()
