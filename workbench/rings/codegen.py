"""The CUDA C++ a ring adds to the user's source: the persistent kernel around
the handler, a kernel that answers one batch per launch (for comparison), and
a probe that reports the message structs' layout as the compiler lays them out
(:mod:`workbench.core.layouts`).
(A cooperative ring's kernels, which run in grid-wide rounds, are in
:mod:`~workbench.rings.cooperative`; the helpers here are shared.)

The persistent kernel (``wb_ring_serve``): worker ``w`` (every thread but the
first warp) answers messages ``w + 1, w + 1 + W, w + 1 + 2W...`` (``W``
workers), message ``s`` living in slot ``s % capacity`` of the request and
response arrays. The host writes a batch's requests, then the last sequence
number it sent (the head) into host memory. The first warp, the dispatcher,
polls that head and the stop flag over the bus (lane 0, both in flight at
once) and copies the head into device memory; every other thread polls only
the device copy (cheap, in L2), so the bus carries one poll at a time instead
of one per thread, which would flood it and slow every copy. (A second poller
of the host's head, the thread whose message comes next, once saved a single
message 0.7 µs but made every batch of 4 or more 1-2 µs slower: two polls of
one host line slow each other down.) A thread whose message is published (an
acquire chain: host store, dispatcher, device copy) takes it, calls the
handler, writes the response and its device timestamps, then publishes ``s``
as the slot's response number (a release store). A copy of -1 stops every
thread. A message of up to ``COPY_BYTES`` is copied into the thread first and
its answer built there; a larger one is read where it lies and answered in
place (zeroed first, as a local answer is): a thread's stack holds no more.

``call()`` takes a shorter path where the messages are small enough (see
:func:`call_box`) and the host has the C words module: the host writes its
one message into the *call box*, 8-byte words of 4 bytes of the message and a
4-byte flag made from its number (NCCL's "LL" format: an aligned 8-byte word
is written and read whole, so a word with the flag holds its data). The
dispatcher's lanes read the box in the same poll as the head (each lane 16
bytes, one instruction); when every flag is the next number's, lane 0 calls
the handler and the lanes write the answer and the handler's ns to the
*answer box* in the same format (the host, seeing every flag, has every byte,
with no fence on the way). Its next poll goes out at once; while it is in
flight, the dispatcher writes the answer to the slot as well (so ``recv()``
finds a late one), the number into the slot's *mark* (device memory), and
publishes the number in the device copy. That write ends in a system-scope
release, some 0.7 µs on an H100, which before delayed the next poll by as
much; the host publishes no head before it, so that poll reads no head. The
message's own thread, finding the mark at or past its number, passes it over.
About a bus round trip and a system fence less than the slot's path
(``docs/rings.md`` has the figures).

On the simulator the dispatcher, once it has had nothing to do for a while
(``SIM_SPIN_NS``) and every message published has been taken, says so in
the control words and sleeps on a futex until the host rings (the words
module's ``ring_bell``, or 2 ms pass), instead of polling with a sleep in
every round.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# the layout probe (shared with module variables of struct type): the ring compiles it into its module
from ..core.layouts import expected_layout, probe_fields, probe_source  # noqa: F401

#: Flag bit of the boxes' words: a flag is never 0, a cleared box's.
BOX_FLAG_BIT = 0x80000000


@dataclass(frozen=True)
class CallBox:
    """call()'s boxes for a ring's messages: the request's 4-byte data words,
    and the answer's (the response's, then the handler's time in ns as two).
    Each lane of the dispatching warp reads or writes two (16 bytes)."""
    request_words: int
    answer_words: int

    @property
    def request_lanes(self) -> int:
        return -(-self.request_words // 2)

    @property
    def answer_lanes(self) -> int:
        return -(-self.answer_words // 2)

    @property
    def lanes(self) -> int:
        return max(self.request_lanes, self.answer_lanes)

    @property
    def request_bytes(self) -> int:
        return 16 * self.request_lanes

    @property
    def answer_bytes(self) -> int:
        return 16 * self.answer_lanes


def call_box(request: np.dtype, response: np.dtype) -> CallBox | None:
    """The call box for these messages, or None where they are too large for
    one warp's lanes (requests up to 256 bytes, responses up to 248): call()
    then takes a slot."""
    box = CallBox(request_words=-(-request.itemsize // 4),
                  answer_words=-(-response.itemsize // 4) + 2)
    return box if box.lanes <= 32 else None


#: Messages (and answers) up to this many bytes are copied into the thread that
#: handles them; larger ones are handled where they lie (a thread's stack holds no more).
COPY_BYTES = 1024
#: On the simulator the dispatcher polls this long with nothing to do before it sleeps.
SIM_SPIN_NS = 1000000

HELPERS = r"""
// ---- generated by workbench.rings (the ring around {handler}) ----
#ifdef __WBSIM__
static inline long long wb_ring_load_sys(const long long* p) {{ return __atomic_load_n(p, __ATOMIC_ACQUIRE); }}
static inline long long wb_ring_load_relaxed_sys(const long long* p) {{ return __atomic_load_n(p, __ATOMIC_RELAXED); }}
static inline long long wb_ring_load_gpu(const long long* p) {{ return __atomic_load_n(p, __ATOMIC_ACQUIRE); }}
static inline void wb_ring_store_sys(long long* p, long long v) {{ __atomic_store_n(p, v, __ATOMIC_RELEASE); }}
static inline void wb_ring_store_gpu(long long* p, long long v) {{ __atomic_store_n(p, v, __ATOMIC_RELEASE); }}
static inline unsigned long long wb_ring_now() {{ return __globaltimer(); }}
// __nanosleep lets the block's other threads (fibers) run
static inline void wb_ring_backoff(unsigned ns) {{ __nanosleep(ns); }}
// The dispatcher's idle wait. control[2]: it sleeps (set by it, cleared by the host); control[3]
// (its low half): the bell, which the host counts up before it wakes the sleeper.
struct wb_ring_idle {{ unsigned long long since; unsigned bell; int armed; }};
static inline void wb_ring_busy(wb_ring_idle& s, const long long* control) {{
    s.since = 0;
    if (s.armed) {{
        s.armed = 0;
        __atomic_store_n((long long*)&control[2], 0, __ATOMIC_SEQ_CST);
    }}
}}
// Nothing new in a poll: let the block's other threads run and offer the CPU (the host may be
// waiting for it); after {sim_spin_ns} ns of that, and only when may_sleep (nothing published
// is still being handled by a thread of this block, which the sleep would stop too): say
// "asleep", look once more (the next poll), then sleep on the bell for at most 2 ms.
static inline void wb_ring_idle_wait(wb_ring_idle& s, const long long* control, bool may_sleep) {{
    if (s.armed) {{
        wbsim_wait_word((const unsigned*)&control[3], s.bell, 2000);
        wb_ring_busy(s, control);
        return;
    }}
    __nanosleep(0);
    wbsim_yield_cpu();
    const unsigned long long now = __globaltimer();
    if (!s.since) {{
        s.since = now;
    }} else if (may_sleep && now - s.since > {sim_spin_ns}ull) {{
        s.bell = __atomic_load_n((const unsigned*)&control[3], __ATOMIC_SEQ_CST);
        __atomic_store_n((long long*)&control[2], 1, __ATOMIC_SEQ_CST);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        s.armed = 1;
    }}
}}
#else
static __device__ __forceinline__ long long wb_ring_load_sys(const long long* p) {{
    long long v;
    asm volatile("ld.acquire.sys.global.s64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}}
static __device__ __forceinline__ long long wb_ring_load_relaxed_sys(const long long* p) {{
    long long v;
    asm volatile("ld.relaxed.sys.global.s64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}}
static __device__ __forceinline__ long long wb_ring_load_gpu(const long long* p) {{
    long long v;
    asm volatile("ld.acquire.gpu.global.s64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}}
static __device__ __forceinline__ void wb_ring_store_sys(long long* p, long long v) {{
    asm volatile("st.release.sys.global.s64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}}
static __device__ __forceinline__ void wb_ring_store_gpu(long long* p, long long v) {{
    asm volatile("st.release.gpu.global.s64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}}
static __device__ __forceinline__ unsigned long long wb_ring_now() {{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}}
static __device__ __forceinline__ void wb_ring_backoff(unsigned ns) {{ __nanosleep(ns); }}
struct wb_ring_idle {{ int unused; }};
static __device__ __forceinline__ void wb_ring_busy(wb_ring_idle&, const long long*) {{}}
static __device__ __forceinline__ void wb_ring_idle_wait(wb_ring_idle&, const long long*, bool) {{ __nanosleep(32); }}
#endif
"""

_SERVE = r"""
#define WB_RING_REQUEST_WORDS {request_words}
#if WB_RING_REQUEST_WORDS
// call()'s boxes (see workbench/rings/codegen.py), both of 8-byte words holding 4 bytes of data
// and a 4-byte flag: the request's words, then the answer's (the response's, then the handler's
// ns as two); each lane of the dispatching warp reads or writes two words.
#define WB_RING_REQUEST_LANES ((WB_RING_REQUEST_WORDS + 1) / 2)
#define WB_RING_ANSWER_WORDS {answer_words}
#define WB_RING_ANSWER_LANES ((WB_RING_ANSWER_WORDS + 1) / 2)
#define WB_RING_RESPONSE_WORDS (WB_RING_ANSWER_WORDS - 2)
#define WB_RING_BOX_LANES (WB_RING_REQUEST_LANES > WB_RING_ANSWER_LANES ? WB_RING_REQUEST_LANES : WB_RING_ANSWER_LANES)
#define WB_RING_BOX_MASK (WB_RING_BOX_LANES == 32 ? 0xffffffffu : ((1u << WB_RING_BOX_LANES) - 1u))
struct wb_ring_box_read {{ unsigned long long lo, hi; }};

static __device__ __forceinline__ unsigned wb_ring_flag(long long seq) {{ return ((unsigned)seq) | {flag_bit}u; }}

// Issue the read of the request box (its result is used by wb_ring_box_take).
static __device__ __forceinline__ wb_ring_box_read wb_ring_box_load(const unsigned long long* box, int lane) {{
    wb_ring_box_read r = {{0, 0}};
#ifndef __WBSIM__  // (the simulator's one thread reads the words in wb_ring_box_take)
    if (lane < WB_RING_REQUEST_LANES)  // each 16 bytes: the warp's lanes in one instruction
        asm volatile("ld.volatile.global.v2.u64 {{%0, %1}}, [%2];" : "=l"(r.lo), "=l"(r.hi)
                     : "l"(box + 2 * lane) : "memory");
#endif
    return r;
}}

// Whether the box holds message `want` (every word's flag); if so, its data are in `stage`
// (shared memory: only lane 0 holds the message, in wb_ring_box_handle).
static __device__ __forceinline__ bool wb_ring_box_take(const unsigned long long* box, wb_ring_box_read r,
                                                        long long want, int lane, unsigned* stage) {{
    const unsigned flag = wb_ring_flag(want);
#ifdef __WBSIM__
    for (int k = 0; k < 2 * WB_RING_REQUEST_LANES; ++k) {{  // each word whole, with its own flag
        const unsigned long long w = __atomic_load_n(&box[k], __ATOMIC_ACQUIRE);
        if ((unsigned)(w >> 32) != flag) return false;
        stage[k] = (unsigned)w;
    }}
#else
    const bool holds = lane >= WB_RING_REQUEST_LANES || ((unsigned)(r.lo >> 32) == flag && (unsigned)(r.hi >> 32) == flag);
    if (!__all_sync(WB_RING_BOX_MASK, holds)) return false;
    if (lane < WB_RING_REQUEST_LANES) {{
        stage[2 * lane] = (unsigned)r.lo;
        stage[2 * lane + 1] = (unsigned)r.hi;
    }}
    __syncwarp(WB_RING_BOX_MASK);
#endif
    return true;
}}

struct wb_ring_times {{ unsigned long long t0, t1; }};

// The handler on the message in `stage`; the answer, then its ns, replace it there. (Not
// inlined: the message and the answer then take no registers in the dispatcher's loop, whose
// count every thread of the kernel would pay.)
static __device__ __noinline__ wb_ring_times wb_ring_box_handle(unsigned* stage) {{
    {request} in;
    memcpy(&in, stage, sizeof(in));
    {response} out = {response}();
    wb_ring_times t;
    t.t0 = wb_ring_now();
    {handler}(in, out);
    t.t1 = wb_ring_now();
    memcpy(stage, &out, sizeof(out));
    stage[WB_RING_RESPONSE_WORDS] = (unsigned)(t.t1 - t.t0);
    stage[WB_RING_RESPONSE_WORDS + 1] = (unsigned)((t.t1 - t.t0) >> 32);
    return t;
}}

// Write the answer box from `stage`: flagged words, two a lane.
static __device__ __forceinline__ void wb_ring_box_answer(unsigned long long* answer, long long seq,
                                                          int lane, const unsigned* stage) {{
    const unsigned long long flag = (unsigned long long)wb_ring_flag(seq) << 32;
#ifdef __WBSIM__
    for (int k = 0; k < 2 * WB_RING_ANSWER_LANES; ++k)
        __atomic_store_n(&answer[k], flag | stage[k], __ATOMIC_RELAXED);
#else
    __syncwarp(WB_RING_BOX_MASK);
    if (lane < WB_RING_ANSWER_LANES)
        asm volatile("st.volatile.global.v2.u64 [%0], {{%1, %2}};" :: "l"(answer + 2 * lane),
                     "l"(flag | stage[2 * lane]), "l"(flag | stage[2 * lane + 1]) : "memory");
#endif
}}
#endif

// control[0]: stop flag, control[1]: the last request sequence number the host
// published (host memory; [2] and [3]: the simulator's sleep, see wb_ring_idle_wait);
// device_head[0]: the last number the dispatcher published (the host's head, or a call()'s
// number), or -1 once the ring stops; device_head[1]: on the simulator, the messages the
// workers have taken (answered or passed over) (device memory).
extern "C" __global__ void wb_ring_serve(unsigned long long requests, unsigned long long responses,
                                         unsigned long long response_seq, unsigned long long stamps,
                                         unsigned long long control, unsigned long long device_head,
                                         long long capacity, unsigned long long call_marks,
                                         unsigned long long call_box, unsigned long long answer_box)
{{
    const {request}* req = (const {request}*)requests;
    {response}* resp = ({response}*)responses;
    long long* aseq = (long long*)response_seq;
    unsigned long long* stamp = (unsigned long long*)stamps;
    const long long* host = (const long long*)control;
    long long* head = (long long*)device_head;
    long long* marks = (long long*)call_marks;  // (device memory: read beside the payload, from L2)
    // Warp 0 of block 0 dispatches (its lane 0 polls the host; a warp of its own,
    // so that no slow handler shares its instructions); every other thread answers
    // messages: worker w (the thread's index in the grid less 32) answers
    // w + 1, w + 1 + W, ... (W workers).
    const long long index = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    __syncthreads();  // (the simulator runs a block's threads as fibers from its first barrier on)
    if (index < 32) {{
        const int lane = (int)index;
#if WB_RING_REQUEST_WORDS && !defined(__WBSIM__)
        if (lane >= WB_RING_BOX_LANES) return;
#else
        if (lane != 0) return;
#endif
#if WB_RING_REQUEST_WORDS
        const unsigned long long* box = (const unsigned long long*)call_box;
        __shared__ __align__(16) unsigned stage[64];  // (the box's words on their way between lanes)
        long long owed = 0;  // a call answered through the box whose slot is still to write
        wb_ring_times owed_times = {{0, 0}};
#endif
        wb_ring_idle idle = {{}};
        long long published = 0;
        for (;;) {{
#if WB_RING_REQUEST_WORDS
            const wb_ring_box_read read = wb_ring_box_load(box, lane);  // in flight with the head's
#else
            const long long owed = 0;
#endif
            long long h = published, stop = 0;
            if (lane == 0) {{
                stop = wb_ring_load_relaxed_sys(&host[0]);
                // (after a call, the host publishes no head before that call's slot is written)
                if (!owed) h = wb_ring_load_sys(&host[1]);
            }}
#if WB_RING_REQUEST_WORDS
            if (owed) {{
                // the last call's slot, while this poll is in flight: its answer too (for a
                // recv() after a call() gave up), and its mark, which the head's release below
                // makes visible to the message's thread once it sees the number
                if (lane == 0) {{
                    const long long slot = owed % capacity;
                    memcpy(&resp[slot], stage, sizeof({response}));
                    stamp[2 * slot] = owed_times.t0;
                    stamp[2 * slot + 1] = owed_times.t1;
                    marks[slot] = owed;
                    wb_ring_store_gpu(head, owed);
                    wb_ring_store_sys(&aseq[slot], owed);
                }}
                owed = 0;
            }}
#endif
#if WB_RING_REQUEST_WORDS && !defined(__WBSIM__)
            h = __shfl_sync(WB_RING_BOX_MASK, h, 0);
            stop = __shfl_sync(WB_RING_BOX_MASK, stop, 0);
#endif
            if (stop) {{
                if (lane == 0) wb_ring_store_gpu(head, -1);
                return;
            }}
            if (h > published) {{  // (a call's number is published by the dispatcher, not the host)
                if (lane == 0) wb_ring_store_gpu(head, h);
                published = h;
                wb_ring_busy(idle, host);
                continue;
            }}
#if WB_RING_REQUEST_WORDS
            const long long seq = published + 1;
            if (wb_ring_box_take(box, read, seq, lane, stage)) {{
                wb_ring_times t = {{0, 0}};
                if (lane == 0) t = wb_ring_box_handle(stage);
                wb_ring_box_answer((unsigned long long*)answer_box, seq, lane, stage);
                owed_times = t;
                published = owed = seq;
                wb_ring_busy(idle, host);
                continue;
            }}
#endif
#ifdef __WBSIM__
            wb_ring_idle_wait(idle, host, __atomic_load_n(&head[1], __ATOMIC_ACQUIRE) == published);
#else
            wb_ring_idle_wait(idle, host, false);
#endif
        }}
    }}
    const long long workers = (long long)gridDim.x * blockDim.x - 32;
    long long seq = index - 31;
    long long seen = 0;
    unsigned ns = 32;
    for (;;) {{
        if (seen < seq) {{
            const long long d = wb_ring_load_gpu(head);
            if (d < 0) break;
            seen = d;
            if (seen < seq) {{
                wb_ring_backoff(ns);
                if (ns < {max_backoff_ns}) ns *= 2;
                continue;
            }}
        }}
        ns = 32;
        const long long slot = seq % capacity;
        const unsigned long long t0 = wb_ring_now();
        {take_request}
#if WB_RING_REQUEST_WORDS
        // (after the head's acquire, as the payload; in flight with the payload's bus read. A
        // strong read of a host-memory mark here cost a batch of 64 about 1 µs: one bus read a
        // lane, it seems, where the payload's weak read is one for the warp)
        if (marks[slot] >= seq) {{  // a call(): the dispatcher answered it
#ifdef __WBSIM__
            __atomic_fetch_add(&head[1], 1, __ATOMIC_RELEASE);
#endif
            seq += workers;
            continue;
        }}
#endif
        {answer_in_place}
        {handler}(in, out);
        {answer_out}
        stamp[2 * slot] = t0;
        stamp[2 * slot + 1] = wb_ring_now();
        wb_ring_store_sys(&aseq[slot], seq);
#ifdef __WBSIM__
        __atomic_fetch_add(&head[1], 1, __ATOMIC_RELEASE);
#endif
        seq += workers;
    }}
}}

extern "C" __global__ void wb_ring_batch(unsigned long long requests, unsigned long long responses,
                                         long long n)
{{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        const {request}* req = (const {request}*)requests;
        {response}* resp = ({response}*)responses;
        const long long slot = i;
        {take_request}
        {answer_in_place}
        {handler}(in, out);
        {answer_out}
    }}
}}
"""


def message_code(request: str, response: str, request_bytes: int, response_bytes: int) -> dict:
    """How a thread takes message ``req[slot]`` and where it builds its answer
    for ``resp[slot]``: copies where they fit in a thread (``COPY_BYTES``),
    else in place (the answer zeroed first, as a local one is)."""
    if request_bytes <= COPY_BYTES:
        take = f"const {request} in = req[slot];"
    else:
        take = f"const {request}& in = req[slot];"
    if response_bytes <= COPY_BYTES:
        build, out = f"{response} out = {response}();", "resp[slot] = out;"
    else:
        build, out = f"{response}& out = resp[slot]; memset((void*)&out, 0, sizeof(out));", ""
    return {"take_request": take, "answer_in_place": build, "answer_out": out}


def helpers_source(handler: str) -> str:
    """The load, store, clock and idle helpers every ring kernel uses."""
    return HELPERS.format(handler=handler, sim_spin_ns=SIM_SPIN_NS)


def serve_source(handler: str, request: str, response: str, max_backoff_ns: int = 128,
                 box: CallBox | None = None, request_bytes: int = 0,
                 response_bytes: int = 0) -> str:
    """The persistent and the per-batch kernel around ``handler`` (with
    call()'s boxes where ``box`` says how they are laid out)."""
    return helpers_source(handler) + _SERVE.format(
        handler=handler, request=request, response=response, max_backoff_ns=int(max_backoff_ns),
        request_words=box.request_words if box else 0,
        answer_words=box.answer_words if box else 0, flag_bit=hex(BOX_FLAG_BIT),
        **message_code(request, response, request_bytes, response_bytes))
