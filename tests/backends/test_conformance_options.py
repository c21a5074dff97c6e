"""Changing the simulator's options keeps what was made before: checked,
timeout_s and threads change in place (arrays, modules and kernels keep
working); a new device size makes a new backend, and then every message
says exactly that and what to do."""
import numpy as np
import pytest

import workbench as wb
from workbench.runtime import session

from helpers import using_backend

SOURCE = r'''
extern "C" __global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
'''


@pytest.fixture
def fresh_session():
    with using_backend():
        saved = dict(session._INSTANCES)
        session._INSTANCES.clear()
        try:
            yield
        finally:
            for b in session._INSTANCES.values():
                if b not in saved.values():
                    b.close()
            session._INSTANCES.clear()
            session._INSTANCES.update(saved)


def test_checked_and_timeout_change_in_place(fresh_session):
    b = wb.backend("simulator")
    k = wb.compile(SOURCE, name="options")["add_one"]
    x = wb.to_device(np.zeros(16, np.float32))
    assert wb.backend("simulator", checked=True, timeout_s=5) is b
    assert b.checked and b.timeout_s == 5
    k(x, 16, n=16)                                    # the kernel and array made before still work
    checked = wb.compile(SOURCE, name="options")["add_one"]
    assert checked.module.compiled.checked            # a new compile is checked
    checked(x, 16, n=16)
    assert wb.backend("simulator", checked=False) is b
    k(x, 16, n=16)
    assert wb.to_host(x).tolist() == [3.0] * 16
    assert wb.backend("simulator") is b               # no options: the same backend, as configured


def test_a_new_device_size_says_what_happened(fresh_session):
    wb.backend("simulator")
    k = wb.compile(SOURCE, name="options")["add_one"]
    x = wb.to_device(np.zeros(16, np.float32))
    wb.backend("simulator", memory_bytes=1 << 30)
    with pytest.raises(wb.LaunchConfigError) as info:
        k(x, 16, n=16)
    text = str(info.value)
    assert "another simulator backend" in text and "again" in text
    assert "the simulator backend but the active backend is simulator" not in text
    k2 = wb.compile(SOURCE, name="options")["add_one"]
    with pytest.raises(wb.KernelArgumentError, match="another simulator backend.*wb.to_device"):
        k2(x, 16, n=16)
    y = wb.to_device(np.array(x))
    k2(y, 16, n=16)
    assert wb.to_host(y).tolist() == [1.0] * 16
