"""The top level of ``workbench``: one name per job, ``wb.backend`` and
``wb.device`` both as calls and as context managers, and every name of the
last release still working, with one DeprecationWarning that names the new one."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import workbench as wb
from workbench import compat, languages, profiling, programs, rings, tuning
from workbench import types as wb_types
from workbench.benchmarking.result import BenchResult
from workbench.benchmarking.timeline import Timeline
from workbench.core.compiler import Module
from workbench.core.graphs import Graph
from workbench.core.streams import stream
from workbench.diagnostics import Diagnostic
from workbench.hardware.properties import DeviceInfo, use_device
from workbench.runtime import session

from helpers import using_backend

ADD_ONE = 'extern "C" __global__ void add_one(int* v, int n) { int i = threadIdx.x; if (i < n) v[i] += 1; }'

#: old name -> (the replacement its warning names, what the old name gives, as before)
OLD_NAMES = {
    "use_backend": ("wb.backend", session.use_backend),
    "use_device": ("wb.device", use_device),
    "stream": ("`with s:`", stream),
    "kernel": ("wb.python_kernel", languages.kernel),
    "build_program": ("wb.programs.build_program", programs.build_program),
    "profile_code": ("wb.profiling.profile_code", profiling.profile_code),
    "profile_executable": ("wb.profiling.profile_executable", profiling.profile_executable),
    "NcuReport": ("wb.profiling.NcuReport", profiling.NcuReport),
    "TuneResult": ("wb.tuning.TuneResult", tuning.TuneResult),
    "Ring": ("wb.rings.Ring", rings.Ring),
    "Module": ("wb.types.Module", Module),
    "Graph": ("wb.types.Graph", Graph),
    "Timeline": ("wb.types.Timeline", Timeline),
    "BenchResult": ("wb.types.BenchResult", BenchResult),
    "Diagnostic": ("wb.types.Diagnostic", Diagnostic),
    "prefetch": ("wb.memory.prefetch", wb.memory.prefetch),
    "advise": ("wb.memory.advise", wb.memory.advise),
    "check_available": ("wb.compat.check_available", compat.check_available),
    "device_name": ("wb.compat.device_name", compat.device_name),
    "compute_capability": ("wb.compat.compute_capability", compat.compute_capability),
    "get_memory_info": ("wb.compat.get_memory_info", compat.get_memory_info),
    "compile_kernel": ("wb.compat.compile_kernel", compat.compile_kernel),
    "launch_kernel": ("wb.compat.launch_kernel", compat.launch_kernel),
}


def _fresh(name: str) -> None:
    """As if ``wb.name`` had not been used in this process yet."""
    wb._WARNED.discard(name)


def _old(name: str):
    """``wb.<name>``, checking that it warns (the first time) and naming its replacement."""
    _fresh(name)
    replacement = OLD_NAMES[name][0]
    with pytest.warns(DeprecationWarning, match=rf"wb\.{name} is deprecated.*{re.escape(replacement)}"):
        return getattr(wb, name)


# -- the names ------------------------------------------------------------------------------------

def test_the_top_level_has_about_sixty_five_names_and_lists_them_all():
    public = [n for n in dir(wb) if not n.startswith("_")]
    assert len(public) <= 67, f"{len(public)} public names: put new ones in a namespace"
    assert sorted(dir(wb)) == sorted(wb.__all__)
    assert not set(OLD_NAMES) & set(dir(wb)), "a deprecated name is listed"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no listed name is a deprecated one
        for name in public:
            if name != "xp":  # (xp chooses a backend)
                assert getattr(wb, name) is not None


def test_names_that_say_what_they_are():
    assert wb.python_kernel is languages.kernel      # Numba and Triton kernels
    assert wb.kernels.__name__ == "workbench.kernels"  # the kernel library
    assert isinstance(wb.Kernel, type)                # a compiled CUDA C++ kernel
    assert (wb.types.Module, wb.types.Graph, wb.types.Timeline, wb.types.BenchResult,
            wb.types.Diagnostic) == (Module, Graph, Timeline, BenchResult, Diagnostic)
    assert wb.compat is compat and wb.types is wb_types


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'use_everything'"):
        wb.use_everything


@pytest.mark.parametrize("name", sorted(OLD_NAMES))
def test_each_old_name_warns_once_naming_the_new_one_and_gives_what_it_gave(name):
    assert _old(name) is OLD_NAMES[name][1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert getattr(wb, name) is OLD_NAMES[name][1]   # the second use: no warning
    assert caught == []


def test_the_warning_points_at_the_users_line():
    _fresh("use_device")
    with pytest.warns(DeprecationWarning) as caught:
        wb.use_device
    assert caught[0].filename == __file__


# -- the old names still work -----------------------------------------------------------------

def test_old_backend_and_device_calls_still_work(backend):
    with using_backend():
        assert _old("use_backend")(backend.name) is backend
        info = _old("use_device")(0)
        assert isinstance(info, DeviceInfo) and info.index == 0 and backend.current_device() == 0


def test_the_seed_names_still_work(backend):
    rng = np.random.default_rng(5)
    values = rng.integers(-1000, 1000, size=8).astype(np.int32)
    add_one = _old("compile_kernel")(ADD_ONE)
    v = wb.to_device(values)
    _old("launch_kernel")(add_one, 1, 32, v, 8)
    wb.synchronize()
    np.testing.assert_array_equal(wb.to_host(v), values + 1)
    assert _old("check_available")() is compat.check_available()
    assert _old("device_name")() == backend.device_name()
    assert _old("compute_capability")() == tuple(backend.device_properties().compute_capability)
    free, total = _old("get_memory_info")()
    assert 0 <= free <= total == backend.memory_info()[1]


def test_the_old_stream_context_still_works(backend):
    s = wb.Stream(name="old form")
    with _old("stream")(s):
        assert wb.Stream.current().raw is s.raw
    assert wb.Stream.current().raw is not s.raw


# -- wb.backend and wb.device as context managers --------------------------------------------

@pytest.fixture
def two_simulators(private_simulator):
    """``(first, other)``: two simulator instances, ``first`` active."""
    other = private_simulator(memory_bytes=64 << 20)
    first = private_simulator()
    return first, other


def _add_one_on_active_backend(values):
    k = wb.compile(ADD_ONE, name="public_names")["add_one"]
    v = wb.to_device(values)
    k(v, len(values), grid=1, block=32)
    return wb.to_host(v)


def test_backend_in_a_with_statement_switches_for_the_block(two_simulators):
    first, other = two_simulators
    values = np.random.default_rng(6).integers(-50, 50, size=16).astype(np.int32)
    with wb.backend(other) as b:
        assert b is other and wb.backend() is other
        np.testing.assert_array_equal(_add_one_on_active_backend(values), values + 1)
        assert wb.timings().iloc[-1]["backend"] == "simulator"
    assert wb.backend() is first
    np.testing.assert_array_equal(_add_one_on_active_backend(values), values + 1)


def test_backend_blocks_nest_and_restore_after_an_error(two_simulators):
    first, other = two_simulators
    with pytest.raises(ZeroDivisionError):
        with wb.backend(other):
            with wb.backend(first):
                assert wb.backend() is first
            assert wb.backend() is other
            1 / 0
    assert wb.backend() is first


def test_backend_by_name_in_a_with_statement_restores_the_one_before(two_simulators):
    first, _ = two_simulators
    saved = dict(session._INSTANCES)
    try:
        with wb.backend("simulator", memory_bytes=32 << 20) as b:  # a new instance, by name
            assert wb.backend() is b and b is not first
        assert wb.backend() is first
    finally:
        for made in set(session._INSTANCES.values()) - set(saved.values()):
            made.close()
        session._INSTANCES.clear()
        session._INSTANCES.update(saved)


def test_backend_as_a_plain_call_switches_and_stays(two_simulators):
    first, other = two_simulators
    assert wb.backend(other) is other     # the plain call switches ...
    with wb.backend():                    # ... and a block of the active backend changes nothing
        assert wb.backend() is other
    assert wb.backend() is other


def test_device_as_a_call_and_in_a_with_statement(private_simulator):
    b = private_simulator(devices=3)
    assert b.current_device() == 0
    chosen = wb.device(2)                           # the plain call switches ...
    assert chosen.index == 2 and b.current_device() == 2
    assert wb.Stream().device == 2 and "wb.device 2" in repr(chosen)
    with wb.device(1) as inner:                     # ... the with form, for the block
        assert inner.index == 1 and b.current_device() == 1
        assert wb.Stream().device == 1
        with wb.device(0):
            assert b.current_device() == 0
        assert b.current_device() == 1
    assert b.current_device() == 2                  # the device before the block
    with pytest.raises(ZeroDivisionError):
        with wb.device(0):
            1 / 0
    assert b.current_device() == 2
    with pytest.raises(wb.DeviceError, match="No device 3.*3 devices"):
        wb.device(3)
    assert b.current_device() == 2
    wb.device(0)
