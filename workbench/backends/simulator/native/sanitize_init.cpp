// initcheck (consumer kind 2, see access.h): reads of global memory that
// nothing wrote since it was allocated, as compute-sanitizer's initcheck
// reports them.
//
// The request names the allocations that are not (wholly) initialised and,
// for each, a bitmap of its bytes that were written (bit i of byte j: byte
// 8j + i; the notebook side keeps them between launches). Global memory
// outside them counts as initialised. A load, or an atomic that reads (not an
// exchange or a store: kPieceAtomicWrite), of a byte whose bit is clear is an
// uninitialised read; stores and atomics set the bits. The bitmaps are one
// copy for every OS thread of the launch (bits set atomically); NEED_ORDER
// delivers a warp's events before its atomics and at its fences, so that a
// block that learns through an atomic counter that another block has written
// (the "last block" reductions) reads what that block's stores marked. The
// reply carries the findings, then the updated bitmaps.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "access.h"
#include "runtime.h"

namespace {

struct Region {
    uint64_t lo, hi;
    size_t offset;  // of its bitmap in Shadow::bits
};

struct Shadow {
    uint64_t serial = 0;
    std::vector<Region> regions;  // sorted by address
    std::vector<unsigned char> bits;
};
Shadow g_shadow;
std::mutex g_shadow_mu;

void load_shadow(const AccessLaunch& L) {
    g_shadow.regions.clear();
    g_shadow.bits.clear();
    const unsigned char* p = L.data;
    const unsigned char* end = p ? p + L.data_size : p;
    if (!p || end - p < 4) return;
    uint32_t n;
    memcpy(&n, p, 4);
    p += 4;
    size_t offset = 0;
    for (uint32_t i = 0; i < n && end - p >= 16; ++i, p += 16) {
        uint64_t lo, bytes;
        memcpy(&lo, p, 8);
        memcpy(&bytes, p + 8, 8);
        g_shadow.regions.push_back(Region{lo, lo + bytes, offset});
        offset += (bytes + 7) / 8;
    }
    size_t have = (size_t)(end - p);
    g_shadow.bits.assign(p, p + std::min(have, offset));
    g_shadow.bits.resize(offset, 0);
    std::sort(g_shadow.regions.begin(), g_shadow.regions.end(),
              [](const Region& a, const Region& b) { return a.lo < b.lo; });
}

struct Finding {
    uint64_t count = 0;
    uint64_t block = ~0ull;
    uint32_t tid = 0;
    uint64_t addr = 0;
    uint8_t kind = 0, size = 0;
};

class Uninitialised : public AccessConsumer {
public:
    void warp_events(const BlockContext& b, unsigned, const AccessEvent* ev, size_t n) override {
        if (g_shadow.regions.empty()) return;
        for (size_t i = 0; i < n; ++i) {
            const AccessEvent& e = ev[i];
            unsigned kind = e.kind();
            if (e.space() != SPACE_GLOBAL || kind == ACCESS_SYNC) continue;
            const Region* r = region(e.addr);
            if (!r) continue;
            uint64_t lo = e.addr, hi = std::min<uint64_t>(e.addr + e.bytes(), r->hi);
            bool reads = kind == ACCESS_LOAD || (kind == ACCESS_ATOMIC && e.piece() != kPieceAtomicWrite);
            if (reads && !written(*r, lo, hi)) report(b, e);
            if (kind != ACCESS_LOAD) mark(*r, lo, hi);
        }
    }

    void merge(AccessConsumer& other) override {
        for (auto& kv : static_cast<Uninitialised&>(other).findings_) {
            Finding& f = findings_[kv.first];
            uint64_t count = f.count + kv.second.count;
            if (kv.second.block < f.block) f = kv.second;
            f.count = count;
        }
    }

    void write(std::string& out) override {
        put_bytes<uint32_t>(out, (uint32_t)findings_.size());
        for (auto& kv : findings_) {
            const Finding& f = kv.second;
            out.push_back(0);  // an uninitialised read
            out.push_back(0);  // an error
            out.push_back((char)255);
            out.push_back((char)f.kind);
            put_bytes<uint32_t>(out, 0);
            put_bytes<uint32_t>(out, kv.first);
            put_bytes<uint64_t>(out, f.count);
            put_bytes<uint64_t>(out, f.block);
            put_bytes<uint32_t>(out, 0);
            put_bytes<uint32_t>(out, f.tid);
            put_bytes<uint64_t>(out, f.addr);
            put_bytes<uint32_t>(out, 0);
            put_bytes<uint32_t>(out, f.size);
        }
        put_bytes<uint32_t>(out, (uint32_t)g_shadow.regions.size());
        out.append((const char*)g_shadow.bits.data(), g_shadow.bits.size());
    }

private:
    static const Region* region(uint64_t a) {
        const auto& v = g_shadow.regions;
        auto it = std::upper_bound(v.begin(), v.end(), a,
                                   [](uint64_t x, const Region& r) { return x < r.lo; });
        if (it == v.begin()) return nullptr;
        --it;
        return a < it->hi ? &*it : nullptr;
    }

    static bool written(const Region& r, uint64_t lo, uint64_t hi) {
        for (uint64_t a = lo; a < hi; ++a) {
            uint64_t i = a - r.lo;
            unsigned char byte = __atomic_load_n(&g_shadow.bits[r.offset + i / 8], __ATOMIC_RELAXED);
            if (!(byte >> (i % 8) & 1u)) return false;
        }
        return true;
    }

    static void mark(const Region& r, uint64_t lo, uint64_t hi) {
        for (uint64_t a = lo; a < hi; ++a) {
            uint64_t i = a - r.lo;
            unsigned char* byte = &g_shadow.bits[r.offset + i / 8];
            unsigned char bit = (unsigned char)(1u << (i % 8));
            if (!(__atomic_load_n(byte, __ATOMIC_RELAXED) & bit))
                __atomic_fetch_or(byte, bit, __ATOMIC_RELAXED);
        }
    }

    void report(const BlockContext& b, const AccessEvent& e) {
        Finding& f = findings_[e.site];
        if (f.count++ == 0 || b.linear < f.block) {
            f.block = b.linear;
            f.tid = e.tid();
            f.addr = e.addr;
            f.kind = (uint8_t)e.kind();
            f.size = (uint8_t)e.bytes();
        }
    }

    std::map<uint32_t, Finding> findings_;
};

AccessConsumer* make_uninitialised(const AccessLaunch& L) {
    std::lock_guard<std::mutex> lk(g_shadow_mu);  // the first OS thread of a launch reads the bitmaps
    if (g_shadow.serial != L.serial) {
        load_shadow(L);
        g_shadow.serial = L.serial;
    }
    return new Uninitialised();
}

struct Registration {
    Registration() { register_access_consumer(2, make_uninitialised, NEED_GLOBAL | NEED_ORDER); }
} registration;

}  // namespace
