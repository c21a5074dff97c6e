"""The sanitizer's planted bugs, and correct kernels that must stay clean.

Each case is one launch of a kernel of :data:`SOURCE` under one tool (or, for
``tool=None``, schedules explored on the simulator), with seeded inputs made
the same way in every process. ``expect`` is the verdict the simulator must
give (``"error"``, ``"warning"``, ``"clean"``) and ``lines()`` the lines its
findings must name (marked ``// @case`` in the source); ``gpu`` is what
compute-sanitizer is expected to say where it differs, with ``why``.
``tests/capabilities/test_sanitizer_cases.py`` runs every case on the
simulator; ``benchmarks/sanitize_vs_gpu.py`` runs them on a GPU beside
compute-sanitizer.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import workbench as wb

SOURCE = r"""
// racecheck: planted bugs --------------------------------------------------------
extern "C" __global__ void race_missing_sync(const float* x, float* out) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * 256 + t];                          // @race_missing_sync
    out[blockIdx.x * 256 + t] = s[255 - t];                  // @race_missing_sync
}
extern "C" __global__ void race_tree(float* x, float* out) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * 256 + t];
    __syncthreads();
    for (int stride = 128; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];               // @race_tree
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
extern "C" __global__ void race_warp_unrolled(const float* x, float* out) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = x[t];
    __syncthreads();
    if (t < 32) {
        volatile float* v = s;
        v[t] += v[t + 32];                                   // @race_warp_unrolled
        v[t] += v[t + 16];                                   // @race_warp_unrolled
        v[t] += v[t + 8];                                    // @race_warp_unrolled
        v[t] += v[t + 4];                                    // @race_warp_unrolled
        v[t] += v[t + 2];                                    // @race_warp_unrolled
        v[t] += v[t + 1];                                    // @race_warp_unrolled
    }
    if (t == 0) out[0] = s[0];
}
extern "C" __global__ void race_last_writer(float* out) {
    __shared__ int last;
    last = threadIdx.x;                                      // @race_last_writer
    __syncthreads();
    out[threadIdx.x] = (float)last;
}
extern "C" __global__ void race_tile_reuse(const float* x, float* out, int tiles) {
    __shared__ float tile[128];
    int t = threadIdx.x;
    float acc = 0.0f;
    for (int k = 0; k < tiles; ++k) {
        tile[t] = x[k * 128 + t];                            // @race_tile_reuse
        __syncthreads();
        acc += tile[127 - t];                                // @race_tile_reuse
    }
    out[t] = acc;
}

// racecheck: correct kernels -----------------------------------------------------
extern "C" __global__ void reduce_block(const float* x, float* out) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = x[blockIdx.x * 256 + t];
    __syncthreads();
    for (int stride = 128; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
extern "C" __global__ void reduce_shuffle(const float* x, float* out) {
    __shared__ float partial[32];
    int t = threadIdx.x;
    float v = x[blockIdx.x * blockDim.x + t];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((t & 31) == 0) partial[t >> 5] = v;
    __syncthreads();
    if (t < 32) {
        v = t < (int)(blockDim.x >> 5) ? partial[t] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (t == 0) out[blockIdx.x] = v;
    }
}
extern "C" __global__ void reduce_warp_synced(const float* x, float* out) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = x[t];
    __syncthreads();
    if (t < 32) {
        float v = s[t] + s[t + 32];
        s[t] = v;
        __syncwarp();
        for (int o = 16; o > 0; o >>= 1) {
            if (t < o) v += s[t + o];
            __syncwarp();
            if (t < o) s[t] = v;
            __syncwarp();
        }
        if (t == 0) out[0] = s[0];
    }
}
extern "C" __global__ void flag_same_value(const float* x, int* out) {
    __shared__ int found;
    if (threadIdx.x == 0) found = 0;
    __syncthreads();
    if (x[blockIdx.x * blockDim.x + threadIdx.x] > 0.5f) found = 1;
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = found;
}
extern "C" __global__ void histogram_shared(const unsigned char* x, unsigned* bins, int n) {
    __shared__ unsigned h[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) h[i] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&h[x[i]], 1u);
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x) atomicAdd(&bins[i], h[i]);
}

// synccheck --------------------------------------------------------------------
extern "C" __global__ void syncwarp_bad_mask(float* out) {
    __shared__ float s[32];
    int t = threadIdx.x;
    unsigned mask = __ballot_sync(0xffffffffu, t < 16);
    if (t <= 16) {
        s[t] = (float)t;
        __syncwarp(mask);                                    // @syncwarp_bad_mask
        out[t] = s[15 - (t & 15)];
    }
}
extern "C" __global__ void syncthreads_partial(const float* x, float* out, int n) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = 0.0f;
    __syncthreads();
    for (int b = 0; b < 4; ++b) {
        int i = b * 64 + t;
        if (i < n) {
            s[t] += x[i];
            __syncthreads();
        }
    }
    if (t == 0) {
        float sum = 0.0f;
        for (int k = 0; k < 64; ++k) sum += s[k];
        out[0] = sum;
    }
}

