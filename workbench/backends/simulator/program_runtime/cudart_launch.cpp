// Kernel launches of whole programs on the simulator, and what the runtime API says
// about a kernel: function attributes and occupancy.
//
// The simulator does not compile kernels for a GPU, so it does not know their registers
// or static shared memory: the figures assume 32 registers a thread and no static shared
// memory (a small kernel's), with the device's own limits (threads, blocks, warps, shared
// memory per multiprocessor), the rules of CUDA's occupancy calculator.
#include <cctype>
#include <cstdlib>
#include <memory>
#include <set>
#include <vector>

#include "cudart_internal.h"

static const int kAssumedRegisters = 32;
static uint32_t g_launch_timeout_ms = 0;
static bool g_timeout_read = false;

// -- kernels by name --------------------------------------------------------------------
// The top-level arguments of an API call's argument text.
static std::vector<std::string> split_arguments(const char* text) {
    std::vector<std::string> out(1);
    int depth = 0;
    for (const char* c = text; *c; ++c) {
        if (*c == '(' || *c == '[' || *c == '{' || *c == '<') ++depth;
        else if (*c == ')' || *c == ']' || *c == '}' || *c == '>') --depth;
        if (*c == ',' && depth == 0) { out.emplace_back(); continue; }
        out.back() += *c;
    }
    return out;
}

// A kernel as written before <<< or as an API call's argument ("ns::k<float>", "&k",
// "(void*)k", "reinterpret_cast<const void*>(k)"): its last name outside template
// arguments and casts.
static std::string kernel_key(const std::string& text) {
    static const char* skip[] = {"reinterpret_cast", "static_cast", "const_cast", "const", "void", "char",
                                 "unsigned", "volatile", nullptr};
    std::string last, word;
    int angle = 0;
    auto end_word = [&] {
        if (word.empty()) return;
        bool keyword = false;
        for (const char** k = skip; *k; ++k) keyword |= word == *k;
        if (!keyword && !isdigit((unsigned char)word[0])) last = word;
        word.clear();
    };
    for (char c : text) {
        if (c == '<') { end_word(); ++angle; continue; }
        if (c == '>') { if (angle) --angle; continue; }
        if (angle) continue;
        if (isalnum((unsigned char)c) || c == '_') word += c;
        else end_word();
    }
    end_word();
    return last;
}
std::string kernel_argument(const char* text, int index) {
    std::vector<std::string> args = split_arguments(text);
    return index < (int)args.size() ? kernel_key(args[(size_t)index]) : std::string();
}

// cudaFuncAttributeMaxDynamicSharedMemorySize set per kernel (the opt-in above 48 KiB).
static std::map<std::string, int> g_max_dynamic_shared;
void reset_launch_state() { g_max_dynamic_shared.clear(); }

static size_t allowed_dynamic_shared(const std::string& key) {
    auto it = g_max_dynamic_shared.find(key);
    return it == g_max_dynamic_shared.end() ? g_prop.sharedMemPerBlock : (size_t)it->second;
}

