"""Shared fixtures: the ``backend`` fixture runs a test on every backend that
can run here (the simulator always, the GPU where CuPy sees one), and the
``gpu`` marker skips, with the reason, where there is no GPU."""
from __future__ import annotations

import pytest


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
    from workbench.runtime import session
    previous = session.active_backend_or_none()
    b = session.use_backend(request.param)
    try:
        yield b
    finally:
        session.restore_backend(previous)


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
    previous = session.active_backend_or_none()
    made = []

    def make(**options):
        b = SimulatorBackend(**options)
        made.append(b)
        return session.use_backend(b)
    try:
        yield make
    finally:
        for b in made:
            b.close()
        session.restore_backend(previous)
