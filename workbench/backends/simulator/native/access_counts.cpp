// The profiler's consumer of memory accesses (kind 0, see access.h): what
// Nsight Compute counts where addresses decide it, per source site.
//
// One warp-level instruction is the k-th execution of a site by each lane of
// the warp between two barriers; its active lanes are the lanes that have a
// k-th execution. Inside a loop (AccessLaunch::loop_sites) it is the j-th
// execution in the same iteration of each loop around the site (ACCESS_ITER
// events count a loop's iterations and restart those of the loops inside
// it): a GPU issues the site once an iteration for the lanes that run it,
// and lanes that skip it in some iterations, or run an inner loop fewer
// times, then still line up. (nvcc unrolls an innermost counted loop whose trip
// count is known only at run time, by 4, the remaining iterations after: lanes of
// n = 4q + r trips run q unrolled iterations, then r copies, so a run issues
// 4 max q + max r instructions a site where one an iteration gives max n. A site's
// `uneven` counts its instructions in runs where those differ: there a GPU may
// issue more, if nvcc unrolled the loop.) Per instruction:
//   global: one request; sectors = the distinct 32-byte sectors its lanes touch;
//   shared: wavefronts = per phase of the warp (all 32 lanes for accesses of
//           up to 4 bytes, half-warps for 8, quarter-warps for 16), the most
//           distinct 4-byte words any one of the 32 banks (word % 32) must
//           deliver; the same word to several lanes is a broadcast; the ideal
//           is one wavefront per phase with active lanes. A 16-byte load
//           whose lanes pair up (every lane's address that of lane ^ 1, or
//           every lane's that of lane ^ 2) goes by half-warps: the GPU packs
//           two lanes' registers into one return (ncu on an H200 gives 12
//           wavefronts, not 16, for sgemm's four float4 loads a k step);
//   basic blocks (divergence): one execution and its active lanes.
// Per site the sums go back with one sample instruction (the first one of the
// lowest block and warp: its lanes' addresses, for the access map), and the
// global sectors the launch read and wrote at least once (the footprint),
// and how far apart, in blocks, a sector's accesses came (the reuse
// distances: a cache model tells which came back from L2).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "access.h"
#include "runtime.h"

