"""The CUDA C++ of a cooperative ring: a persistent kernel launched with
``cudaLaunchCooperativeKernel`` (every block resident, guaranteed by the
launch, not inferred from occupancy) that answers messages in grid-wide
rounds, so that a handler may call ``cooperative_groups::this_grid().sync()``.

Each round has the phases of the ring-kernel design (poll, copy in, process,
copy out, publish), a grid-wide sync between each two:

1. *wait*: thread 0 of the grid polls the host's head and the stop flag (the
   others wait at the grid's barrier) and writes the round's last message
   number to device memory;
2. *copy in*: every thread copies its share of the round's requests (at most
   up to the queue's end: a round never wraps) from the mapped queue into a
   staging array in device memory, and zeroes the answers' staging array;
3. *handle*: the handler, by every thread of the grid. A batch handler,
   ``__device__ void handle_batch(const Request* in, Response* out, int count)``,
   is called once per round with the round's messages (``in[i]`` is message
   ``first + i``) and writes ``out[0..count)``, splitting the work by
   ``this_grid().thread_rank()`` and syncing the grid between its own steps. A
   per-message handler in a cooperative ring is called by every thread of
   the grid on each message in turn (a grid sync between two messages), so
   that it too may split the work and sync the grid; the answer kept is
   grid thread 0's;
4. *copy out*: the answers, from staging into the mapped queue, then a
   system-scope fence by every thread;
5. *publish*: each thread writes the stamps and the sequence word of its
   share of the round's messages; thread 0 goes back to waiting.

Four grid syncs a round: a cooperative ring is for work that needs the whole
grid at once, not for the lowest latency (``wb_ring_serve`` has that). The
same handler phase, launched once per batch (``wb_ring_batch``, cooperative
too), is the comparison a cooperative ring is measured against.
"""
from __future__ import annotations

from .codegen import COPY_BYTES, helpers_source