// initcheck and memcheck --------------------------------------------------------
extern "C" __global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];                           // @uninit_allocate @uninit_memset_short
}
extern "C" __global__ void fill(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = (float)i;
}
extern "C" __global__ void write_past_end(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) y[i] = 1.0f;                                 // @write_past_end
}
extern "C" __global__ void write_far(float* y, long long stride) {
    y[threadIdx.x * stride] = 1.0f;                          // @write_far
}
extern "C" __global__ void shared_overflow(float* out) {
    __shared__ float s[32];
    s[threadIdx.x * 8] = (float)threadIdx.x;                 // @shared_overflow
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x & 31];
}
extern "C" __global__ void misaligned_store(float* y) {
    float* q = (float*)((char*)y + 2);
    q[threadIdx.x] = 1.0f;                                   // @misaligned_store
}
extern "C" __global__ void local_overflow(float* y, int k) {
    float a[8];
    for (int i = 0; i < 8; ++i) a[i] = y[i];
    y[threadIdx.x] = a[(threadIdx.x + k) & 15];              // @local_overflow
}

// schedules ----------------------------------------------------------------------
extern "C" __global__ void global_race(const float* x, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i / 64] = x[i];
}
"""


@dataclass
class Case:
    """One launch: ``kernel`` of :data:`SOURCE` with the arguments ``make()``
    returns (a tuple, and the launch options) under ``tool``."""

    name: str
    tool: str | None
    kernel: str
    make: Callable
    expect: str
    gpu: str | None = None          # compute-sanitizer's expected verdict, where it differs
    why: str = ""
    schedules: int = 0
    marker: str = ""                # the marker of its lines (default: the name)
    tags: tuple = field(default=())

    def lines(self) -> tuple:
        """The lines of :data:`SOURCE` the findings must name."""
        mark = "@" + (self.marker or self.name)
        return tuple(i for i, text in enumerate(SOURCE.splitlines(), 1)
                     if re.search(re.escape(mark) + r"\b", text))


def _rng():
    return np.random.default_rng(7)


def _x(n=1024):
    return wb.to_device(_rng().random(n, dtype=np.float32))


def _out(n=1024):
    return wb.xp.zeros(n, dtype=np.float32)


def _uninitialised(n=1024):
    return wb.allocate(n, np.float32)


def _memset_short(n=1024):
    a = wb.allocate(n, np.float32)
    wb.memset(a.view(np.uint8)[:n], 0)  # n bytes, not n floats: the classic missing sizeof
    return a


def _host_written(n=1024):
    a = wb.allocate(n, np.float32)
    a[...] = 1.0  # an assignment the workbench cannot see: counts as written
    return a


def _kernel_written(n=1024):
    a = wb.allocate(n, np.float32)
    module()["fill"](a, n, grid=n // 256, block=256)  # a launch initcheck did not watch
    return a


def _copied(n=1024):
    a = wb.allocate(n, np.float32)
    wb.copy(a, _rng().random(n, dtype=np.float32))
    return a


def _bytes(n=4096):
    return wb.to_device(_rng().integers(0, 256, n, dtype=np.uint8))


def cases() -> list[Case]:
    """Every case, in the order of the table."""
    one = {"grid": 1, "block": 256}
    four = {"grid": 4, "block": 256}
    return [
        # racecheck: bugs
        Case("race_missing_sync", "racecheck", "race_missing_sync",
             lambda: ((_x(), _out()), four), "error"),
        Case("race_tree", "racecheck", "race_tree", lambda: ((_x(), _out(4)), four), "error"),
        Case("race_warp_unrolled", "racecheck", "race_warp_unrolled",
             lambda: ((_x(64), _out(1)), {"grid": 1, "block": 64}), "warning"),
        Case("race_last_writer", "racecheck", "race_last_writer", lambda: ((_out(256),), one),
             "error"),
        Case("race_tile_reuse", "racecheck", "race_tile_reuse",
             lambda: ((_x(512), _out(128), 4), {"grid": 1, "block": 128}), "error"),
        # racecheck: correct kernels
        Case("reduce_block", "racecheck", "reduce_block", lambda: ((_x(), _out(4)), four), "clean"),
        Case("reduce_shuffle", "racecheck", "reduce_shuffle", lambda: ((_x(), _out(4)), four),
             "clean"),
        Case("reduce_warp_synced", "racecheck", "reduce_warp_synced",
             lambda: ((_x(64), _out(1)), {"grid": 1, "block": 64}), "clean"),
        Case("flag_same_value", "racecheck", "flag_same_value",
             lambda: ((_x(), wb.xp.zeros(4, dtype=np.int32)), four), "clean",
             why="writes that leave the value as it was are 'info' hazards, not shown"),
        Case("histogram_shared", "racecheck", "histogram_shared",
             lambda: ((_bytes(), wb.xp.zeros(256, dtype=np.uint32), 4096), four), "clean"),
        # synccheck
        Case("syncwarp_bad_mask", "synccheck", "syncwarp_bad_mask",
             lambda: ((_out(32),), {"grid": 1, "block": 32}), "error"),
        Case("syncthreads_partial", "synccheck", "syncthreads_partial",
             lambda: ((_x(256), _out(1), 240), {"grid": 1, "block": 64}), "clean",
             why="a __syncthreads that part of the block skips is no error from sm_70 on"),
        Case("reduce_warp_synced (synccheck)", "synccheck", "reduce_warp_synced",
             lambda: ((_x(64), _out(1)), {"grid": 1, "block": 64}), "clean"),
        Case("reduce_shuffle (synccheck)", "synccheck", "reduce_shuffle",
             lambda: ((_x(), _out(4)), four), "clean"),
        # initcheck
        Case("uninit_allocate", "initcheck", "scale",
             lambda: ((_uninitialised(), _out(), 1024), four), "error"),
        Case("uninit_memset_short", "initcheck", "scale",
             lambda: ((_memset_short(), _out(), 1024), four), "error"),
        Case("init_zeros", "initcheck", "scale",
             lambda: ((wb.xp.zeros(1024, dtype=np.float32), _out(), 1024), four), "clean"),
        Case("init_copied", "initcheck", "scale", lambda: ((_copied(), _out(), 1024), four),
             "clean"),
        Case("init_host_write", "initcheck", "scale",
             lambda: ((_host_written(), _out(), 1024), four), "clean",
             why="a NumPy/CuPy assignment counts as a write of the whole array"),
        Case("init_kernel_write", "initcheck", "scale",
             lambda: ((_kernel_written(), _out(), 1024), four), "clean",
             why="an unwatched launch that changed the array counts as a write of all of it"),
        Case("init_output_only", "initcheck", "fill",
             lambda: ((_uninitialised(), 1024), four), "clean"),
        # memcheck
        Case("write_past_end", "memcheck", "write_past_end",
             lambda: ((wb.xp.zeros(1000, dtype=np.float32), 1000), four), "error", gpu="clean",
             why="one element past an allocation lies in the GPU allocator's rounding: "
                 "compute-sanitizer does not see it; the simulator does"),
        Case("write_far", "memcheck", "write_far",
             lambda: ((_out(32), 1 << 28), {"grid": 1, "block": 32}), "error"),
        Case("shared_overflow", "memcheck", "shared_overflow",
             lambda: ((_out(64),), {"grid": 1, "block": 32}), "error"),
        Case("misaligned_store", "memcheck", "misaligned_store",
             lambda: ((_out(64),), {"grid": 1, "block": 32}), "error"),
        Case("local_overflow", "memcheck", "local_overflow",
             lambda: ((_out(64), 4), {"grid": 1, "block": 32}), "error", gpu="clean",
             why="a thread's array past its end is still the thread's local memory on a GPU; "
                 "AddressSanitizer knows the array's bounds"),
        Case("reduce_block (memcheck)", "memcheck", "reduce_block",
             lambda: ((_x(), _out(4)), four), "clean"),
        Case("scale (memcheck)", "memcheck", "scale", lambda: ((_x(), _out(), 1024), four),
             "clean"),
        # schedules (the simulator only)
        Case("global_race", None, "global_race", lambda: ((_x(), _out(16)), four), "error",
             schedules=4, gpu="n/a", why="schedules are explored on the simulator"),
        Case("scale (schedules)", None, "scale", lambda: ((_x(), _out(), 1024), four), "clean",
             schedules=4, gpu="n/a", why="schedules are explored on the simulator"),
    ]


_MODULES: dict = {}


def module():
    """:data:`SOURCE` compiled on the active backend (once per backend)."""
    b = wb.backend()
    found = _MODULES.get(id(b))
    if found is None or found[0] is not b:
        found = _MODULES[id(b)] = (b, wb.compile(SOURCE, name="sanitize_cases"))
    return found[1]


def run(case: Case):
    """The case's :class:`~workbench.profiling.SanitizerReport` on the active backend."""
    args, launch = case.make()
    return wb.sanitize(module()[case.kernel], *args, tool=case.tool, schedules=case.schedules,
                       **launch)


def found_lines(report) -> tuple:
    """The source lines a report's findings name (one or two each)."""
    return tuple(sorted({n for f in report.findings for n in f.lines}))