namespace {

struct Sample {
    uint64_t block = ~0ull;
    uint32_t warp = 0, k = 0;
    uint32_t mask = 0, size = 0;
    uint64_t addr[32];
};

struct SiteTotals {
    uint64_t execs = 0;   // warp-level instructions (requests)
    uint64_t lanes = 0;   // active lanes, summed over them
    uint64_t bytes = 0;   // bytes the lanes asked for
    uint64_t units = 0;   // global: sectors; shared: wavefronts
    uint64_t ideal = 0;   // global: sectors the distinct bytes fill; shared: phases
    uint64_t worst = 0;   // the most units of one instruction
    uint64_t uneven = 0;  // instructions in loop runs of uneven trip counts (above)
    Sample sample;
};

struct Instance {
    uint64_t run;       // in an innermost loop: its run (Counter::run_key), else 0
    uint32_t mask;
    uint32_t k;
    uint8_t size[32];
    uint64_t addr[32];
};

// A site of the delivery being processed.
struct Slot {
    uint64_t key = 0;
    uint32_t stamp = 0;
    SiteTotals* totals = nullptr;
    uint32_t count[32];
    std::vector<uint32_t> instances;  // k -> index into the instance pool (in order of creation)
    // a site inside a loop: 1 + its innermost loop's index (0: none); each
    // lane's iterations (key: Counter::iteration_key) at its last execution
    // here (`seen`: lanes with one) and its executions in them; instances
    // by iteration of a loop in no other (+1, 0: none yet) or by key, and the
    // rare second executions in one iteration (key, j, instance)
    uint32_t loop = 0;
    uint32_t seen = 0;
    uint64_t last_key[32];
    uint32_t again[32];
    std::vector<uint32_t> by_iteration;
    std::unordered_map<uint64_t, uint32_t> by_key;
    std::vector<std::array<uint64_t, 3>> repeats;
};

const unsigned kSlots = 4096;  // a power of two

inline void sort_small(uint64_t* v, int n) {  // insertion sort: lanes often come in order
    int i = 1;
    while (i < n && v[i - 1] <= v[i]) ++i;  // (already in order: the common case)
    for (; i < n; ++i) {
        uint64_t x = v[i];
        int j = i - 1;
        while (j >= 0 && v[j] > x) { v[j + 1] = v[j]; --j; }
        v[j + 1] = x;
    }
}

// The footprint: one bit per 32-byte sector of the arena's allocated part,
// shared by every OS thread of the launch.
// Reuse distances: bucket 0 the same block, bucket k a distance of 2^(k-1)
// to 2^k - 1 blocks.
const int kReuseBuckets = 34;

struct Footprint {
    uintptr_t lo = 0;
    size_t words = 0;
    std::vector<std::atomic<uint64_t>> read, write;
    // each sector's last block (its linear index + 1; 0: not yet), racy on
    // purpose: a distance may be off by the blocks another thread ran meanwhile
    std::vector<std::atomic<uint32_t>> last;
    void reset(uintptr_t l, uintptr_t h) {
        lo = l;
        words = ((h - l) / 32 + 63) / 64;
        std::vector<std::atomic<uint64_t>>(words).swap(read);
        std::vector<std::atomic<uint64_t>>(words).swap(write);
        std::vector<std::atomic<uint32_t>>(words * 64).swap(last);
    }
    static void mark(std::vector<std::atomic<uint64_t>>& map, size_t sector) {
        std::atomic<uint64_t>& w = map[sector >> 6];
        uint64_t bit = 1ull << (sector & 63);
        if (!(w.load(std::memory_order_relaxed) & bit)) w.fetch_or(bit, std::memory_order_relaxed);
    }
    static uint64_t count(const std::vector<std::atomic<uint64_t>>& map) {
        uint64_t n = 0;
        for (const auto& w : map) n += (uint64_t)__builtin_popcountll(w.load(std::memory_order_relaxed));
        return n;
    }
    uint64_t count_either() const {
        uint64_t n = 0;
        for (size_t i = 0; i < words; ++i)
            n += (uint64_t)__builtin_popcountll(read[i].load(std::memory_order_relaxed) |
                                                write[i].load(std::memory_order_relaxed));
        return n;
    }
};
Footprint g_footprint;

class Counter : public AccessConsumer {
public:
    explicit Counter(const AccessLaunch& L)
        : launch_(L), iterations_(32 * L.nloops), chains_(L.nloops), inner_(L.nloops) {
        for (size_t l = 0; l < L.nloops; ++l) {
            for (int32_t a = (int32_t)l; a >= 0 && a < (int32_t)L.nloops; a = L.loop_parents[a]) {
                chains_[l].insert(chains_[l].begin(), (uint32_t)a);
                if (a != (int32_t)l) inner_[a].push_back((uint32_t)l);
                if (chains_[l].size() > L.nloops) break;   // (a cycle: never from loop_sites)
            }
        }
        for (size_t l = 0; l < L.nloops; ++l)
            innermost_.push_back(inner_[l].empty());
    }

