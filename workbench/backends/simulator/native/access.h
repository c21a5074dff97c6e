// Memory accesses of an instrumented launch, and who consumes them.
//
// A kernel library built for counting (build.py: INSTRUMENT_FLAGS) is compiled
// with g++'s ThreadSanitizer instrumentation but never linked with its
// runtime: every load and store of the kernel calls __tsan_readN/__tsan_writeN
// (atomics __tsan_atomicN_*, basic blocks __sanitizer_cov_trace_pc), and
// access.cpp defines those functions in the worker. They keep what the GPU
// would see as global memory (the arena) or shared memory (this block's
// static __shared__ variables and its dynamic buffer) and drop the rest
// (the fibers' stacks, the worker's own variables): one AccessEvent each,
// buffered per warp of the block running on this OS thread.
//
// A warp's buffer goes to the consumers when its lanes have run up to the same
// point: at a __syncthreads that releases, when a block in direct mode moves
// on to the next warp, and at the block's end. A consumer sees one warp's
// events in the order its lanes ran them (each lane's own in program order);
// it groups the k-th execution of a site by each lane into one warp-level
// instruction, as a GPU's lanes run one instruction together (SIMT). A
// completed __syncwarp is an event of each lane that took part (ACCESS_SYNC,
// its address the group's lane mask; a group's events come one after another).
// Basic blocks (__sanitizer_cov_trace_pc, for the divergence estimate) are
// not events: each warp's count per block and lane is delivered with its
// events (BlockCount), which keeps loops cheap.
//
// Consumers are per OS thread (no locks on the hot path); at the launch's end
// each one is merged into the first of its kind, which writes the reply.
// access_counts.cpp is the profiler's consumer (kind bit 0); the sanitizer's
// are sanitize_races.cpp (1), sanitize_init.cpp (2) and sanitize_sync.cpp (3).
// A consumer says which events it needs (AccessNeeds): the hooks drop the
// rest, and mark or deliver what only some consumers ask for.
#ifndef WBSIM_ACCESS_H
#define WBSIM_ACCESS_H
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "wbsim_abi.h"

enum AccessKind : uint8_t {
    ACCESS_LOAD = 0,
    ACCESS_STORE = 1,
    ACCESS_ATOMIC = 2,  // one atomic operation (a CAS loop of the prelude counts once)
    ACCESS_BLOCK = 3,   // (sites of basic blocks in the counters' results; never an event)
    ACCESS_SYNC = 4,    // the lane completed a __syncwarp (address: the group's lanes; no site)
    ACCESS_ITER = 5,    // the lane entered a block that counts a loop's iterations (address:
                        // the loop's index, see AccessLaunch::loop_markers; site: the block's)
};
// An atomic that does not read the old value (an exchange, a store) carries
// this piece number (atomics are never split into pieces).
const unsigned kPieceAtomicWrite = 1;
// A store that left the bytes as they were: a flag in AccessEvent::size, set
// only for shared-memory stores and only where a consumer needs values.
const uint8_t kSizeUnchanged = 0x80;
enum AccessSpace : uint8_t { SPACE_GLOBAL = 0, SPACE_SHARED = 1, SPACE_NONE = 2 };

// A shared-memory address in an event is the same in every OS thread: a
// static __shared__ variable's byte at kSharedStatic + its offset in the
// kernel library's thread-local segment, dynamic shared memory's at
// kSharedDynamic + its offset in the block's buffer. (Banks count the same:
// the variables are 16-byte aligned in both places, and moving every address
// of an access by a multiple of 4 bytes only renames the banks.)
const uint64_t kSharedStatic = 1ull << 40;
const uint64_t kSharedDynamic = 2ull << 40;

struct AccessEvent {
    uint64_t addr;        // 0 for ACCESS_SYNC
    uint32_t site;        // return address of the hook, minus the library's base
    uint16_t tid_piece;   // linear thread index in the block (10 bits: lane = tid % 32),
                          // then which piece of a wider access (6 bits; 0 for most)
    uint8_t size;         // bytes (1 to 16; a wider access is split into pieces), kSizeUnchanged
    uint8_t kind_space;   // AccessKind, then AccessSpace << 4
    unsigned tid() const { return tid_piece & 1023u; }
    unsigned piece() const { return tid_piece >> 10; }
    unsigned kind() const { return kind_space & 15u; }
    unsigned space() const { return kind_space >> 4; }
    unsigned bytes() const { return size & 31u; }
    bool unchanged() const { return (size & kSizeUnchanged) != 0; }
};
static_assert(sizeof(AccessEvent) == 16, "access.cpp writes events as two words");

// How often each lane of a warp entered one basic block since the warp's
// last delivery.
struct BlockCount {
    uint32_t site;
    uint32_t loop;   // the block counts iterations of loop `loop - 1` (loop_markers); 0: none
    uint32_t lanes[32];
};

// The block whose events are delivered.
struct BlockContext {
    uint3 index;
    uint64_t linear;         // blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)
    unsigned nthreads;
    unsigned nwarps;
    uint32_t barrier_epoch;  // __syncthreads released in this block so far
};

