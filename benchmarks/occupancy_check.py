"""Check the occupancy calculator against the CUDA driver on a real GPU.

For several kernels with different register and shared-memory use, at every
block size from 32 to 1024 in steps of 32 and with several dynamic
shared-memory sizes (default limit, then opted in to the device's maximum),
compare ``wb.occupancy(kernel, block, shared_mem).active_blocks`` with
``cuOccupancyMaxActiveBlocksPerMultiprocessor``. Prints one row per kernel
and group with the number of mismatches, the first mismatches in detail,
and exits with status 1 if any required group has one.

    python benchmarks/occupancy_check.py            # needs a GPU and CuPy

Groups: "default" (dynamic shared memory up to the default 48 KiB limit),
"opt-in" (the kernel's max dynamic shared size raised to the device's
opt-in limit), "carveout" (a preferred L1/shared carve-out of 25 % and
50 %) are required to match; "beyond max threads" (blocks larger than the
kernel allows, e.g. past ``__launch_bounds__``) is informational.
"""
from __future__ import annotations

import sys

KIB = 1024

LIGHT = r"""
extern "C" __global__ void light(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

# NACC accumulators kept live across the loop: the register count grows with NACC.
HEAVY = r"""
extern "C" __global__ void heavy(const float* x, float* y, int n) {
    float acc[NACC];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    #pragma unroll
    for (int k = 0; k < NACC; ++k) acc[k] = x[(i + k * 97) % n];
    #pragma unroll
    for (int r = 0; r < 8; ++r) {
        #pragma unroll
        for (int k = 0; k < NACC; ++k) acc[k] = acc[k] * acc[(k + 1) % NACC] + 1.0f;
    }
    float s = 0.0f;
    #pragma unroll
    for (int k = 0; k < NACC; ++k) s += acc[k] * (float)k;
    if (i < n) y[i] = s;
}
"""

TILE = r"""
extern "C" __global__ void tile(const float* x, float* y, int n) {
    __shared__ float buf[SMEM_FLOATS];
    extern __shared__ float dyn[];
    int t = threadIdx.x;
    for (int k = t; k < SMEM_FLOATS; k += blockDim.x) buf[k] = x[k % n];
    __syncthreads();
    y[(blockIdx.x * blockDim.x + t) % n] = buf[(t * 7) % SMEM_FLOATS] + dyn[0];
}
"""

BOUNDED = r"""
extern "C" __global__ void __launch_bounds__(256, 2) bounded(const float* x, float* y, int n) {
    float acc[24];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    #pragma unroll
    for (int k = 0; k < 24; ++k) acc[k] = x[(i + k) % n];
    #pragma unroll
    for (int k = 1; k < 24; ++k) acc[0] += acc[k] * acc[k - 1];
    if (i < n) y[i] = acc[0];
}
"""

# (label, source, kernel name, defines, NVRTC options)
KERNELS = [
    ("light", LIGHT, "light", (), ()),
    ("heavy-16", HEAVY, "heavy", ("NACC=16",), ()),
    ("heavy-48", HEAVY, "heavy", ("NACC=48",), ()),
    ("heavy-96", HEAVY, "heavy", ("NACC=96",), ()),
    ("heavy-160-cap72", HEAVY, "heavy", ("NACC=160",), ("--maxrregcount=72",)),
    ("heavy-200", HEAVY, "heavy", ("NACC=200",), ()),
    ("tile-4KiB", TILE, "tile", ("SMEM_FLOATS=1024",), ()),
    ("tile-23KiB", TILE, "tile", ("SMEM_FLOATS=6000",), ()),
    ("tile-39KiB", TILE, "tile", ("SMEM_FLOATS=10000",), ()),
    ("bounded-256", BOUNDED, "bounded", (), ()),
]
REQUIRED = ("default", "opt-in", "carveout")


def driver_blocks(function, block: int, dynamic: int) -> int:
    """The CUDA driver's answer (0 where it refuses the configuration)."""
    from cupy.cuda import driver
    try:
        return driver.occupancyMaxActiveBlocksPerMultiprocessor(function.kernel.ptr, block, dynamic)
    except driver.CUDADriverError:
        return 0


