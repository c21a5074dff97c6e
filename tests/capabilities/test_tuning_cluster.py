"""wb.tune and wb.sweep over Dask clusters of simulator workers with the
workbench's own device arrays as arguments: the results equal the local
ones (configurations, order, statuses), module variables set with
set_global reach the workers, and a cluster of four simulated devices (one
worker process each, as on a four-GPU host) equals the one-device tune."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb

pytestmark = pytest.mark.usefixtures("private_tuning_cache")

FAST = {"max_time": 0.005, "min_repeat": 3}
N = 512

AXPB = r"""
__constant__ float shift[1];
extern "C" __global__ void axpb(float* out, const float* x, float a, int n)
{
    int i = blockIdx.x * blockDim.x * U + threadIdx.x;
    for (int u = 0; u < U; ++u, i += blockDim.x)
        if (i < n) out[i] = (W == 3) ? 0.0f : a * x[i] + shift[0];   // W=3 is wrong
}
"""
SPACE = {"block": [64, 128, 4096], "U": [1, 2], "W": [1, 3]}
SHIFT = np.array([0.75], np.float32)


def _device_args():
    x = np.random.default_rng(2).standard_normal(N).astype(np.float32)
    return (wb.to_device(np.zeros(N, np.float32)), wb.to_device(x), np.float32(1.5),
            np.int32(N)), x


def _options(x):
    return dict(space=SPACE, constants={"shift": SHIFT},
                grid=lambda c: (-(-N // (c["block"] * c["U"])),),
                reference=lambda out, xs, a, n: 1.5 * x.astype(np.float64) + 0.75,
                cache=False, progress=False, **FAST)


def _same_rows(local, remote):
    columns = ["block", "U", "W", "status"]
    assert local.to_pandas()[columns].equals(remote.to_pandas()[columns])
    assert [r["reason"].split(":")[0] for r in local.rows] == \
        [r["reason"].split(":")[0] for r in remote.rows]


def _statuses(r):
    return {(row["config"]["block"], row["config"]["U"], row["config"]["W"]): row["status"]
            for row in r.rows}


def test_a_tune_with_device_arrays_on_a_cluster_equals_the_local_tune(monkeypatch, simulator):
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv("WORKBENCH_BACKEND", "simulator")
    args, x = _device_args()
    local = wb.tune(AXPB, args, **_options(x))
    statuses = _statuses(local)
    assert [statuses[(b, u, 1)] for b in (64, 128) for u in (1, 2)] == ["ok"] * 4
    assert [statuses[(b, u, 3)] for b in (64, 128) for u in (1, 2)] == ["check"] * 4
    assert {statuses[(4096, u, w)] for u in (1, 2) for w in (1, 3)} == {"restricted"}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = wb.tune(AXPB, args, client=client, **_options(x))
    assert remote.workers == 2
    _same_rows(local, remote)
    assert remote.best in [row["config"] for row in local.ok_rows()]


def test_four_simulated_devices_tune_as_one(monkeypatch, private_simulator):
    """WORKBENCH_SIM_DEVICES=4: wb.tuning.local_cluster() starts one worker per
    simulated device; the tune equals the one-device tune."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv("WORKBENCH_BACKEND", "simulator")
    monkeypatch.setenv("WORKBENCH_SIM_DEVICES", "4")
    private_simulator(devices=4)
    args, x = _device_args()
    local = wb.tune(AXPB, args, **_options(x))
    with wb.tuning.local_cluster() as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(4)
        remote = wb.tune(AXPB, args, client=client, **_options(x))
        again = wb.tune(AXPB, args, client=client, **_options(x))  # the same inputs, same client
    assert remote.workers == 4
    _same_rows(local, remote)
    _same_rows(local, again)
    measured = {row["device"] for row in remote.rows if "device" in row}
    assert measured <= {0, 1, 2, 3} and len(measured) > 1   # worker k measures on device k


def test_a_tunes_modules_are_made_per_device(private_simulator):
    """A GPU module loads on the device current where it is built: the tune's
    compile cache gives each device its own (a Dask worker measuring on device
    k once launched the module its compile had loaded on device 0)."""
    from workbench.tuning.task import Task, compile_config
    b = private_simulator(devices=2)
    task = Task(source=AXPB, kernel="axpb", template_params=(), config={"U": 1, "W": 1},
                kinds={"U": "define", "W": "define"})
    on_first, _, _ = compile_config(task)
    b.set_device(1)
    try:
        on_second, _, _ = compile_config(task)
        assert compile_config(task)[0] is on_second      # cached on its device
    finally:
        b.set_device(0)
    assert on_second is not on_first and compile_config(task)[0] is on_first


SCALED = r"""
__constant__ float gain[2];
extern "C" __global__ void scaled(float* out, const float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * gain[i % 2];
}
"""


def test_a_sweep_on_a_cluster_carries_set_global_values(monkeypatch, simulator):
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv("WORKBENCH_BACKEND", "simulator")
    module = wb.compile(SCALED)
    module.set_global("gain", [2.0, -3.0])
    k = module["scaled"]

    def setup(size):
        x = np.random.default_rng(size).standard_normal(size).astype(np.float32)
        return wb.to_device(np.zeros(size, np.float32)), wb.to_device(x), np.int32(size)

    def check(out, x, n):
        return wb.to_host(x) * np.resize(np.array([2.0, -3.0], np.float32), int(n))

    def run(out, x, n):
        k(out, x, n, n=int(n))

    options = dict(sizes=[64, 256], setup=setup, check=check, output=0, progress=False,
                   repeat=3)
    local = wb.sweep(run, **options)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = wb.sweep(run, client=client, **options)   # checked on the worker: gain was set
    assert list(remote["size"]) == list(local["size"]) == [64, 256]
