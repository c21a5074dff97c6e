// synccheck (consumer kind 3, see access.h): misuse of the warp's barriers,
// as compute-sanitizer's synccheck reports it on sm_70 and later.
//
// A thread that calls __syncwarp (or another *_sync warp operation) with a
// mask that leaves the thread itself out is an error ("Barrier error
// detected. Invalid arguments"), counted once per thread and call. A
// __syncthreads that only part of the block reaches is no error here, as on
// the GPU since Volta: it releases when every thread that has not returned
// arrived, and the kernel completes. This consumer needs no memory events:
// warp.cpp tells it of each misuse.
#include <map>

#include "access.h"
#include "runtime.h"

namespace {

struct Finding {
    uint64_t count = 0;
    uint64_t block = ~0ull;
    uint32_t tid = 0, mask = 0;
};

class Barriers : public AccessConsumer {
public:
    void warp_events(const BlockContext&, unsigned, const AccessEvent*, size_t) override {}

    void warp_misuse(const BlockContext& b, unsigned tid, uint32_t mask, int op,
                     uint32_t site) override {
        Finding& f = findings_[(uint64_t)site << 8 | (uint8_t)op];
        if (f.count++ == 0 || b.linear < f.block) {
            f.block = b.linear;
            f.tid = tid;
            f.mask = mask;
        }
    }

    void merge(AccessConsumer& other) override {
        for (auto& kv : static_cast<Barriers&>(other).findings_) {
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
            out.push_back(0);                       // invalid arguments
            out.push_back(0);                       // an error
            out.push_back((char)255);
            out.push_back((char)(kv.first & 0xff));  // the warp operation
            put_bytes<uint32_t>(out, 0);
            put_bytes<uint32_t>(out, (uint32_t)(kv.first >> 8));
            put_bytes<uint64_t>(out, f.count);
            put_bytes<uint64_t>(out, f.block);
            put_bytes<uint32_t>(out, 0);
            put_bytes<uint32_t>(out, f.tid);
            put_bytes<uint64_t>(out, 0);
            put_bytes<uint32_t>(out, f.mask);
            put_bytes<uint32_t>(out, 0);
        }
    }

private:
    std::map<uint64_t, Finding> findings_;
};

AccessConsumer* make_barriers(const AccessLaunch&) { return new Barriers(); }

struct Registration {
    Registration() { register_access_consumer(3, make_barriers, 0); }
} registration;

}  // namespace
