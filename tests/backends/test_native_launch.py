"""The GPU backend's C launcher (workbench/backends/gpu/native_launch.py): built
with the system's C compiler, it must pack every parameter exactly as the
Python launcher's ``struct`` layout does (8 bytes per parameter), since the
GPU reads the block as the kernel's C parameters. Launches themselves are
covered on the GPU by every gpu-marked kernel test."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from workbench.backends.gpu import native_launch

rng = np.random.default_rng(5)


@pytest.fixture(scope="module")
def built():
    m = native_launch.module()
    if m is None:
        pytest.skip(f"the C launcher cannot be built here: {native_launch.unavailable_reason()}")
    return m


def _python_block(codes: str, values) -> bytes:
    formats = ["Q" if c == "P" else c for c in codes]
    packer = struct.Struct("<" + "".join(f + "x" * (8 - struct.calcsize(f)) for f in formats))
    return packer.pack(*values)


class _Memory:
    def __init__(self, ptr):
        self.ptr = ptr


class _DeviceArray:  # what the launcher reads of a CuPy array: .data.ptr
    def __init__(self, ptr):
        self.data = _Memory(ptr)


def test_numbers_and_pointers_pack_as_the_struct_layout(built):
    codes = "PfdbBhHiIqQ?P"
    for _ in range(50):
        ptr = int(rng.integers(0, 2**63)) * 2
        values = [ptr, float(rng.standard_normal()), float(rng.standard_normal()) * 1e200,
                  int(rng.integers(-128, 128)), int(rng.integers(0, 256)),
                  int(rng.integers(-2**15, 2**15)), int(rng.integers(0, 2**16)),
                  int(rng.integers(-2**31, 2**31)), int(rng.integers(0, 2**32)),
                  int(rng.integers(-2**63, 2**63)), int(rng.integers(0, 2**63)) * 2 + 1,
                  bool(rng.integers(0, 2)), 0]
        expected = _python_block(codes, values)
        given = [_DeviceArray(ptr), *values[1:-1], None]  # an array's address; None is NULL
        assert built.pack(codes.encode(), given) == expected
        assert built.pack(codes.encode(), tuple(values)) == expected


def test_numpy_scalars_pack_as_their_values(built):
    values = [np.float32(1.1), np.float64(-2.5e-300), np.int32(-7), np.uint64(2**64 - 1), np.bool_(True)]
    assert built.pack(b"fdiQ?", values) == _python_block("fdiQ?", [float(v) if i < 2 else int(v)
                                                                    for i, v in enumerate(values)])


def test_a_wrong_argument_raises_and_packs_nothing(built):
    with pytest.raises(ValueError, match="2 launch arguments for 3 parameters"):
        built.pack(b"Pfi", [0, 1.0])
    with pytest.raises(AttributeError):
        built.pack(b"P", [object()])  # not an array, an int or None
    with pytest.raises(TypeError):
        built.pack(b"i", ["seven"])


def test_a_cache_that_cannot_keep_the_module_costs_only_the_c_path(tmp_path, monkeypatch):
    """An unwritable cache folder must not fail a kernel's compile: the build
    says why and the caller launches from Python."""
    from workbench.backends import native_build
    if native_build.compiler() is None:
        pytest.skip("no C compiler here")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(blocker / "cache"))
    built, why = native_build.build(native_launch.SOURCE, "_wb_launch", "WORKBENCH_NATIVE_LAUNCH")
    assert built is None and "cannot keep" in why


def test_a_broken_cached_module_is_built_again(tmp_path, monkeypatch):
    from workbench.backends import native_build
    if native_build.compiler() is None:
        pytest.skip("no C compiler here")
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "first"))
    built, why = native_build.build(native_launch.SOURCE, "_wb_launch", "WORKBENCH_NATIVE_LAUNCH")
    if built is None:
        pytest.skip(f"the C launcher cannot be built here: {why}")
    (cached,) = (tmp_path / "first" / "native").glob("_wb_launch-*")
    # the same entry in another cache, broken (the loaded file itself must not be touched)
    broken = tmp_path / "second" / "native" / cached.name
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a shared object")
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "second"))
    built, why = native_build.build(native_launch.SOURCE, "_wb_launch", "WORKBENCH_NATIVE_LAUNCH")
    assert built is not None and why is None and built.pack(b"i", [7]) == (7).to_bytes(8, "little")


def test_a_source_the_compiler_refuses_is_not_compiled_again(tmp_path, monkeypatch):
    """(A C collector with two candidate header sets must not pay the first
    one's failed compile in every process.)"""
    from workbench.backends import native_build
    if native_build.compiler() is None:
        pytest.skip("no C compiler here")
    calls = tmp_path / "calls"
    wrapper = tmp_path / "cc-counting"
    real = native_build.compiler()[0]
    wrapper.write_text(f'#!/bin/sh\necho x >> {calls}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C;\n")
    first = native_build.build(broken, "_wb_broken", "WORKBENCH_TEST_BROKEN")
    second = native_build.build(broken, "_wb_broken", "WORKBENCH_TEST_BROKEN")
    assert first[0] is None and "could not build it" in first[1]
    assert second == first
    assert calls.read_text().count("x") == 1
    broken.write_text("int fixed;\n")  # a changed source is another key: compiled again
    native_build.build(broken, "_wb_broken", "WORKBENCH_TEST_BROKEN")
    assert calls.read_text().count("x") >= 2


def test_a_compiler_failure_that_passes_is_not_remembered(tmp_path, monkeypatch):
    """A full disk (or a compiler killed for memory) says nothing lasting about
    the source: the next process tries again."""
    from workbench.backends import native_build
    if native_build.compiler() is None:
        pytest.skip("no C compiler here")
    calls = tmp_path / "calls"
    wrapper = tmp_path / "cc-full-disk-once"
    real = native_build.compiler()[0]
    wrapper.write_text(
        f'#!/bin/sh\necho x >> {calls}\n'
        f'if [ ! -e {tmp_path}/once ]; then touch {tmp_path}/once; '
        f'echo "cc1: error: No space left on device" >&2; exit 1; fi\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    first = native_build.build(native_launch.SOURCE, "_wb_launch", "WORKBENCH_NATIVE_LAUNCH", ("-ldl",))
    assert first[0] is None and "No space left" in first[1]
    second = native_build.build(native_launch.SOURCE, "_wb_launch", "WORKBENCH_NATIVE_LAUNCH", ("-ldl",))
    assert second[0] is not None, second[1]
    assert calls.read_text().count("x") == 2


def test_the_whole_call_object_refuses_checks_it_cannot_make(built):
    """FastCall (the whole-call path, run on the GPU by tests/backends/test_fast_call.py)
    takes one test per parameter of the kind its code says, and slots inside
    the record template; anything else is a clear error at construction."""
    from workbench.runtime.timing import TimingLog
    template, slots = [None] * 16, (1, 2, 3, 4, 5, 12, 14)
    array_check, range_check = (object, np.dtype(np.float32)), (-1.0, 1.0)

    def make(codes, checks, slots=slots):
        return built.FastCall(0, codes, checks, {}, [0], lambda: None, object(), object(),
                              TimingLog(object()), template, slots, None)

    make(b"Pf", (array_check, range_check))
    with pytest.raises(TypeError):
        make(b"Pf", (range_check, array_check))  # a float's test is (low, high)
    with pytest.raises(ValueError, match="one check per parameter"):
        make(b"Pf", (array_check,))
    with pytest.raises(ValueError, match="takes no parameter code '\\?'"):
        make(b"?", ((0, 1),))
    with pytest.raises(ValueError, match="wider than its C type 'h'"):
        make(b"h", ((-2**15, 2**15),))
    with pytest.raises(ValueError, match="wider than its C type 'f'"):
        make(b"f", ((-1.0, 1e39),))
    with pytest.raises(ValueError, match="outside the template"):
        make(b"P", (array_check,), slots=(1, 2, 3, 4, 5, 12, 16))


# The whole-call object driven by a stand-in libcuda (tests/fake_cuda.c), in a
# process of its own (the module binds libcuda once): what it packs, the record
# it logs, and every call it must leave to Python with nothing done.
_STAND_IN = textwrap.dedent(r'''
    import ctypes, gc, json, math, struct, subprocess, sys
    import numpy as np
    from workbench.backends import native_build
    from workbench.backends.gpu import native_launch
    from workbench.runtime.records import WALL, cupti_record
    from workbench.runtime.timing import TimingLog
    lib, source = sys.argv[1], sys.argv[2]
    subprocess.run([*native_build.compiler(), "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", source,
                    "-o", lib], check=True)
    fake = ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)  # (launch.c's dlopen of libcuda.so.1 finds it)
    m = native_launch.module()
    assert m is not None and m.has_driver(), native_launch.unavailable_reason()

    class Memory:
        def __init__(self, ptr): self.ptr = ptr
    class Array:
        def __init__(self, ptr, dtype=np.dtype(np.float32), contiguous=True):
            self.data, self.dtype, self._c_contiguous = Memory(ptr), dtype, contiguous
    class Stream:
        def __init__(self, ptr): self.ptr = ptr
    class Backend:
        name = "cupy"
    class Session:
        pass
    b, session, stream = Backend(), Session(), Stream(0x5000)
    session.backend, session.cell = b, 3
    log = TimingLog(session)
    log._backend, log._activity, log._device = b, object(), 0
    codes = "PfdbBhHiIqQ"
    def span(t):
        i = np.iinfo(t)
        return (int(i.min), int(i.max))
    top32, top64 = float(np.finfo(np.float32).max), float(np.finfo(np.float64).max)
    checks = ((Array, np.dtype(np.float32)), (-top32, top32), (-top64, top64),
              *[span(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                  np.int64, np.uint64)])
    configs = {(4, 128, 0, None): ((4, 1, 1), (128, 1, 1))}
    template, slots = TimingLog.cupti_record_template(b, "k", "cuda", "k_sym")
    fast = m.FastCall(0xF00, codes.encode(), checks, configs, [1024], lambda: stream, session, b, log,
                      template, slots, None)
    fake_int = lambda name: ctypes.c_int.in_dll(fake, name)
    fake_int("fake_nparams").value = len(codes)
    launches = lambda: fake_int("fake_launches").value
    args = [Array(0xABC0), 1.5, -2.25e300, -128, 255, -32768, 65535, -2**31, 2**32 - 1, -2**63, 2**64 - 1]
    out = {"done": fast(tuple(args), 4, 128, 0, None) is None, "launches": launches()}
    packed = (ctypes.c_uint64 * len(codes)).in_dll(fake, "fake_params")
    layout = struct.Struct("<" + "".join(("Q" if c == "P" else c) + "x" * (8 - struct.calcsize("Q" if c == "P" else c))
                                         for c in codes))
    out["packed"] = struct.pack(f"<{len(codes)}Q", *packed) == layout.pack(0xABC0, *args[1:])
    out["dims"] = list((ctypes.c_uint * 7).in_dll(fake, "fake_dims"))
    out["stream"] = ctypes.c_void_p.in_dll(fake, "fake_stream").value
    rec = log.records[-1]
    python_made = cupti_record("k", (4, 1, 1), (128, 1, 1), 0, 3, rec[WALL], "k_sym", b, "cuda", stream, 0)
    out["record"] = [rec == python_made, list(log._awaiting)[-1] is rec, gc.is_tracked(rec)]
    import copy  # an equal dtype that is another object (as np.dtype("q") is to "l") is taken too
    out["equal dtype"] = fast((Array(0xABC0, copy.deepcopy(np.dtype(np.float32))), *args[1:]),
                              4, 128, 0, None) is None
    before = launches()
    declined = {
        "nan": [args[0], math.nan, *args[2:]], "too big for float": [args[0], 3.5e38, *args[2:]],
        "NumPy scalar": [*args[:3], np.int8(1), *args[4:]], "bool": [*args[:3], True, *args[4:]],
        "out of range": [*args[:4], 256, *args[5:]], "negative unsigned": [*args[:10], -1],
        "wrong dtype": [Array(1, np.dtype(np.float64)), *args[1:]],
        "strided": [Array(1, contiguous=False), *args[1:]], "None": [None, *args[1:]],
        "one short": args[:-1]}
    out["declined"] = {what: fast(tuple(a), 4, 128, 0, None) is NotImplemented for what, a in declined.items()}
    out["declined"]["new configuration"] = fast(tuple(args), 8, 128, 0, None) is NotImplemented
    out["declined"]["more shared memory"] = fast(tuple(args), 4, 128, 4096, None) is NotImplemented
    log._activity = None
    out["declined"]["timed by events"] = fast(tuple(args), 4, 128, 0, None) is NotImplemented
    log._activity = object()
    log.timed_launch = lambda *a, **k: None
    out["declined"]["a wrapped timed_launch"] = fast(tuple(args), 4, 128, 0, None) is NotImplemented
    del log.timed_launch
    session.backend = Backend()
    out["declined"]["another backend"] = fast(tuple(args), 4, 128, 0, None) is NotImplemented
    session.backend = b
    log.enabled, log.capture = False, object()
    out["declined"]["capturing a graph"] = fast(tuple(args), 4, 128, 0, None) is NotImplemented
    out["declined_launches"] = launches() - before
    log.capture, count = None, len(log.records)
    out["paused"] = [fast(tuple(args), 4, 128, 0, None) is None, launches() - before, len(log.records) - count]
    log.enabled = True
    fake_int("fake_status").value = 700
    out["failed"] = [fast(tuple(args), 4, 128, 0, None), len(log.records) - count]
    fake_int("fake_status").value = 0
    log.records.clear(); log._awaiting.clear()
    held = [args[0], args[1], stream, session, log, configs, template]
    counts = [sys.getrefcount(o) for o in held]
    for _ in range(1000):
        fast(tuple(args), 4, 128, 0, None)
    log.records.clear(); log._awaiting.clear()
    out["references"] = [sys.getrefcount(o) for o in held] == counts
    out["taken"] = fast.taken
    print(json.dumps(out))
''')


def test_the_whole_call_packs_logs_and_declines_as_python_would(tmp_path):
    from workbench.backends import native_build
    if native_build.compiler() is None:
        pytest.skip("no C compiler here")
    if os.environ.get("WORKBENCH_NATIVE_LAUNCH", "").strip() == "0":
        pytest.skip("WORKBENCH_NATIVE_LAUNCH=0: the C launcher is off")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _STAND_IN, str(tmp_path / "libcuda.so.1"), str(root / "tests" / "fake_cuda.c")],
        capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
             "WORKBENCH_CACHE_DIR": str(tmp_path / "cache"), "LD_LIBRARY_PATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("LD_LIBRARY_PATH")]))})
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["done"] and out["launches"] == 1
    assert out["packed"], "the argument slots differ from the struct layout"
    assert out["dims"] == [4, 1, 1, 128, 1, 1, 0] and out["stream"] == 0x5000
    assert out["record"] == [True, True, False]  # as Python's, awaiting CUPTI, untracked by the collector
    assert out["declined"] == {what: True for what in out["declined"]} and out["declined_launches"] == 0
    assert out["paused"] == [True, 1, 0]  # launched, not logged
    assert out["failed"] == [700, 0]  # the CUresult handed back, nothing logged
    assert out["references"]
    assert out["equal dtype"]
    assert out["taken"] == 1003