extern "C" cudaError_t __wbsim_func_set_attribute(const char* text, int attribute, int value) {
    API_ENTER();
    std::string key = kernel_argument(text, 0);
    if (attribute == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value > g_prop.sharedMemPerBlockOptin)
            return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute(%s, cudaFuncAttributeMaxDynamicSharedMemorySize, "
                        "%d): the device allows at most %zu bytes per block", key.c_str(), value,
                        g_prop.sharedMemPerBlockOptin);
        g_max_dynamic_shared[key] = value;
    } else if (attribute == cudaFuncAttributePreferredSharedMemoryCarveout) {
        if (value < -1 || value > 100)
            return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute(%s, cudaFuncAttributePreferredSharedMemoryCarveout, "
                        "%d): a percentage (0-100) or -1", key.c_str(), value);
    } else if (attribute < cudaFuncAttributeMaxDynamicSharedMemorySize || attribute >= cudaFuncAttributeMax) {
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: %d is not a cudaFuncAttribute", attribute);
    }
    return cudaSuccess;
}
extern "C" cudaError_t __wbsim_func_get_attributes(const char* text, cudaFuncAttributes* a) {
    API_ENTER();
    if (!a) return fail(cudaErrorInvalidValue, "cudaFuncGetAttributes: attr is NULL");
    std::string key = kernel_argument(text, 1);
    memset(a, 0, sizeof *a);
    a->maxThreadsPerBlock = g_prop.maxThreadsPerBlock;
    a->numRegs = kAssumedRegisters;
    a->ptxVersion = a->binaryVersion = g_prop.major * 10 + g_prop.minor;
    a->maxDynamicSharedSizeBytes = (int)allowed_dynamic_shared(key);
    a->preferredShmemCarveout = -1;
    return cudaSuccess;
}
extern "C" cudaError_t __wbsim_func_set_cache(const char*, int config) {
    API_ENTER();
    if (config < cudaFuncCachePreferNone || config > cudaFuncCachePreferEqual)
        return fail(cudaErrorInvalidValue, "cudaFuncSetCacheConfig: %d is not a cudaFuncCache", config);
    return cudaSuccess;
}

// -- occupancy ---------------------------------------------------------------------------
static int blocks_per_multiprocessor(int block_size, size_t dynamic_shared) {
    const cudaDeviceProp& p = g_prop;
    if (block_size <= 0 || block_size > p.maxThreadsPerBlock) return 0;
    int warps = (block_size + p.warpSize - 1) / p.warpSize;
    int by_warps = p.maxThreadsPerMultiProcessor / p.warpSize / warps;
    int regs_per_warp = (kAssumedRegisters * p.warpSize + 255) / 256 * 256;
    int by_registers = p.regsPerMultiprocessor / regs_per_warp / warps;
    size_t shared = (dynamic_shared + p.reservedSharedMemPerBlock + 127) / 128 * 128;
    int by_shared = (int)(p.sharedMemPerMultiprocessor / shared);
    int blocks = p.maxBlocksPerMultiProcessor;
    if (by_warps < blocks) blocks = by_warps;
    if (by_registers < blocks) blocks = by_registers;
    if (by_shared < blocks) blocks = by_shared;
    return blocks;
}

extern "C" cudaError_t __wbsim_occupancy_blocks(const char*, int* blocks, int block_size, size_t dynamic_shared,
                                                unsigned) {
    API_ENTER();
    if (!blocks) return fail(cudaErrorInvalidValue, "cudaOccupancyMaxActiveBlocksPerMultiprocessor: numBlocks is NULL");
    if (block_size <= 0) return fail(cudaErrorInvalidValue, "cudaOccupancyMaxActiveBlocksPerMultiprocessor: "
                                     "a block size of %d", block_size);
    *blocks = dynamic_shared > g_prop.sharedMemPerBlockOptin ? 0 : blocks_per_multiprocessor(block_size, dynamic_shared);
    return cudaSuccess;
}

// As CUDA's cudaOccupancyMaxPotentialBlockSizeVariableSMemWithFlags: every block size
// from the largest down, in warps; the first with the most threads resident wins.
extern "C" cudaError_t __wbsim_occupancy_block_size(const char*, int* min_grid, int* block_size,
                                                    size_t (*block_to_shared)(void*, int), void* state,
                                                    size_t shared, int limit, unsigned) {
    API_ENTER();
    if (!min_grid || !block_size)
        return fail(cudaErrorInvalidValue, "cudaOccupancyMaxPotentialBlockSize: minGridSize or blockSize is NULL");
    const cudaDeviceProp& p = g_prop;
    int max_block = p.maxThreadsPerBlock;
    if (limit > 0 && limit < max_block) max_block = limit;
    int aligned = (max_block + p.warpSize - 1) / p.warpSize * p.warpSize;
    int best_blocks = 0, best_size = 0, best_threads = 0;
    for (int tried = aligned; tried > 0; tried -= p.warpSize) {
        int size = tried < max_block ? tried : max_block;
        size_t dynamic = block_to_shared ? block_to_shared(state, size) : shared;
        int blocks = dynamic > p.sharedMemPerBlockOptin ? 0 : blocks_per_multiprocessor(size, dynamic);
        if (blocks * size > best_threads) {
            best_threads = blocks * size;
            best_blocks = blocks;
            best_size = size;
        }
        if (best_threads == p.maxThreadsPerMultiProcessor) break;
    }
    *min_grid = best_blocks * p.multiProcessorCount;
    *block_size = best_size;
    return cudaSuccess;
}

