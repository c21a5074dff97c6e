"""Tunes and sweeps spread over every GPU of one host, and the copies between them.

    python benchmarks/multi_gpu.py            # every device of the active backend
    WORKBENCH_SIM_DEVICES=4 python benchmarks/multi_gpu.py --quick   # the simulator's virtual
                                              # devices, 16 configurations and points

Targets (PASS/MISS beside each on GPUs; the simulator's times carry no verdict):

    a tune of 256 configurations on N GPUs (Dask, one measuring worker per GPU)
        the same configurations and statuses as on one GPU; 4 GPUs <= 0.3x one GPU's wall time
    a sweep of 256 points likewise                                4 GPUs <= 0.3x one GPU's
    peer access, peer copy bandwidth (GB/s) and host <-> device bandwidth, every pair

The tune measures ``spin``, a kernel whose time is a known function of its block size, a
``-D`` define and a template argument (tens of microseconds a launch, each configuration
measured for 50 ms): the measurements dominate, as in a real tune of slow kernels. Each
cluster's workers first run an untimed tune (their CUDA contexts made, every configuration
compiled and loaded), so every timed run finds them in the compile cache and the figures
compare measuring alone, as the sweep's figures do. 1, 2, 4, ... GPUs:
every power of two up to the device count, and the device count.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import workbench as wb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import print_table  # noqa: E402
from tuning import SPIN  # noqa: E402  (its time a known function of block, A and B)

SWEEP_SPIN = r"""
__global__ void spin_for(float* out, long long cycles)
{
    if (threadIdx.x == 0) {
        const long long start = clock64();
        while (clock64() - start < cycles) { }
        out[blockIdx.x] = 1.0f;
    }
}
"""
#: 16 x 4 x 4 = 256 configurations (--quick: 16).
SPACE = {"block": [32 * k for k in range(1, 17)], "A": [3, 4, 5, 6], "B": [1, 2, 3, 4]}
QUICK_SPACE = {"block": [64, 128, 256, 512], "A": [4, 5], "B": [2, 3]}
MEASURE = {"max_time": 0.05, "min_repeat": 3, "warmup_time": 0.0}
#: The sweep's points: 32 block sizes x 8 lengths of spin = 256 (--quick: 16).
SWEEP = {"block": [32 * k for k in range(1, 33)], "cycles": [10_000 * k for k in range(1, 9)]}
QUICK_SWEEP = {"block": [64, 128, 256, 512], "cycles": [10_000, 20_000, 30_000, 40_000]}

_COMPILED = {}


def spin_point(block: int, cycles: int) -> None:
    """One launch of the sweep's spin kernel (compiled once per worker process)."""
    if not _COMPILED:
        _COMPILED["kernel"] = wb.compile(SWEEP_SPIN)["spin_for"]
        _COMPILED["out"] = wb.to_device(np.zeros(4, np.float32))
    _COMPILED["kernel"](_COMPILED["out"], np.int64(cycles), grid=4, block=block)


def counts(device_count: int) -> list[int]:
    n, out = 1, []
    while n < device_count:
        out.append(n)
        n *= 2
    return out + [device_count]


def tunes(simulated: bool, device_count: int, space: dict) -> list[list]:
    from distributed import Client
    args = (np.zeros(4, np.float32), np.int64(20_000))
    options = dict(space=space, grid=4, cache=False, progress=False, reference=None)
    walls, results = {}, {}
    for n in counts(device_count):
        with wb.tuning.local_cluster(n) as cluster, Client(cluster) as client:
            client.wait_for_workers(n)
            # untimed, on these workers: their CUDA contexts and every configuration's
            # module made, as the sweep's client.run makes its kernel
            wb.tune(SPIN, args, client=client, max_time=0.001, min_repeat=1, **options)
            start = time.perf_counter()
            results[n] = wb.tune(SPIN, args, client=client, **MEASURE, **options)
            walls[n] = time.perf_counter() - start
    def outcome(result):
        return {tuple(sorted(r["config"].items())): r["status"] for r in result.rows}

    one = results[1]
    rows = []
    for n in walls:
        here = outcome(results[n])
        differ = {k: (v, here.get(k)) for k, v in outcome(one).items() if here.get(k) != v}
        same = not differ and len(results[n].rows) == len(one.rows)
        if differ:   # which, and how: (on one device, on n)
            print(f"{n} devices: {len(differ)} configurations differ, e.g. {next(iter(differ.items()))}")
        ratio = walls[n] / walls[1]
        target = 0.3 if n == 4 else 1.0 / n + 0.1 if n > 1 else None
        verdict = "" if simulated or target is None else ("PASS" if ratio <= target and same else "MISS")
        rows.append([f"tune of {len(one.rows)} configurations on {n} device(s)",
                     f"{walls[n]:.1f} s, {ratio:.2f}x one device's; best {results[n].best}",
                     f"same configurations and statuses: {same}",
                     f"<= {target:.2f}x" if target else "", verdict])
    return rows


def sweeps(simulated: bool, device_count: int, points: dict) -> list[list]:
    from distributed import Client
    walls, tables = {}, {}
    for n in counts(device_count):
        with wb.tuning.local_cluster(n) as cluster, Client(cluster) as client:
            client.wait_for_workers(n)
            client.run(spin_point, 32, 1000)                      # compiles on every worker
            start = time.perf_counter()
            tables[n] = wb.sweep(spin_point, params=points, client=client, progress=False,
                                 ceilings=False, max_time=0.02, min_repeat=3)
            walls[n] = time.perf_counter() - start
    rows = []
    for n in walls:
        ratio = walls[n] / walls[1]
        target = 0.3 if n == 4 else 1.0 / n + 0.1 if n > 1 else None
        verdict = "" if simulated or target is None else ("PASS" if ratio <= target else "MISS")
        rows.append([f"sweep of {len(tables[n])} points on {n} device(s)",
                     f"{walls[n]:.1f} s, {ratio:.2f}x one device's", "",
                     f"<= {target:.2f}x" if target else "", verdict])
    return rows


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    b = wb.backend()
    simulated = bool(b.simulated)
    n = b.device_count()
    print(f"backend: {b.name}, {n} device(s): {b.device_properties().name}"
          + ("  [simulated: CPU wall-clock times, no verdicts]" if simulated else ""))
    if n < 2:
        print("needs two devices or more (WORKBENCH_SIM_DEVICES=4 on the simulator)")
        return
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        print(f"needs dask and distributed: pip install 'cuda-workbench[tune]' ({exc})")
    else:
        print_table(f"Tunes and sweeps over {n} devices (Dask, one measuring worker a device)",
                    ["what", "figure", "check", "target", "verdict"],
                    tunes(simulated, n, QUICK_SPACE if quick else SPACE)
                    + sweeps(simulated, n, QUICK_SWEEP if quick else SWEEP))
    for figure in (wb.peer_matrix(), wb.peer_bandwidth(), wb.host_bandwidth()):
        print()
        print(figure)


if __name__ == "__main__":
    main()
