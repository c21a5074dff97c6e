// Warp operations: shuffles, votes, match, reductions and __activemask. A lane
// waits until the lanes of its mask arrive at the same kind of operation; the
// last one to arrive computes every lane's result.
#include <cstring>

#include "access.h"
#include "runtime.h"

static inline uint64_t load_u(const unsigned char* p, unsigned size) {
    uint64_t v = 0;
    memcpy(&v, p, size > 8 ? 8 : size);
    return v;
}

static inline int64_t load_i(const unsigned char* p, unsigned size) {
    if (size == 4) { int32_t v; memcpy(&v, p, 4); return v; }
    int64_t v = 0; memcpy(&v, p, size > 8 ? 8 : size); return v;
}

static void complete_warp_group(BlockState* b, unsigned w, uint32_t group) {
    unsigned base = w * 32;
    // The first arrived lane's request says what the operation is.
    int first = __builtin_ctz(group);
    wbsim_warp_req* q = b->fibers[base + first].req;
    int op = q->op;
    uint32_t ballot = 0;
    bool vote = op >= WBSIM_BALLOT && op <= WBSIM_ALL;
    for (uint32_t m = vote ? group : 0; m; m &= m - 1) {
        int l = __builtin_ctz(m);
        wbsim_warp_req* r = b->fibers[base + l].req;
        if (load_u(r->val, r->size ? r->size : 4)) ballot |= 1u << l;
    }
    uint64_t red_u = 0; int64_t red_i = 0;
    if (op >= WBSIM_REDUCE_ADD && op <= WBSIM_REDUCE_XOR) {
        bool firstv = true;
        for (uint32_t m = group; m; m &= m - 1) {
            wbsim_warp_req* r = b->fibers[base + __builtin_ctz(m)].req;
            uint64_t u = load_u(r->val, 4) & 0xffffffffu;
            int64_t s = load_i(r->val, 4);
            if (firstv) { red_u = u; red_i = s; firstv = false; continue; }
            switch (op) {
                case WBSIM_REDUCE_ADD: red_u += u; break;
                case WBSIM_REDUCE_MIN_U: red_u = u < red_u ? u : red_u; break;
                case WBSIM_REDUCE_MAX_U: red_u = u > red_u ? u : red_u; break;
                case WBSIM_REDUCE_MIN_I: red_i = s < red_i ? s : red_i; break;
                case WBSIM_REDUCE_MAX_I: red_i = s > red_i ? s : red_i; break;
                case WBSIM_REDUCE_AND: red_u &= u; break;
                case WBSIM_REDUCE_OR: red_u |= u; break;
                case WBSIM_REDUCE_XOR: red_u ^= u; break;
            }
        }
        if (op == WBSIM_REDUCE_MIN_I || op == WBSIM_REDUCE_MAX_I) red_u = (uint64_t)red_i;
    }
    for (uint32_t m = group; m; m &= m - 1) {
        int l = __builtin_ctz(m);
        Fiber& f = b->fibers[base + l];
        wbsim_warp_req* r = f.req;
        int width = r->width;
        if (width <= 0 || width > 32 || (width & (width - 1))) width = 32;
        int seg = l & ~(width - 1);
        int src = l;
        // PTX shfl.sync: the lane operand is taken modulo 32; a lane outside
        // the caller's segment reads its own value, except that xor may read
        // an earlier segment (lanes up to the end of the caller's one).
        int arg = r->arg & 31;
        switch (r->op) {
            case WBSIM_SHFL_IDX: src = seg + (arg & (width - 1)); break;
            case WBSIM_SHFL_UP: src = (l - arg >= seg) ? l - arg : l; break;
            case WBSIM_SHFL_DOWN: src = (l + arg < seg + width) ? l + arg : l; break;
            case WBSIM_SHFL_XOR: {
                int t = l ^ arg;
                src = t < seg + width ? t : l;
                break;
            }
            default: break;
        }
        switch (r->op) {
            case WBSIM_SHFL_IDX: case WBSIM_SHFL_UP: case WBSIM_SHFL_DOWN: case WBSIM_SHFL_XOR: {
                const wbsim_warp_req* s = (group >> src & 1u) ? b->fibers[base + src].req : r;
                memcpy(r->out, s->val, r->size);
                break;
            }
            case WBSIM_BALLOT: memcpy(r->out, &ballot, 4); break;
            case WBSIM_ANY: { unsigned v = ballot != 0; memcpy(r->out, &v, 4); break; }
            case WBSIM_ALL: { unsigned v = ballot == group; memcpy(r->out, &v, 4); break; }
            case WBSIM_MATCH_ANY: case WBSIM_MATCH_ALL: {
                uint32_t same = 0;
                for (uint32_t mm = group; mm; mm &= mm - 1) {
                    int o = __builtin_ctz(mm);
                    if (memcmp(b->fibers[base + o].req->val, r->val, r->size) == 0) same |= 1u << o;
                }
                unsigned v = same;
                if (r->op == WBSIM_MATCH_ALL) { r->pred = same == group; v = same == group ? group : 0; }
                memcpy(r->out, &v, 4);
                break;
            }
            case WBSIM_SYNCWARP: break;
            case WBSIM_ACTIVEMASK: memcpy(r->out, &group, 4); break;
            default:
                if (r->op >= WBSIM_REDUCE_ADD && r->op <= WBSIM_REDUCE_XOR) { uint32_t v = (uint32_t)red_u; memcpy(r->out, &v, 4); }
        }
        f.state = READY;
    }
    b->warp_arrived[w] &= ~group;
    b->warp_at_op[w][op_slot(op)] &= ~group;
    if (g_access_on) access_warp_synced(w, group, op);
}

