// racecheck (consumer kind 1, see access.h): shared-memory hazards between
// threads of a block that nothing orders, as compute-sanitizer's racecheck
// reports them.
//
// Two accesses to the same byte of shared memory by different threads, at
// least one of them a write, are a hazard unless something orders them:
//   * a __syncthreads between them (the block's barrier epoch): each epoch
//     starts with empty shadow cells (a stamp per cell, never a clearing pass);
//   * within one warp, a __syncwarp that both threads took part in (vector
//     clocks over the warp's lanes, advanced by the ACCESS_SYNC events).
// Threads of different warps in one epoch are never ordered: an error;
// threads of one warp: a warning (compute-sanitizer's severities). A store
// that left the bytes as they were (kSizeUnchanged) is no hazard (the order
// changes nothing; compute-sanitizer calls those "info" and does not show
// them). Two atomics never race; an atomic and a plain access do.
//
// Each byte's shadow cell keeps the epoch's last write and up to two reads by
// different threads (enough to find a reader other than a writer). A hazard
// is counted once per access and kind; hazards of one pair of sites are one
// finding with their count and the first one's threads and address.
#include <algorithm>
#include <map>
#include <vector>

#include "access.h"
#include "runtime.h"

namespace {

enum HazardKind : uint8_t { RAW = 0, WAR = 1, WAW = 2 };
enum Severity : uint8_t { ERROR = 0, WARNING = 1 };

struct Rec {
    uint32_t site;
    uint32_t clock;   // the lane's own clock when it made the access
    uint16_t tid;
    uint8_t kind;     // AccessKind
    uint8_t size;
};

const uint32_t HAS_W = 1, HAS_R1 = 2, HAS_R2 = 4;

struct Cell {
    uint32_t stamp;
    uint32_t has;
    Rec w, r1, r2;
};

struct Key {
    uint32_t first, second;
    uint8_t kind, severity;
    bool operator<(const Key& o) const {
        if (first != o.first) return first < o.first;
        if (second != o.second) return second < o.second;
        if (kind != o.kind) return kind < o.kind;
        return severity < o.severity;
    }
};

struct Hazard {
    uint64_t count = 0;
    uint64_t block = ~0ull;
    uint32_t tid1 = 0, tid2 = 0;
    uint64_t addr = 0;
    uint8_t kind1 = 0, kind2 = 0, size1 = 0, size2 = 0;
};

class Races : public AccessConsumer {
public:
    explicit Races(const AccessLaunch& L)
        : dynamic_(L.dynamic_bytes), static_lo_(L.static_lo), static_hi_(L.static_hi) {
        cells_.resize(dynamic_ + (static_hi_ - static_lo_));
        for (auto& warp : vc_)
            for (unsigned l = 0; l < 32; ++l) {
                std::fill(warp[l], warp[l] + 32, 0u);
                warp[l][l] = 1;  // (a lane's own clock starts above what the others know of it)
            }
    }

    void warp_events(const BlockContext& b, unsigned warp, const AccessEvent* ev, size_t n) override {
        for (size_t i = 0; i < n; ++i) {
            const AccessEvent& e = ev[i];
            unsigned kind = e.kind();
            if (kind == ACCESS_SYNC) {
                if (group_left_[warp] == 0) {
                    uint32_t mask = (uint32_t)e.addr;
                    join(warp, mask);
                    group_left_[warp] = (unsigned)__builtin_popcount(mask);
                }
                group_left_[warp]--;
                continue;
            }
            if (e.space() != SPACE_SHARED || (kind == ACCESS_STORE && e.unchanged())) continue;
            access(b, warp, e);
        }
    }

    void barrier(const BlockContext&) override { ++stamp_; }
    void block_end(const BlockContext&) override {
        ++stamp_;
        std::fill(group_left_, group_left_ + 32, 0u);
    }

    void merge(AccessConsumer& other) override {
        for (auto& kv : static_cast<Races&>(other).hazards_) {
            Hazard& h = hazards_[kv.first];
            const Hazard& x = kv.second;
            uint64_t count = h.count + x.count;
            if (x.block < h.block) h = x;
            h.count = count;
        }
    }