def check_kernel(wb, label, kernel, props):
    """Yield (group, block, dynamic, driver, ours, occupancy) for every configuration."""
    fn = kernel.function
    static = kernel.resources.shared_bytes or 0
    max_threads = kernel.resources.max_threads_per_block or 1024
    default_max = props.shared_memory_per_block - static
    optin_max = props.shared_memory_per_block_optin - static
    blocks = range(32, 1025, 32)

    def run(group, dynamics):
        for block in blocks:
            g = group if block <= max_threads else "beyond max threads"
            for dynamic in dynamics:
                occ = wb.occupancy(kernel, block=block, shared_mem=dynamic)
                yield g, block, dynamic, driver_blocks(fn, block, dynamic), occ.active_blocks, occ

    yield from run("default", sorted({0, 1000, 8 * KIB, 32 * KIB, default_max}))
    fn.max_dynamic_shared_size_bytes = optin_max
    try:
        yield from run("opt-in", sorted({d for d in (64 * KIB, 100 * KIB, 160 * KIB, optin_max)
                                         if d <= optin_max}))
    finally:
        fn.max_dynamic_shared_size_bytes = default_max
    for percent in (25, 50):
        fn.preferred_shared_memory_carveout = percent
        try:
            yield from run("carveout", (0, 8 * KIB, 20 * KIB))
        finally:
            fn.preferred_shared_memory_carveout = -1


def main() -> int:
    import workbench as wb
    from cupy.cuda import driver

    b = wb.backend("cupy")
    props = b.device_properties()
    print(f"Device: {props.name} (cc {props.compute_capability[0]}.{props.compute_capability[1]}), "
          f"{props.shared_memory_per_multiprocessor // KIB} KiB shared per SM, "
          f"opt-in {props.shared_memory_per_block_optin // KIB} KiB per block, "
          f"reserve {props.extra.get('reservedSharedMemPerBlock')} B")
    rows, mismatches = [], []
    for label, source, name, defines, options in KERNELS:
        module = wb.compile(source, name=f"occcheck-{label}", defines=defines, options=options)
        kernel = module[name]
        r = kernel.resources
        counts: dict = {}
        for group, block, dynamic, theirs, ours, occ in check_kernel(wb, label, kernel, props):
            total, bad = counts.get(group, (0, 0))
            ok = theirs == ours
            counts[group] = (total + 1, bad + (not ok))
            if not ok:
                mismatches.append((label, group, block, dynamic, theirs, ours, occ.limits, occ.binding))
        _, cuda_block = driver.occupancyMaxPotentialBlockSize(kernel.function.kernel.ptr, 0, 0)
        ours_block = wb.occupancy(kernel, shared_mem=0).block
        for group, (total, bad) in counts.items():
            rows.append((label, r.registers, r.shared_bytes, r.max_threads_per_block, group, total, bad,
                         f"{ours_block}/{cuda_block}"))

    header = ("kernel", "regs", "static smem", "max threads", "group", "configs", "mismatches",
              "suggested block ours/CUDA")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    required = sum(r[6] for r in rows if r[4] in REQUIRED)
    informational = sum(r[6] for r in rows if r[4] not in REQUIRED)
    configs = sum(r[5] for r in rows if r[4] in REQUIRED)
    print(f"\nmismatches = {required} of {configs} required configurations"
          f" ({informational} in informational groups)")
    for m in mismatches[:25]:
        label, group, block, dynamic, theirs, ours, limits, binding = m
        print(f"  MISMATCH {label} [{group}] block={block} dynamic={dynamic}: driver={theirs} "
              f"ours={ours} limits={limits} binding={binding}")
    return 1 if required else 0


if __name__ == "__main__":
    sys.exit(main())
