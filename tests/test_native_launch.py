"""The GPU backend's C launcher (workbench/backends/native_launch.py): built
with the system's C compiler, it must pack every parameter exactly as the
Python launcher's ``struct`` layout does (8 bytes per parameter), since the
GPU reads the block as the kernel's C parameters. Launches themselves are
covered on the GPU by every gpu-marked kernel test."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from workbench.backends import native_launch

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
    """FastCall (the whole-call path, run on the GPU by tests/test_fast_call.py)
    takes one test per parameter of the kind its code says, and slots inside
    the record template; anything else is a clear error at construction."""
    from workbench.runtime.timing import TimingLog
    template, slots = [None] * 16, (1, 2, 3, 4, 5, 12, 14)
    array_check, range_check = (object, np.dtype(np.float32), True), (-1.0, 1.0)

    def make(codes, checks, slots=slots):
        return built.FastCall(0, codes, checks, {}, [0], lambda: None, object(), object(),
                              TimingLog(object()), template, slots)

    made = make(b"Pf", (array_check, range_check))
    assert made.taken == 0
    with pytest.raises(TypeError):
        make(b"Pf", (range_check, array_check))  # a pointer's test is (type, dtype, contiguous)
    with pytest.raises(ValueError, match="one check per parameter"):
        make(b"Pf", (array_check,))
    with pytest.raises(ValueError, match="takes no parameter code '\\?'"):
        make(b"?", ((0, 1),))
    with pytest.raises(ValueError, match="outside the template"):
        make(b"P", (array_check,), slots=(1, 2, 3, 4, 5, 12, 16))
    if not built.has_driver():  # without libcuda nothing launches: every call is left to Python
        assert made((np.zeros(1), 0.5), 1, 1, 0, None) is NotImplemented