extern "C" cudaError_t __wbsim_occupancy_shared(const char*, size_t* shared, int blocks, int block_size) {
    API_ENTER();
    if (!shared || blocks <= 0) return fail(cudaErrorInvalidValue);
    if (blocks_per_multiprocessor(block_size, 0) < blocks) { *shared = 0; return cudaSuccess; }
    size_t per_block = g_prop.sharedMemPerMultiprocessor / (size_t)blocks;
    per_block = per_block / 128 * 128;
    per_block = per_block > g_prop.reservedSharedMemPerBlock ? per_block - g_prop.reservedSharedMemPerBlock : 0;
    *shared = per_block < g_prop.sharedMemPerBlockOptin ? per_block : g_prop.sharedMemPerBlockOptin;
    return cudaSuccess;
}

// -- launches ------------------------------------------------------------------------------
extern "C" unsigned __wbsim_ptx_smid(void) {
    uint64_t linear = blockIdx.x + (uint64_t)gridDim.x * (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z);
    return (unsigned)(linear % (uint64_t)g_prop.multiProcessorCount);
}

static cudaError_t run_now(const wbsim_kernel* k, const __wbsim_config* c) {
    if (!g_timeout_read) {
        g_timeout_read = true;
        if (const char* t = getenv("WBSIM_LAUNCH_TIMEOUT_MS")) g_launch_timeout_ms = (uint32_t)atoi(t);
    }
    flush_device_output();  // the launch before this one's (a GPU writes it now at the latest)
    unsigned grid[3] = {c->grid.x, c->grid.y, c->grid.z}, block[3] = {c->block.x, c->block.y, c->block.z};
    {
        DeviceOpen open;
        g_cooperative = c->cooperative != 0;
        launch_begins(g_launch_timeout_ms);
        wbsim_run_grid(k, grid, block, c->shmem);
        launch_ends();
        g_cooperative = false;
    }
    if (take_failed_assert()) g_sticky = cudaErrorAssert;
    return cudaSuccess;
}