    void warp_events(const BlockContext& b, unsigned warp, const AccessEvent* ev, size_t n) override {
        ++stamp_;
        used_ = 0;
        pool_used_ = 0;
        std::fill(iterations_.begin(), iterations_.end(), 0u);
        trips_.clear();
        running_.clear();
        for (size_t i = 0; i < n; ++i) {
            const AccessEvent& e = ev[i];
            unsigned lane = e.tid_piece & 31u;
            if (e.kind() == ACCESS_SYNC) continue;
            if (e.kind() == ACCESS_ITER) {
                if (e.addr < launch_.nloops) {
                    for (uint32_t l : inner_[e.addr]) end_run(l, lane);
                    if (innermost_[e.addr] && !iterations_[e.addr * 32 + lane])
                        running_.push_back(e.addr * 32 + lane);
                    iterations_[e.addr * 32 + lane]++;
                    for (uint32_t l : inner_[e.addr]) iterations_[l * 32 + lane] = 0;
                }
                continue;
            }
            Slot& s = slot(e);
            Instance& in = pool_[s.loop ? in_loop(s, lane) : s.instances[next(s, s.count[lane]++)]];
            in.mask |= 1u << lane;
            in.addr[lane] = e.addr;
            in.size[lane] = (uint8_t)e.bytes();
        }
        for (uint32_t at : running_) end_run(at / 32, at % 32);  // (a run twice: the same)
        for (unsigned u = 0; u < used_; ++u) {
            Slot& s = *used_slots_[u];
            unsigned kind = (unsigned)(s.key >> 32 & 0xff), space = (unsigned)(s.key >> 40 & 0xff);
            for (uint32_t idx : s.instances) evaluate(*s.totals, kind, space, pool_[idx], b, warp);
        }
    }

    void warp_blocks(const BlockContext&, unsigned, const BlockCount* counts, size_t n) override {
        // the k-th instruction has the lanes that ran the block k times or more: as many
        // instructions as the most any lane ran it, and every run of a lane one active lane
        for (size_t i = 0; i < n; ++i) {
            uint32_t most = 0;
            uint64_t runs = 0;
            for (unsigned l = 0; l < 32; ++l) {
                most = std::max(most, counts[i].lanes[l]);
                runs += counts[i].lanes[l];
            }
            SiteTotals& t = totals_[(uint64_t)counts[i].site | (uint64_t)ACCESS_BLOCK << 32 |
                                    (uint64_t)SPACE_NONE << 40];
            t.execs += most;
            t.lanes += runs;
        }
    }

    void block_end(const BlockContext&) override { ++blocks_; }

    void merge(AccessConsumer& other) override {
        Counter& o = static_cast<Counter&>(other);
        blocks_ += o.blocks_;
        for (int k = 0; k < 2; ++k)
            for (int b = 0; b < kReuseBuckets; ++b) reuse_[k][b] += o.reuse_[k][b];
        for (auto& kv : o.totals_) {
            SiteTotals& t = totals_[kv.first];
            const SiteTotals& x = kv.second;
            t.execs += x.execs; t.lanes += x.lanes; t.bytes += x.bytes;
            t.units += x.units; t.ideal += x.ideal; t.worst = std::max(t.worst, x.worst);
            t.uneven += x.uneven;
            if (earlier(x.sample, t.sample)) t.sample = x.sample;
        }
    }

    void write(std::string& out) override {
        put<uint64_t>(out, blocks_);
        put<uint64_t>(out, launch_.blocks);
        put<uint64_t>(out, Footprint::count(g_footprint.read));
        put<uint64_t>(out, Footprint::count(g_footprint.write));
        put<uint64_t>(out, g_footprint.count_either());
        for (int k = 0; k < 2; ++k)
            for (int b = 0; b < kReuseBuckets; ++b) put<uint64_t>(out, reuse_[k][b]);
        put<uint32_t>(out, (uint32_t)totals_.size());
        put<uint32_t>(out, (uint32_t)std::min<uint64_t>(access_cut_deliveries(), 0xffffffffu));
        for (auto& kv : totals_) {
            const SiteTotals& t = kv.second;
            put<uint32_t>(out, (uint32_t)kv.first);
            out.push_back((char)(kv.first >> 32 & 0xff));   // kind
            out.push_back((char)(kv.first >> 40 & 0xff));   // space
            out.push_back((char)(kv.first >> 48 & 0xff));   // piece
            out.push_back((char)t.sample.size);
            put<uint64_t>(out, t.execs);
            put<uint64_t>(out, t.lanes);
            put<uint64_t>(out, t.bytes);
            put<uint64_t>(out, t.units);
            put<uint64_t>(out, t.ideal);
            put<uint64_t>(out, t.worst);
            put<uint64_t>(out, t.uneven);
            if ((kv.first >> 32 & 0xff) == ACCESS_BLOCK) continue;
            put<uint64_t>(out, t.sample.block);
            put<uint32_t>(out, t.sample.warp);
            put<uint32_t>(out, t.sample.mask);
            out.append((const char*)t.sample.addr, sizeof t.sample.addr);
        }
    }

private:
    template <class T> static void put(std::string& out, T v) { out.append((const char*)&v, sizeof v); }

