"""Shared fixtures: the ``backend`` fixture runs a test on every backend that
can run here (the simulator always, the GPU where CuPy sees one), and the
``gpu`` marker skips, with the reason, where there is no GPU; ``simulator``
and ``gpu`` make one backend active for a test, ``tracking`` turns memory
tracking on, ``private_tuning_cache`` gives a test a tuning cache of its own.
Switching backends inside a test: ``with using_backend(...)`` (helpers.py)."""
from __future__ import annotations

import pytest

from helpers import using_backend


def _gpu_reason():
    """None when a GPU is usable, else why not (computed once)."""
    if not hasattr(_gpu_reason, "value"):
        from workbench.backends import gpu_unavailable_reason
        _gpu_reason.value = gpu_unavailable_reason()
    return _gpu_reason.value


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if "gpu" in item.keywords:
            if reason is None:
                reason = _gpu_reason() or ""
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {reason}"))


def _backend_params():
    return [pytest.param("simulator", id="sim"),
            pytest.param("cupy", id="gpu", marks=pytest.mark.gpu)]


@pytest.fixture(params=_backend_params())
def backend(request):
    """Make ``request.param`` the active backend for the test and yield it."""
    with using_backend(request.param) as b:
        yield b


@pytest.fixture
def simulator():
    """The simulator as the active backend for the test (the previous one back after)."""
    with using_backend("simulator") as b:
        yield b


@pytest.fixture
def gpu():
    """The GPU (CuPy) as the active backend for the test (the previous one back after)."""
    with using_backend("cupy") as b:
        yield b


@pytest.fixture
def tracking(backend):
    """Memory tracking on for the test on the active backend, off again afterwards."""
    import workbench as wb
    from workbench.memory.tracker import tracker
    wb.memory.tracking(True)
    assert tracker().backend is backend
    yield tracker()
    wb.memory.tracking(False)


@pytest.fixture
def private_tuning_cache(tmp_path, monkeypatch):
    """A tuning cache of the test's own (the compile caches stay shared: faster);
    yields the tuning cache module."""
    from workbench.cache import DiskCache
    from workbench.tuning import cache

    class Private(DiskCache):
        folder = tmp_path / "tuning"

    monkeypatch.setattr(cache, "_cache", Private("tuning"))
    return cache


@pytest.fixture
def shell():
    """A real IPython InteractiveShell with the workbench extension loaded."""
    from IPython.testing.globalipapp import get_ipython
    ip = get_ipython()
    ip.run_line_magic("load_ext", "workbench")
    yield ip


@pytest.fixture
def private_simulator():
    """A factory: ``private_simulator(**options)`` makes a new simulator the
    active backend for the test (closed and the previous backend restored after)."""
    from workbench.backends.simulator import SimulatorBackend
    from workbench.runtime import session
    made = []

    def make(**options):
        b = SimulatorBackend(**options)
        made.append(b)
        return session.use_backend(b)
    with using_backend():
        try:
            yield make
        finally:
            for b in made:
                b.close()