    void write(std::string& out) override {
        put_bytes<uint32_t>(out, (uint32_t)hazards_.size());
        for (auto& kv : hazards_) {
            const Hazard& h = kv.second;
            out.push_back((char)kv.first.kind);
            out.push_back((char)kv.first.severity);
            out.push_back((char)h.kind1);
            out.push_back((char)h.kind2);
            put_bytes<uint32_t>(out, kv.first.first);
            put_bytes<uint32_t>(out, kv.first.second);
            put_bytes<uint64_t>(out, h.count);
            put_bytes<uint64_t>(out, h.block);
            put_bytes<uint32_t>(out, h.tid1);
            put_bytes<uint32_t>(out, h.tid2);
            put_bytes<uint64_t>(out, h.addr);
            put_bytes<uint32_t>(out, h.size1);
            put_bytes<uint32_t>(out, h.size2);
        }
    }

private:
    // A __syncwarp of the lanes `mask`: each knows what every other knew, then
    // its own clock moves on (what it does next is after the barrier).
    void join(unsigned warp, uint32_t mask) {
        uint32_t joined[32] = {0};
        for (uint32_t m = mask; m; m &= m - 1) {
            const uint32_t* v = vc_[warp][__builtin_ctz(m)];
            for (unsigned k = 0; k < 32; ++k) joined[k] = std::max(joined[k], v[k]);
        }
        for (uint32_t m = mask; m; m &= m - 1) {
            unsigned l = (unsigned)__builtin_ctz(m);
            std::copy(joined, joined + 32, vc_[warp][l]);
            vc_[warp][l][l]++;
        }
    }

    // Whether the earlier access `p` and an access of thread `tid` may happen
    // in either order; `cross` says whether they are in different warps.
    bool unordered(const Rec& p, unsigned tid, unsigned warp, bool& cross) const {
        if (p.tid == tid) return false;
        cross = (p.tid >> 5) != warp;
        if (cross) return true;
        return p.clock > vc_[warp][tid & 31][p.tid & 31];
    }

    Cell* cell(uint64_t addr) {
        if (addr >= kSharedDynamic) {
            uint64_t off = addr - kSharedDynamic;
            return off < dynamic_ ? &cells_[off] : nullptr;
        }
        if (addr >= static_lo_ && addr < static_hi_) return &cells_[dynamic_ + (addr - static_lo_)];
        return nullptr;
    }

    void access(const BlockContext& b, unsigned warp, const AccessEvent& e) {
        unsigned tid = e.tid(), kind = e.kind(), size = e.bytes();
        bool write = kind != ACCESS_LOAD, atomic = kind == ACCESS_ATOMIC;
        Rec me{e.site, vc_[warp][tid & 31][tid & 31], (uint16_t)tid, (uint8_t)kind, (uint8_t)size};
        bool found[3] = {false, false, false};
        for (unsigned k = 0; k < size; ++k) {
            Cell* c = cell(e.addr + k);
            if (!c) continue;
            if (c->stamp != stamp_) {
                c->stamp = stamp_;
                c->has = 0;
            }
            bool cross = false;
            if ((c->has & HAS_W) && !(atomic && c->w.kind == ACCESS_ATOMIC) &&
                unordered(c->w, tid, warp, cross)) {
                HazardKind h = write ? WAW : RAW;
                if (!found[h]) {
                    found[h] = true;
                    report(h, cross, c->w, me, b, e.addr + k);
                }
            }
            if (write) {
                if ((c->has & HAS_R1) && unordered(c->r1, tid, warp, cross) && !found[WAR]) {
                    found[WAR] = true;
                    report(WAR, cross, c->r1, me, b, e.addr + k);
                }
                if ((c->has & HAS_R2) && unordered(c->r2, tid, warp, cross) && !found[WAR]) {
                    found[WAR] = true;
                    report(WAR, cross, c->r2, me, b, e.addr + k);
                }
                c->w = me;
                c->has |= HAS_W;
            } else if ((c->has & HAS_R1) && c->r1.tid == tid) {
                c->r1 = me;
            } else if ((c->has & HAS_R2) && c->r2.tid == tid) {
                c->r2 = me;
            } else if (!(c->has & HAS_R1)) {
                c->r1 = me;
                c->has |= HAS_R1;
            } else {
                c->r2 = me;
                c->has |= HAS_R2;
            }
        }
    }

    void report(HazardKind kind, bool cross, const Rec& first, const Rec& second,
                const BlockContext& b, uint64_t addr) {
        Hazard& h = hazards_[Key{first.site, second.site, (uint8_t)kind,
                                 (uint8_t)(cross ? ERROR : WARNING)}];
        if (h.count++ == 0 || b.linear < h.block) {
            h.block = b.linear;
            h.tid1 = first.tid;
            h.tid2 = second.tid;
            h.addr = addr;
            h.kind1 = first.kind;
            h.kind2 = second.kind;
            h.size1 = first.size;
            h.size2 = second.size;
        }
    }

    uint64_t dynamic_, static_lo_, static_hi_;
    std::vector<Cell> cells_;
    uint32_t stamp_ = 1;
    uint32_t vc_[kMaxThreads / 32][32][32];
    unsigned group_left_[kMaxThreads / 32] = {0};
    std::map<Key, Hazard> hazards_;
};

AccessConsumer* make_races(const AccessLaunch& L) { return new Races(L); }

struct Registration {
    Registration() { register_access_consumer(1, make_races, NEED_SHARED | NEED_VALUES); }
} registration;

}  // namespace