    // The index in s.instances of instance `k`, made if it is the next one.
    uint32_t next(Slot& s, uint32_t k) {
        if (k == s.instances.size()) {
            if (pool_used_ == pool_.size()) pool_.emplace_back();
            Instance& fresh = pool_[pool_used_];
            fresh.mask = 0;
            fresh.k = k;
            fresh.run = 0;
            s.instances.push_back((uint32_t)pool_used_++);
        }
        return k;
    }

    // `lane`'s iterations of the loops around loop `loop` and of the loop
    // itself, as one key: the iteration itself for a loop in no other, both
    // for two, a hash of them all for more.
    uint64_t iteration_key(uint32_t loop, unsigned lane) const {
        const std::vector<uint32_t>& chain = chains_[loop];
        if (chain.size() == 1) return iterations_[loop * 32 + lane];
        if (chain.size() == 2)
            return (uint64_t)iterations_[chain[0] * 32 + lane] << 32 | iterations_[loop * 32 + lane];
        uint64_t key = 0xcbf29ce484222325ull;
        for (uint32_t l : chain) key = (key ^ iterations_[l * 32 + lane]) * 0x100000001b3ull;
        return key;
    }

    // One run of loop `loop` (an innermost one) by `lane`: the loop and the
    // lane's iterations of the loops around it, as one key.
    uint64_t run_key(uint32_t loop, unsigned lane) const {
        const std::vector<uint32_t>& chain = chains_[loop];
        uint64_t key = (0xcbf29ce484222325ull ^ loop) * 0x100000001b3ull;
        for (size_t i = 0; i + 1 < chain.size(); ++i)
            key = (key ^ iterations_[chain[i] * 32 + lane]) * 0x100000001b3ull;
        return key;
    }

    // `lane`'s run of innermost loop `loop` has ended (or the delivery): the
    // run's most trips, most fours and most remaining trips (n = 4q + r).
    void end_run(uint32_t loop, unsigned lane) {
        uint32_t trips = iterations_[loop * 32 + lane];
        if (!trips || !innermost_[loop]) return;
        std::array<uint32_t, 3>& run = trips_[run_key(loop, lane)];
        run[0] = std::max(run[0], trips);
        run[1] = std::max(run[1], trips / 4);
        run[2] = std::max(run[2], trips % 4);
    }

    // The pool index of the instance `lane` runs now at a site inside a loop.
    uint32_t in_loop(Slot& s, unsigned lane) {
        uint32_t idx = find_in_loop(s, lane);
        Instance& in = pool_[idx];
        if (!in.mask && innermost_[s.loop - 1]) in.run = run_key(s.loop - 1, lane);
        return idx;
    }

    uint32_t find_in_loop(Slot& s, unsigned lane) {
        uint64_t key = iteration_key(s.loop - 1, lane);
        uint32_t j = 0;
        if ((s.seen >> lane & 1u) && s.last_key[lane] == key) j = ++s.again[lane];
        else { s.seen |= 1u << lane; s.last_key[lane] = key; s.again[lane] = 0; }
        if (j == 0) {
            if (chains_[s.loop - 1].size() == 1) {
                if (key >= s.by_iteration.size()) s.by_iteration.resize(key + 1, 0);
                uint32_t& at = s.by_iteration[key];
                if (!at) at = next(s, (uint32_t)s.instances.size()) + 1;
                return s.instances[at - 1];
            }
            auto found = s.by_key.find(key);
            if (found != s.by_key.end()) return s.instances[found->second];
            uint32_t k = next(s, (uint32_t)s.instances.size());
            s.by_key.emplace(key, k);
            return s.instances[k];
        }
        for (const auto& r : s.repeats)
            if (r[0] == key && r[1] == j) return s.instances[r[2]];
        uint32_t k = next(s, (uint32_t)s.instances.size());
        s.repeats.push_back({key, j, k});
        return s.instances[k];
    }