// What a consumer knows of the launch.
struct AccessLaunch {
    const wbsim_launch* launch;
    uintptr_t global_lo, global_hi;  // the arena's allocated part
    uint64_t blocks;                 // in the grid
    uint64_t serial;                 // instrumented launches so far, this one included
    uint64_t static_lo, static_hi;   // canonical addresses of the static __shared__ variables' hull
    uint64_t dynamic_bytes;          // dynamic shared memory of a block
    const unsigned char* data;       // what the request gave the consumers (worker.cpp), or null
    size_t data_size;
    // The kernel library's loops (machine_code.py: loop_sites), numbered from
    // 0: the blocks whose entry counts an iteration of a loop (block site,
    // loop) ascending by site; each loop's enclosing loop (-1: none); the
    // access sites inside loops with their innermost loop, ascending by site.
    const std::pair<uint32_t, uint32_t>* loop_markers;
    size_t nloop_markers;
    const int32_t* loop_parents;
    size_t nloops;
    const std::pair<uint32_t, uint32_t>* loop_sites;
    size_t nloop_sites;
};

// What a consumer needs of the hooks (a mask, given at registration).
enum AccessNeeds : unsigned {
    NEED_GLOBAL = 1,    // events of global memory
    NEED_SHARED = 2,    // events of shared memory
    NEED_VALUES = 4,    // shared stores that leave the bytes unchanged marked (kSizeUnchanged)
    NEED_ORDER = 8,     // a warp's buffer delivered before each global atomic and at each fence,
                        // so that what its lanes wrote is seen before another block can know of it
    NEED_BLOCKS = 16,   // basic blocks counted (warp_blocks)
    NEED_ITERATIONS = 32,  // an ACCESS_ITER event each time a lane enters a loop's header block
};

class AccessConsumer {
public:
    virtual ~AccessConsumer() {}
    // One warp's events since its last delivery, then its basic blocks'
    // counts over the same time.
    virtual void warp_events(const BlockContext& b, unsigned warp, const AccessEvent* ev, size_t n) = 0;
    virtual void warp_blocks(const BlockContext& b, unsigned warp, const BlockCount* counts,
                             size_t n) {
        (void)b; (void)warp; (void)counts; (void)n;
    }
    // Every warp of the block was delivered; the next barrier epoch starts.
    virtual void barrier(const BlockContext& b) { (void)b; }
    // The lanes `lanes` of warp `warp` completed a warp operation (op:
    // wbsim_warp_opcode); a __syncwarp is also an ACCESS_SYNC event of each.
    virtual void warp_sync(const BlockContext& b, unsigned warp, uint32_t lanes, int op) {
        (void)b; (void)warp; (void)lanes; (void)op;
    }
    virtual void block_end(const BlockContext& b) { (void)b; }
    // Thread `tid` called warp operation `op` with a mask that leaves the
    // thread itself out (`site`: where, as an event's site).
    virtual void warp_misuse(const BlockContext& b, unsigned tid, uint32_t mask, int op,
                             uint32_t site) {
        (void)b; (void)tid; (void)mask; (void)op; (void)site;
    }
    // Fold the consumer of another OS thread (same kind) into this one.
    virtual void merge(AccessConsumer& other) = 0;
    // The launch's results, appended to the reply.
    virtual void write(std::string& out) = 0;
};

typedef AccessConsumer* (*AccessConsumerFactory)(const AccessLaunch&);
// Kind `bit` of the request's consumer mask (0: the profiler's counters),
// needing `needs` (AccessNeeds).
void register_access_consumer(unsigned bit, AccessConsumerFactory make,
                              unsigned needs = NEED_GLOBAL | NEED_SHARED | NEED_BLOCKS);
template <class T> inline void put_bytes(std::string& out, T v) { out.append((const char*)&v, sizeof v); }

// -- called by the other parts of the worker -------------------------------------
extern bool g_access_on;  // an instrumented launch is running
// An instrumented launch: the request's instrumentation part (see worker.cpp)
// was parsed into these; returns false with `error` set when it cannot start.
struct AccessSetup {
    uint32_t consumers = 0;                  // mask of consumer kinds
    void* library = nullptr;                 // dlopen handle of the kernel library
    const void* entry = nullptr;             // an address in it (its base comes from dladdr)
    uint64_t anchor_offset = 0;              // the anchor's offset in the thread-local segment
    std::vector<std::pair<int64_t, uint64_t>> shared_vars;  // offset from the anchor, bytes
    std::vector<std::string> accessors;      // of the __device__ variables (source.global_symbol)
    std::vector<std::pair<uint64_t, uint64_t>> device_vars; // their address and bytes
    std::vector<std::pair<uint32_t, uint32_t>> loop_markers;  // AccessLaunch::loop_markers
    std::vector<int32_t> loop_parents;                         // AccessLaunch::loop_parents
    std::vector<std::pair<uint32_t, uint32_t>> loop_sites;    // AccessLaunch::loop_sites
    uint32_t sample_stride = 1;              // record blocks whose linear index % stride == 0
    std::string data;                        // for the consumers (AccessLaunch::data)
};
bool access_launch_begins(const AccessSetup& setup, const wbsim_launch* L, uintptr_t global_lo,
                          uintptr_t global_hi, std::string& error);
void access_launch_ends(std::string& out);
// Warp buffers delivered early in this launch (too many events between two
// barriers): their warp-level instructions were split there.
uint64_t access_cut_deliveries();  // merges and writes every consumer's results
void access_enter_grid(size_t shared_bytes);  // an OS thread starts running blocks
void access_leave_grid();
void access_block_begins();
void access_block_ends();
void access_barrier_released();
void access_warp_synced(unsigned warp, uint32_t lanes, int op);
// Thread `tid` of the block called warp operation `op` with `mask` leaving it out.
void access_warp_misuse(unsigned tid, uint32_t mask, int op, const void* pc);
// The fiber of thread `tid` (linear, in the block) runs from now on.
void access_thread_runs(unsigned tid);
#endif
