"""call()'s boxes: the CUDA C++ of the dispatcher's side of a call (its poll,
taking the message, the handler, the answer box, the slots written later, the
moment of the next poll) and their layout. :mod:`~workbench.rings.codegen`
puts it before the persistent kernel, which uses it where the messages fit
(``WB_RING_REQUEST_WORDS`` non-zero); its module docstring tells the whole
path of a call, ``docs/rings.md`` the figures behind each choice.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
        """The dispatching warp's lanes: the request's, then one that reads
        the stop flag and the head in the same poll; the answer's."""
        return max(self.request_lanes + 1, self.answer_lanes)

    @property
    def request_bytes(self) -> int:
        return 16 * self.request_lanes

    @property
    def answer_bytes(self) -> int:
        return 16 * self.answer_lanes


def call_box(request: np.dtype, response: np.dtype) -> CallBox | None:
    """The call box for these messages, or None where they are too large for
    one warp's lanes (requests and responses up to 248 bytes): call() then
    takes a slot."""
    box = CallBox(request_words=-(-request.itemsize // 4),
                  answer_words=-(-response.itemsize // 4) + 2)
    return box if box.lanes <= 32 else None


#: The dispatcher writes the slots of calls it answered once it has had no call for this long.
SETTLE_NS = 5000

_BOX = r"""
#define WB_RING_REQUEST_WORDS {request_words}
#if WB_RING_REQUEST_WORDS
// call()'s boxes (see workbench/rings/codegen.py and callbox.py), both of 8-byte words holding
// 4 bytes of data and a 4-byte flag: the request's words, then the answer's (the response's, then
// the handler's ns as two); each lane of the dispatching warp reads or writes two words, and the
// lane after the request's reads the stop flag and the head in the same instruction
// (WB_RING_CONTROL_LANE).
#define WB_RING_REQUEST_LANES ((WB_RING_REQUEST_WORDS + 1) / 2)
#define WB_RING_CONTROL_LANE WB_RING_REQUEST_LANES
#define WB_RING_ANSWER_WORDS {answer_words}
#define WB_RING_ANSWER_LANES ((WB_RING_ANSWER_WORDS + 1) / 2)
#define WB_RING_RESPONSE_WORDS (WB_RING_ANSWER_WORDS - 2)
#define WB_RING_BOX_LANES (WB_RING_CONTROL_LANE + 1 > WB_RING_ANSWER_LANES ? WB_RING_CONTROL_LANE + 1 : WB_RING_ANSWER_LANES)
#define WB_RING_BOX_MASK (WB_RING_BOX_LANES == 32 ? 0xffffffffu : ((1u << WB_RING_BOX_LANES) - 1u))
struct wb_ring_box_read {{ unsigned long long lo, hi; }};

static __device__ __forceinline__ unsigned wb_ring_flag(long long seq) {{ return ((unsigned)seq) | {flag_bit}u; }}

// Issue the poll: the request box's words and, by WB_RING_CONTROL_LANE, the stop flag and the
// head (relaxed, see wb_ring_load_control), 16 bytes a lane in one instruction, so one bus round
// trip. (Its result is used by wb_ring_box_take; the simulator's one thread reads the box there.)
static __device__ __forceinline__ wb_ring_box_read wb_ring_box_load(const unsigned long long* box,
                                                                    const long long* host, int lane) {{
    wb_ring_box_read r = {{0, 0}};
#ifndef __WBSIM__
    const unsigned long long* at = lane < WB_RING_CONTROL_LANE ? box + 2 * lane : (const unsigned long long*)host;
    if (lane <= WB_RING_CONTROL_LANE)
        asm volatile("ld.relaxed.sys.global.v2.u64 {{%0, %1}}, [%2];" : "=l"(r.lo), "=l"(r.hi)
                     : "l"(at) : "memory");
#endif
    return r;
}}

#ifdef __WBSIM__
// The stop flag and the head (the simulator's lane 0 reads them here; the box in wb_ring_box_take)
static __device__ __forceinline__ void wb_ring_poll_control(wb_ring_box_read, const long long* host, int,
                                                            long long& stop, long long& head) {{
    wb_ring_load_control(host, stop, head);
}}
static __device__ __forceinline__ bool wb_ring_lane0(bool v) {{ return v; }}
struct wb_ring_phase {{ int unused; }};
static __device__ __forceinline__ void wb_ring_phase_start(wb_ring_phase&) {{}}
static __device__ __forceinline__ void wb_ring_phase_wait(wb_ring_phase&) {{}}
static __device__ __forceinline__ void wb_ring_phase_poll(wb_ring_phase&, bool) {{}}
#else
// The stop flag and the head from a poll (its control lane's 16 bytes; the warp waits for the poll here)
static __device__ __forceinline__ void wb_ring_poll_control(wb_ring_box_read r, const long long*, int,
                                                            long long& stop, long long& head) {{
    stop = (long long)__shfl_sync(WB_RING_BOX_MASK, r.lo, WB_RING_CONTROL_LANE);
    head = (long long)__shfl_sync(WB_RING_BOX_MASK, r.hi, WB_RING_CONTROL_LANE);
}}
// Lane 0's `v`, for every lane: a decision the warp takes as one (the lanes' clocks, say, may be
// read apart)
static __device__ __forceinline__ bool wb_ring_lane0(bool v) {{ return __shfl_sync(WB_RING_BOX_MASK, (int)v, 0) != 0; }}
// When the first poll after an answer goes out. A caller that sends its next call as soon as it has
// an answer (call() in a loop) writes it about a bus round trip after the answer left; a poll sent
// at once would reach host memory before that, come back empty, and the next one leave a round trip
// later, so that the call waits most of a round trip for it (on an H200, whose poll takes 1.3 µs:
// call() 2.6-2.9 µs p50 so, 2.1-2.7 µs adapted). The dispatcher waits `delay` cycles after an
// answer instead, adapting it: the next call found by the first poll after an answer (too late,
// perhaps) takes WB_RING_PHASE_DOWN off, one found by the second (the first was too early) adds
// WB_RING_PHASE_UP; a call that comes later says nothing. The ceiling, about 4 µs, is for a slower
// caller: with 1 µs more between its calls, a ceiling of 3000 cycles mostly left the first poll
// early (an H200: the wait 2.3-2.9 µs p50, 1.7-2.1 with 5000 or 8000; within 0.1 µs for calls back
// to back). (Polls more often, two in flight at once or a second box polled between, made every
// round trip slower, about 1 µs on an H200.)
#define WB_RING_PHASE_DOWN 32
#define WB_RING_PHASE_UP 256
#define WB_RING_PHASE_MAX 8000
struct wb_ring_phase {{ long long delay, answered; int polls; }};
static __device__ __forceinline__ long long wb_ring_clock() {{
    long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
    return t;
}}
// An answer written: the delay counts from here. Then, before the next poll, wait out what is left.
static __device__ __forceinline__ void wb_ring_phase_start(wb_ring_phase& p) {{ p.answered = wb_ring_clock(); }}
static __device__ __forceinline__ void wb_ring_phase_wait(wb_ring_phase& p) {{
    while (wb_ring_clock() - p.answered < p.delay) {{}}
    p.polls = 1;
}}
// A poll come back, with a call or without: the delay adapted where it was one of the first two
// after an answer.
static __device__ __forceinline__ void wb_ring_phase_poll(wb_ring_phase& p, bool call) {{
    if (p.polls == 1 && call) {{
        p.delay = p.delay > WB_RING_PHASE_DOWN ? p.delay - WB_RING_PHASE_DOWN : 0;
    }} else if (p.polls == 2 && call) {{
        p.delay = p.delay + WB_RING_PHASE_UP < WB_RING_PHASE_MAX ? p.delay + WB_RING_PHASE_UP : WB_RING_PHASE_MAX;
    }}
    p.polls = call || p.polls >= 2 ? 0 : p.polls + (p.polls > 0);
}}
#endif

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
    const bool holds = lane >= WB_RING_CONTROL_LANE || ((unsigned)(r.lo >> 32) == flag && (unsigned)(r.hi >> 32) == flag);
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

// The handler on the message in `stage`; the answer, then its ns, replace it there. (Inlined: a
// function call waits for every read in flight, a poll's too, a bus round trip. It adds no more
// than two registers to the kernel's count, which every thread pays.)
static __device__ __forceinline__ wb_ring_times wb_ring_box_handle(unsigned* stage) {{
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

// A response from the stage's words into `dst` (host memory): word stores where the type allows
// (a memcpy from the stage, whose alignment the compiler cannot see, stores byte by byte, each
// a write over the bus).
template <typename T> static __device__ __forceinline__ void wb_ring_put(T* dst, const unsigned* words) {{
    if (alignof(T) >= 4 && sizeof(T) % 4 == 0) {{
        for (int k = 0; k < (int)(sizeof(T) / 4); ++k) ((unsigned*)dst)[k] = words[k];
    }} else {{
        memcpy((void*)dst, words, sizeof(T));
    }}
}}

// Calls answered through the box whose slots are still to write: their answers (each in a stage
// of its own), numbers and times. The dispatcher writes them (wb_ring_settle) once it has had no
// call for WB_RING_SETTLE_NS, as soon as it answered the WB_RING_OWED-th (before its next poll),
// before it publishes a head and before it stops: the writes end in a system fence, which waits
// for the poll in flight and would hold up the next call.
#define WB_RING_OWED 16
#define WB_RING_SETTLE_NS {settle_ns}
struct wb_ring_owed {{
    unsigned stage[WB_RING_OWED][64];
    long long seq[WB_RING_OWED];
    unsigned long long t0[WB_RING_OWED], t1[WB_RING_OWED];
}};

// The owed calls' slots (lane 0): answers, stamps and marks; one system fence; then the device
// head (whose release makes the marks visible to the messages' own threads, which pass over a
// message so marked) and the slots' numbers (which the host reads before the answers).
template <typename R>
static __device__ __forceinline__ void wb_ring_settle(const wb_ring_owed& owed, int count, R* resp,
                                                      unsigned long long* stamp, long long* marks,
                                                      long long* head, long long* aseq, long long capacity) {{
    for (int i = 0; i < count; ++i) {{
        const long long slot = owed.seq[i] % capacity;
        wb_ring_put(&resp[slot], owed.stage[i]);
        stamp[2 * slot] = owed.t0[i];
        stamp[2 * slot + 1] = owed.t1[i];
        marks[slot] = owed.seq[i];
    }}
    wb_ring_fence_sys();
    wb_ring_store_gpu(head, owed.seq[count - 1]);
    for (int i = 0; i < count; ++i) wb_ring_store_relaxed_sys(&aseq[owed.seq[i] % capacity], owed.seq[i]);
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
"""


def box_source(box: CallBox | None, handler: str, request: str, response: str) -> str:
    """The call box's C++ for ``box`` (none where it is None: the kernel then
    polls the control words alone)."""
    return _BOX.format(handler=handler, request=request, response=response,
                       request_words=box.request_words if box else 0,
                       answer_words=box.answer_words if box else 0, flag_bit=hex(BOX_FLAG_BIT),
                       settle_ns=SETTLE_NS)