    // 1 + the index of the innermost loop around access site `site`, or 0.
    uint32_t loop_of(uint32_t site) const {
        const auto* lo = launch_.loop_sites;
        const auto* hi = lo + launch_.nloop_sites;
        const auto* at = std::lower_bound(lo, hi, std::make_pair(site, 0u));
        return at != hi && at->first == site ? at->second + 1 : 0;
    }

    static bool earlier(const Sample& a, const Sample& b) {
        if (a.block != b.block) return a.block < b.block;
        if (a.warp != b.warp) return a.warp < b.warp;
        return a.k < b.k;
    }

    Slot& slot(const AccessEvent& e) {
        unsigned piece = e.kind() == ACCESS_ATOMIC ? 0 : e.piece();  // (kPieceAtomicWrite)
        uint64_t key = (uint64_t)e.site | (uint64_t)e.kind() << 32 | (uint64_t)e.space() << 40 |
                       (uint64_t)piece << 48;
        uint64_t h = key * 0x9E3779B97F4A7C15ull;
        unsigned i = (unsigned)(h >> 52) & (kSlots - 1);
        for (;;) {
            Slot& s = slots_[i];
            if (s.stamp != stamp_) {  // free in this delivery
                s.key = key;
                s.stamp = stamp_;
                memset(s.count, 0, sizeof s.count);
                s.instances.clear();
                s.totals = &totals_[key];
                s.loop = loop_of(e.site);
                if (s.loop) {
                    s.seen = 0;
                    s.by_iteration.clear();
                    s.by_key.clear();
                    s.repeats.clear();
                }
                used_slots_[used_++] = &s;
                return s;
            }
            if (s.key == key) return s;
            i = (i + 1) & (kSlots - 1);
        }
    }

    void evaluate(SiteTotals& t, unsigned kind, unsigned space, const Instance& in,
                  const BlockContext& b, unsigned warp) {
        uint32_t mask = in.mask;
        t.execs++;
        if (in.run) {
            auto run = trips_.find(in.run);
            if (run != trips_.end() && 4 * run->second[1] + run->second[2] > run->second[0]) t.uneven++;
        }
        t.lanes += (uint64_t)__builtin_popcount(mask);
        if (kind == ACCESS_BLOCK) return;
        uint64_t bytes = 0;
        for (uint32_t m = mask; m; m &= m - 1) bytes += in.size[__builtin_ctz(m)];
        t.bytes += bytes;
        uint64_t units = 0, ideal = 0;
        if (space == SPACE_GLOBAL) {
            units = global_sectors(in, kind, bytes, b.linear, &ideal);
        } else if (kind != ACCESS_ATOMIC) {
            units = shared_wavefronts(in, kind, &ideal);
        }
        t.units += units;
        t.ideal += ideal;
        if (units > t.worst) t.worst = units;
        Sample& s = t.sample;
        if (b.linear < s.block || (b.linear == s.block && (warp < s.warp || (warp == s.warp && in.k < s.k)))) {
            s.block = b.linear;
            s.warp = warp;
            s.k = in.k;
            s.mask = mask;
            s.size = in.size[__builtin_ctz(mask)];
            for (int l = 0; l < 32; ++l) s.addr[l] = (mask >> l & 1u) ? in.addr[l] : 0;
        }
    }