_ROUNDS = r"""
#include <cooperative_groups.h>

// Copy n bytes with every thread of the grid (8-byte words where both ends allow), reading
// through volatile loads: the source may be the host's memory, which L1 must not answer.
static __device__ __forceinline__ void wb_ring_spread_copy(void* to, const void* from,
        unsigned long long n, long long rank, long long size) {{
    if ((((unsigned long long)to | (unsigned long long)from | n) & 7) == 0) {{
        unsigned long long* t = (unsigned long long*)to;
        const volatile unsigned long long* f = (const volatile unsigned long long*)from;
        for (long long i = rank; i < (long long)(n / 8); i += size) t[i] = f[i];
    }} else {{
        unsigned char* t = (unsigned char*)to;
        const volatile unsigned char* f = (const volatile unsigned char*)from;
        for (long long i = rank; i < (long long)n; i += size) t[i] = f[i];
    }}
}}

static __device__ __forceinline__ void wb_ring_spread_zero(void* to, unsigned long long n,
        long long rank, long long size) {{
    unsigned char* t = (unsigned char*)to;
    for (long long i = rank; i < (long long)n; i += size) t[i] = 0;
}}

// The handler phase on messages in[0..count) (device memory), answers into out[0..count)
// (zeroed); stamps: the queue's stamps of these messages (per message), or null.
static __device__ __forceinline__ void wb_ring_handle_round(const {request}* in, {response}* out,
        long long count, unsigned long long* stamps, long long rank) {{
#if {batch}
    {handler}(in, out, (int)count);
#else
    namespace cg = cooperative_groups;
    for (long long i = 0; i < count; ++i) {{
        if (i) cg::this_grid().sync();  // every thread is done with the message before
        const unsigned long long t0 = wb_ring_now();
        {response} answer = {response}();
        {handler}(in[i], answer);
        if (rank == 0) {{
            out[i] = answer;
            if (stamps) {{
                stamps[2 * i] = t0;
                stamps[2 * i + 1] = wb_ring_now();
            }}
        }}
    }}
#endif
}}

// control[0]: stop flag, control[1]: the host's head (host memory; [2], [3]: the simulator's
// sleep); round[0]: the round's last message number, or -1 to stop; round[1], round[2]: the
// round's handler start and end (device memory); stage_in, stage_out: device memory for a
// queue's worth of requests and answers.
extern "C" __global__ void wb_ring_rounds(unsigned long long requests, unsigned long long responses,
                                          unsigned long long response_seq, unsigned long long stamps,
                                          unsigned long long control, unsigned long long device_round,
                                          long long capacity, unsigned long long stage_in,
                                          unsigned long long stage_out)
{{
    namespace cg = cooperative_groups;
    cg::grid_group grid = cg::this_grid();
    const {request}* req = (const {request}*)requests;
    {response}* resp = ({response}*)responses;
    long long* aseq = (long long*)response_seq;
    unsigned long long* stamp = (unsigned long long*)stamps;
    const long long* host = (const long long*)control;
    volatile long long* round = (volatile long long*)device_round;
    {request}* in = ({request}*)stage_in;
    {response}* out = ({response}*)stage_out;
    const long long rank = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long size = (long long)gridDim.x * blockDim.x;
    __syncthreads();  // (the simulator runs a block's threads as fibers from its first barrier on)
    long long done = 0;
    for (;;) {{
        if (rank == 0) {{  // 1. wait (everyone else waits at the grid's barrier)
            wb_ring_idle idle = {{}};
            long long h = done;
            for (;;) {{
                long long stop;
                wb_ring_load_control(host, stop, h);
                if (stop) {{
                    h = -1;
                    break;
                }}
                if (h > done) {{
                    wb_ring_fence_sys();
                    break;
                }}
                wb_ring_idle_wait(idle, host, true);
            }}
            wb_ring_busy(idle, host);
            round[0] = h;
        }}
        grid.sync();
        const long long last = round[0];
        if (last < 0) return;
        const long long first = done + 1, lo = first % capacity;
        long long count = last - done;
        if (count > capacity - lo) count = capacity - lo;  // (the rest: the next round)
        // 2. copy in
        wb_ring_spread_copy(in, req + lo, (unsigned long long)count * sizeof({request}), rank, size);
        wb_ring_spread_zero(out, (unsigned long long)count * sizeof({response}), rank, size);
        grid.sync();
        // 3. handle
        if (rank == 0) round[1] = wb_ring_now();
        wb_ring_handle_round(in, out, count, {batch} ? 0 : stamp + 2 * lo, rank);
        grid.sync();
        // 4. copy out
        if (rank == 0) round[2] = wb_ring_now();
        wb_ring_spread_copy(resp + lo, out, (unsigned long long)count * sizeof({response}), rank, size);
        __threadfence_system();
        grid.sync();
        // 5. publish
        const unsigned long long t0 = round[1], t1 = round[2];
        for (long long i = rank; i < count; i += size) {{
            if ({batch}) {{  // a batch's messages each carry the batch's time
                stamp[2 * (lo + i)] = t0;
                stamp[2 * (lo + i) + 1] = t1;
            }}
            wb_ring_store_sys(&aseq[lo + i], first + i);
        }}
        done += count;
    }}
}}

// One batch per (cooperative) launch: the handler phase on device arrays.
extern "C" __global__ void wb_ring_batch(unsigned long long requests, unsigned long long responses,
                                         long long n)
{{
    namespace cg = cooperative_groups;
    const long long rank = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long size = (long long)gridDim.x * blockDim.x;
    wb_ring_spread_zero((void*)responses, (unsigned long long)n * sizeof({response}), rank, size);
    cg::this_grid().sync();
    wb_ring_handle_round((const {request}*)requests, ({response}*)responses, n, 0, rank);
}}
"""


def rounds_source(handler: str, request: str, response: str, batch: bool) -> str:
    """The cooperative persistent kernel (``wb_ring_rounds``) and its
    per-launch comparison (``wb_ring_batch``) around ``handler``: a batch
    handler (``batch``) or a per-message one."""
    return helpers_source(handler) + _ROUNDS.format(handler=handler, request=request,
                                                    response=response, batch=int(bool(batch)))


def refuse_large_answers(response_bytes: int, batch: bool) -> str | None:
    """Why a cooperative ring cannot take these answers, or None: a
    per-message handler runs on every thread of the grid, each building an
    answer of its own, which must fit in a thread."""
    if batch or response_bytes <= COPY_BYTES:
        return None
    return (f"a cooperative ring's per-message handler runs on every thread of the grid, each "
            f"with an answer of its own, and answers of {response_bytes} bytes do not fit in a "
            f"thread (at most {COPY_BYTES}); use a batch handler (batch=True), which writes each "
            f"answer once, or a ring that is not cooperative")