static cudaError_t check_configuration(const wbsim_kernel* k, const __wbsim_config* c) {
    const cudaDeviceProp& p = g_prop;
    const dim3 g = c->grid, b = c->block;
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (g.x == 0 || g.y == 0 || g.z == 0 || threads == 0)
        return fail(cudaErrorInvalidConfiguration, "launch of %s: a grid or block dimension is 0", k->name);
    if (threads > (unsigned)p.maxThreadsPerBlock || b.x > (unsigned)p.maxThreadsDim[0] ||
        b.y > (unsigned)p.maxThreadsDim[1] || b.z > (unsigned)p.maxThreadsDim[2])
        return fail(cudaErrorInvalidConfiguration, "launch of %s: a block of (%u,%u,%u) = %llu threads; "
                    "the device allows %d threads, at most (%d,%d,%d)", k->name, b.x, b.y, b.z, threads,
                    p.maxThreadsPerBlock, p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2]);
    if (g.x > (unsigned)p.maxGridSize[0] || g.y > (unsigned)p.maxGridSize[1] || g.z > (unsigned)p.maxGridSize[2])
        return fail(cudaErrorInvalidConfiguration, "launch of %s: a grid of (%u,%u,%u) blocks; the device "
                    "allows at most (%d,%d,%d)", k->name, g.x, g.y, g.z, p.maxGridSize[0], p.maxGridSize[1],
                    p.maxGridSize[2]);
    if (c->shmem > p.sharedMemPerBlockOptin)
        return fail(cudaErrorInvalidValue, "launch of %s: %zu bytes of dynamic shared memory; the device "
                    "allows at most %zu per block", k->name, c->shmem, p.sharedMemPerBlockOptin);
    std::string key = kernel_key(k->name);
    if (c->shmem > p.sharedMemPerBlock && c->shmem > allowed_dynamic_shared(key))
        return fail(cudaErrorInvalidValue, "launch of %s: %zu bytes of dynamic shared memory, above the "
                    "%zu a block gets without opting in; call cudaFuncSetAttribute(%s, "
                    "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) first (up to %zu)", k->name,
                    c->shmem, allowed_dynamic_shared(key), key.c_str(), p.sharedMemPerBlockOptin);
    if (!known_stream(c->stream))
        return fail(cudaErrorInvalidResourceHandle, "launch of %s: unknown stream %p", k->name, (void*)c->stream);
    if (c->cooperative) {
        unsigned long long most = (unsigned long long)blocks_per_multiprocessor((int)threads, c->shmem) *
                                  (unsigned long long)p.multiProcessorCount;
        if ((unsigned long long)g.x * g.y * g.z > most)
            return fail(cudaErrorCooperativeLaunchTooLarge, "cooperative launch of %s: %llu blocks; at most %llu "
                        "can be resident at once (cudaOccupancyMaxActiveBlocksPerMultiprocessor x %d "
                        "multiprocessors)", k->name, (unsigned long long)g.x * g.y * g.z, most,
                        p.multiProcessorCount);
    }
    return cudaSuccess;
}

// A launch's kernel by name: the text before <<<, or cudaLaunchKernel's first argument.
static const char* display_name(const char* text) {
    static std::set<std::string> names;  // for good: a fault report names the kernel
    if (!strchr(text, ',')) return text;
    return names.insert(kernel_argument(text, 0)).first->c_str();
}

extern "C" cudaError_t __wbsim_program_launch(const __wbsim_launch_request* request) {
    if (t_in_kernel)  // before the lock, which the launching host thread holds
        fault_now(WBSIM_FAULT_UNSUPPORTED, "a kernel launched a kernel (dynamic parallelism), which "
                  "the simulator does not support");
    API_ENTER();
    wbsim_kernel named = *request->kernel;
    named.name = display_name(named.name);
    __wbsim_launch_request launch = *request;
    launch.kernel = &named;
    const __wbsim_launch_request* r = &launch;
    cudaError_t e = check_configuration(r->kernel, r->config);
    if (e != cudaSuccess) return e;
    if (is_capturing(r->config->stream)) {  // the launch keeps a copy of its arguments for every replay
        std::shared_ptr<void> args(r->copy(r->kernel->args), r->release);
        wbsim_kernel kernel = *r->kernel;
        __wbsim_config config = *r->config;
        capture(config.stream, [args, kernel, config]() mutable {
            kernel.args = args.get();
            return run_now(&kernel, &config);
        }, "a kernel launch");
        return cudaSuccess;
    }
    return run_now(r->kernel, r->config);
}

extern "C" cudaError_t __wbsim_launch_untyped(const char* text, const void*) {
    API_ENTER();
    std::string key = kernel_argument(text, 0);
    return fail(cudaErrorInvalidDeviceFunction, "cudaLaunchKernel(%s, ...): the simulator needs the kernel "
                "itself, not a void* pointer to it (it calls the kernel with its arguments' types); pass "
                "the kernel's name", key.c_str());
}
extern "C" cudaError_t __wbsim_launch_error(const char* text, const char* what) {
    API_ENTER();
    return fail(cudaErrorInvalidValue, "cudaLaunchKernel(%s, ...): %s", kernel_argument(text, 0).c_str(), what);
}