    // The footprint and the reuse distance of one distinct sector.
    void touch(uint64_t sector, unsigned kind, uint64_t block) {
        size_t s = (size_t)(sector - (g_footprint.lo >> 5));
        if (s >= g_footprint.words * 64) return;  // a __device__ variable
        if (kind != ACCESS_STORE) Footprint::mark(g_footprint.read, s);
        if (kind != ACCESS_LOAD) Footprint::mark(g_footprint.write, s);
        uint32_t now = (uint32_t)block + 1;
        uint32_t then = g_footprint.last[s].load(std::memory_order_relaxed);
        if (then != now) g_footprint.last[s].store(now, std::memory_order_relaxed);
        if (then) {
            uint32_t d = now > then ? now - then : then - now;
            int bucket = d ? 32 - __builtin_clz(d) : 0;
            reuse_[kind == ACCESS_LOAD ? 0 : 1][bucket]++;
        }
    }

    uint64_t global_sectors(const Instance& in, unsigned kind, uint64_t bytes, uint64_t block,
                            uint64_t* ideal) {
        uint64_t sec[64], addr[32];
        int n = 0;
        // the common case first: the active lanes read one contiguous range in order
        uint64_t next = 0, first = 0;
        bool contiguous = true;
        for (uint32_t m = in.mask; m; m &= m - 1) {
            int l = __builtin_ctz(m);
            uint64_t a = in.addr[l], end = a + (in.size[l] ? in.size[l] : 1);
            if (n == 0) first = a;
            else if (a != next) contiguous = false;
            next = end;
            sec[n++] = a >> 5;
            if (((end - 1) >> 5) != (a >> 5)) sec[n++] = (end - 1) >> 5;
        }
        if (contiguous && n) {
            uint64_t lo = first >> 5, hi = (next - 1) >> 5;
            for (uint64_t s = lo; s <= hi; ++s) touch(s, kind, block);
            *ideal = std::min<uint64_t>(hi - lo + 1, (bytes + 31) / 32);  // (no byte twice)
            return hi - lo + 1;
        }
        sort_small(sec, n);
        uint64_t unique = 0;
        for (int i = 0; i < n; ++i) {
            if (i && sec[i] == sec[i - 1]) continue;
            ++unique;
            touch(sec[i], kind, block);
        }
        if (kind == ACCESS_ATOMIC) return atomic_transactions(in, unique, ideal);
        if (unique <= (bytes + 31) / 32) {  // no sector more than the bytes need
            *ideal = unique;
            return unique;
        }
        int na = 0;  // the distinct bytes: lanes may read the same address
        for (uint32_t m = in.mask; m; m &= m - 1) {
            int l = __builtin_ctz(m);
            addr[na++] = in.addr[l] << 5 | in.size[l];  // address, then size in the low bits
        }
        sort_small(addr, na);
        uint64_t distinct = 0;
        for (int i = 0; i < na; ++i)
            if (!i || addr[i] >> 5 != addr[i - 1] >> 5) distinct += addr[i] & 31;
        *ideal = std::min<uint64_t>(unique, (distinct + 31) / 32);
        return unique;
    }

    // Atomics of several lanes on one word cannot share a sector's transaction (each
    // is applied in turn): a sector takes as many as the most lanes on one of its
    // words (ncu: 32 sectors for a warp's atomicAdd on one counter). The ideal is
    // the distinct sectors.
    static uint64_t atomic_transactions(const Instance& in, uint64_t unique, uint64_t* ideal) {
        uint64_t addr[32];
        int n = 0;
        for (uint32_t m = in.mask; m; m &= m - 1) addr[n++] = in.addr[__builtin_ctz(m)];
        sort_small(addr, n);
        uint64_t total = 0, most = 0, run = 0;
        for (int i = 0; i < n; ++i) {
            const bool same_sector = i && addr[i] >> 5 == addr[i - 1] >> 5;
            run = i && addr[i] == addr[i - 1] ? run + 1 : 1;
            if (!same_sector) { total += most; most = 0; }
            if (run > most) most = run;
        }
        *ideal = unique;
        return total + most;
    }

    // Every active lane has the address of lane ^ 1, or every active lane
    // that of lane ^ 2 (its partner active too).
    static bool lanes_pair_up(const Instance& in) {
        for (unsigned d = 1; d <= 2; d <<= 1) {
            bool same = true;
            for (uint32_t m = in.mask; m && same; m &= m - 1) {
                unsigned l = __builtin_ctz(m), partner = l ^ d;
                same = (in.mask >> partner & 1u) && in.addr[partner] == in.addr[l];
            }
            if (same) return true;
        }
        return false;
    }