// The lanes lane l of warp w waits for; complete when they all wait at the same
// kind of warp operation (PTX: same qualifiers and mask, not the same instruction).
static inline uint32_t warp_need(BlockState* b, unsigned w, int l, bool ignore_barrier) {
    uint32_t need = b->fibers[w * 32 + l].req->mask & b->warp_live[w];
    if (ignore_barrier) need &= ~b->warp_at_barrier[w];
    return need | (1u << l);
}

bool try_complete_warp(BlockState* b, unsigned w, bool ignore_barrier) {
    bool any = false;
    for (;;) {
        uint32_t arrived = b->warp_arrived[w] & ~b->warp_at_op[w][0];
        if (!arrived) return any;
        bool done = false;
        for (uint32_t m = arrived; m; m &= m - 1) {
            int l = __builtin_ctz(m);
            uint32_t need = warp_need(b, w, l, ignore_barrier);
            uint32_t same = b->warp_at_op[w][op_slot(b->fibers[w * 32 + l].req->op)];
            if ((same & need) == need) {
                complete_warp_group(b, w, need);
                any = done = true;
                break;
            }
        }
        if (!done) return any;
    }
}

// __activemask: the lanes that reach the same __activemask call together. A
// lane waits there until every other live lane of its warp is blocked (at a
// barrier, at a warp operation) or returned; then each call site's waiting
// lanes form one group.
bool resolve_activemask(BlockState* b, unsigned w) {
    uint32_t waiting = b->warp_at_op[w][0];
    if (!waiting) return false;
    uint32_t blocked = b->warp_arrived[w] | b->warp_at_barrier[w];
    if (b->warp_live[w] & ~blocked) return false;  // a lane can still run
    unsigned base = w * 32;
    while (waiting) {
        const void* site = b->fibers[base + __builtin_ctz(waiting)].site;
        uint32_t group = 0;
        for (uint32_t m = waiting; m; m &= m - 1) {
            int l = __builtin_ctz(m);
            if (b->fibers[base + l].site == site) group |= 1u << l;
        }
        for (uint32_t m = group; m; m &= m - 1) {
            Fiber& f = b->fibers[base + __builtin_ctz(m)];
            memcpy(f.req->out, &group, 4);
            f.state = READY;
        }
        waiting &= ~group;
        b->warp_arrived[w] &= ~group;
        b->warp_at_op[w][0] &= ~group;
    }
    return true;
}

extern "C" __attribute__((noinline)) void wbsim_warp(wbsim_warp_req* req) {
    BlockState* b = t_block;
    if (!__wbsim_fiber_mode) promote(b);
    int me = b->cur;
    unsigned w = (unsigned)me / 32;
    uint32_t bit = 1u << (me % 32);
    Fiber& f = b->fibers[me];
    f.state = AT_WARP;
    f.req = req;
    f.site = __builtin_return_address(0);
    if (g_access_on && !(req->mask & bit) && op_slot(req->op) != 0)
        access_warp_misuse((unsigned)me, req->mask, req->op, f.site);  // (synccheck)
    b->warp_arrived[w] |= bit;
    int slot = op_slot(req->op);
    b->warp_at_op[w][slot] |= bit;
    if (slot != 0) {
        uint32_t need = (req->mask & b->warp_live[w]) | bit;
        if ((b->warp_at_op[w][slot] & need) == need) {
            complete_warp_group(b, w, need);
            return;
        }
    }
    if (b->warp_at_op[w][0]) resolve_activemask(b, w);
    if (f.state == READY) {
        threadIdx = f.tid;
        return;
    }
    switch_away(b, &f.sp);
}

extern "C" unsigned wbsim_activemask(void) {
    BlockState* b = t_block;
    unsigned me = linear_tid(threadIdx);
    unsigned w = me / 32;
    if (__wbsim_fiber_mode) return b->warp_live[w];
    uint32_t m = 0;  // direct mode: lanes before this one have returned
    for (unsigned l = me % 32; l < 32 && w * 32 + l < b->nthreads; ++l) m |= 1u << l;
    return m;
}