    static uint64_t shared_wavefronts(const Instance& in, unsigned kind, uint64_t* ideal) {
        unsigned size = in.size[__builtin_ctz(in.mask)];
        unsigned lanes = size == 8 ? 16 : size < 16 ? 32
                       : kind == ACCESS_LOAD && lanes_pair_up(in) ? 16 : 8;
        unsigned words_each = size >= 4 ? size / 4 : 1;
        uint64_t total = 0, phases = 0;
        for (unsigned p = 0; p < 32; p += lanes) {
            uint32_t m = lanes == 32 ? in.mask : (in.mask >> p) & ((1u << lanes) - 1);
            if (!m) continue;
            ++phases;
            uint64_t words[64];  // a phase moves at most 256 bytes (16 lanes of 16)
            int n = 0;
            for (; m; m &= m - 1) {
                int l = (int)p + __builtin_ctz(m);
                uint64_t w0 = in.addr[l] >> 2;
                for (unsigned j = 0; j < words_each && n < 64; ++j) words[n++] = w0 + j;
            }
            sort_small(words, n);
            unsigned per_bank[32] = {0}, most = 0;
            for (int i = 0; i < n; ++i) {
                if (i && words[i] == words[i - 1]) continue;
                unsigned c = ++per_bank[words[i] & 31];
                if (c > most) most = c;
            }
            total += most;
        }
        *ideal = phases;
        return total;
    }

    AccessLaunch launch_;
    std::vector<char> innermost_;       // per loop: no loop inside it
    std::vector<uint32_t> running_;     // loop * 32 + lane of the innermost loops' runs begun
    std::unordered_map<uint64_t, std::array<uint32_t, 3>> trips_;  // run -> most n, q, r
    std::vector<uint32_t> iterations_;  // per loop and lane: iterations in this delivery (restarted
                                        // with each iteration of an enclosing loop)
    std::vector<std::vector<uint32_t>> chains_;  // per loop: the loops around it, outermost first, and it
    std::vector<std::vector<uint32_t>> inner_;   // per loop: the loops inside it, at any depth
    std::unordered_map<uint64_t, SiteTotals> totals_;
    Slot slots_[kSlots];
    Slot* used_slots_[kSlots];
    unsigned used_ = 0;
    uint32_t stamp_ = 0;
    std::vector<Instance> pool_;
    size_t pool_used_ = 0;
    uint64_t blocks_ = 0;
    uint64_t reuse_[2][kReuseBuckets] = {};  // re-accesses of a sector: loads, stores and atomics
};

AccessConsumer* make_counter(const AccessLaunch& L) {
    static std::mutex mu;  // the first OS thread of a launch resets the footprint
    static uint64_t last = 0;
    {
        std::lock_guard<std::mutex> lk(mu);
        if (last != L.serial) {
            g_footprint.reset(L.global_lo, L.global_hi);
            last = L.serial;
        }
    }
    return new Counter(L);
}

struct Registration {
    Registration() {
        register_access_consumer(0, make_counter,
                                 NEED_GLOBAL | NEED_SHARED | NEED_BLOCKS | NEED_ITERATIONS);
    }
} registration;

}  // namespace

// A copy by the copy engine (the simulator's stand-in for cp.async.bulk): the
// bytes it reads cross DRAM like the loads' (the footprint) and make no LSU
// request, as on a GPU.
void counts_bulk_read(uintptr_t p, size_t n) {
    if (!g_footprint.words || n == 0 || p < g_footprint.lo) return;
    size_t first = (p - g_footprint.lo) >> 5, last = (p + n - 1 - g_footprint.lo) >> 5;
    for (size_t s = first; s <= last && s < g_footprint.words * 64; ++s)
        Footprint::mark(g_footprint.read, s);
}
