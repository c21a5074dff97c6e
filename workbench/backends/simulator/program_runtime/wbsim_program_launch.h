/* Kernel launches of whole programs on the simulator: the <<<>>> syntax (rewritten by
 * programs.py), cudaLaunchKernel and cudaLaunchCooperativeKernel, and the API calls that
 * take a kernel (function attributes, occupancy).
 *
 * A launch `k<<<grid, block, shmem, stream>>>(args)` is rewritten by programs.py into
 * `__wbsim_launch_program("k", __wbsim_cfg(grid, block, shmem, stream), [&](auto... a) {
 * k(a...); }, args)`: the arguments are evaluated once, on the host, and every simulated
 * thread calls the kernel with them (templates are deduced as in CUDA). Launches run when
 * they are made; one captured into a graph keeps a copy of its arguments for the replays.
 *
 * The API calls that take a kernel are macros that pass the text of their arguments along:
 * the runtime knows a kernel by the name written before <<< or as that argument. */
#ifndef WBSIM_PROGRAM_LAUNCH_H
#define WBSIM_PROGRAM_LAUNCH_H
#include <tuple>
#include <type_traits>
#include <utility>

#include "wbsim_abi.h"
#include "wbsim_runtime_types.h"

struct __wbsim_config {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
    int cooperative;
};
/* A launch: the kernel, its configuration, and how to copy (and free) its arguments. */
struct __wbsim_launch_request {
    const wbsim_kernel* kernel;
    const struct __wbsim_config* config;
    void* (*copy)(const void* args);
    void (*release)(void* args);
};
extern "C" cudaError_t __wbsim_program_launch(const struct __wbsim_launch_request* request);

static inline __wbsim_config __wbsim_cfg(dim3 grid, dim3 block, size_t shmem = 0, cudaStream_t stream = 0) {
    __wbsim_config c = {grid, block, shmem, stream, 0};
    return c;
}

/* A failed assert ends the thread that made it (the rest of the launch goes on): the
 * runtime throws this from assert, the thread's call catches it. */
struct __wbsim_thread_exit {};

template <class F, class Tuple> struct __wbsim_program_kernel {
    F call;
    Tuple args;
    static void run_thread(void* p) {
        auto* k = static_cast<__wbsim_program_kernel*>(p);
        try {
            std::apply(k->call, k->args);
        } catch (__wbsim_thread_exit&) {
        }
    }
    static void run_block(void* p) {
        auto* k = static_cast<__wbsim_program_kernel*>(p);
        __wbsim_block_loop([k] {
            try {
                std::apply(k->call, k->args);
            } catch (__wbsim_thread_exit&) {
            }
        });
    }
    static void* copy(const void* p) { return new __wbsim_program_kernel(*static_cast<const __wbsim_program_kernel*>(p)); }
    static void release(void* p) { delete static_cast<__wbsim_program_kernel*>(p); }
};

template <class F, class... A>
static inline cudaError_t __wbsim_launch_program(const char* name, __wbsim_config c, F call, A&&... args) {
    typedef std::tuple<std::decay_t<A>...> Tuple;
    typedef __wbsim_program_kernel<F, Tuple> K;
    K k{call, Tuple(std::forward<A>(args)...)};
    wbsim_kernel kernel = {name, &K::run_block, &K::run_thread, &k};
    __wbsim_launch_request r = {&kernel, &c, &K::copy, &K::release};
    return __wbsim_program_launch(&r);
}

/* ---- cudaLaunchKernel and cudaLaunchCooperativeKernel ---------------------------------------- */
extern "C" cudaError_t __wbsim_launch_error(const char* text, const char* what);
template <class... A, size_t... I>
static inline cudaError_t __wbsim_launch_unpacked(const char* name, __wbsim_config c, void (*f)(A...),
                                                  void** args, std::index_sequence<I...>) {
    return __wbsim_launch_program(name, c, [f](auto... a) { f(a...); },
                                  *static_cast<std::remove_reference_t<A>*>(args[I])...);
}
template <class... A>
static inline cudaError_t __wbsim_launch_kernel(const char* text, int cooperative, void (*f)(A...), dim3 grid,
                                                dim3 block, void** args, size_t shmem = 0,
                                                cudaStream_t stream = 0) {
    __wbsim_config c = {grid, block, shmem, stream, cooperative};
    if (sizeof...(A) > 0 && !args) return __wbsim_launch_error(text, "the argument array (void** args) is NULL");
    return __wbsim_launch_unpacked(text, c, f, args, std::index_sequence_for<A...>{});
}
/* A kernel given as a plain pointer (void*) cannot be called with its arguments' types. */
extern "C" cudaError_t __wbsim_launch_untyped(const char* text, const void* f);
static inline cudaError_t __wbsim_launch_kernel(const char* text, int, const void* f, dim3, dim3, void**,
                                                size_t = 0, cudaStream_t = 0) {
    return __wbsim_launch_untyped(text, f);
}
#define cudaLaunchKernel(...) __wbsim_launch_kernel(#__VA_ARGS__, 0, __VA_ARGS__)
#define cudaLaunchCooperativeKernel(...) __wbsim_launch_kernel(#__VA_ARGS__, 1, __VA_ARGS__)

/* ---- what the API knows of a kernel (by its name) -------------------------------------- */
extern "C" cudaError_t __wbsim_func_set_attribute(const char* text, int attribute, int value);
extern "C" cudaError_t __wbsim_func_get_attributes(const char* text, struct cudaFuncAttributes* attr);
extern "C" cudaError_t __wbsim_func_set_cache(const char* text, int config);
extern "C" cudaError_t __wbsim_occupancy_blocks(const char* text, int* blocks, int block_size,
                                                size_t dynamic_shared, unsigned flags);
/* block_to_shared: the dynamic shared memory a block of n threads uses (a callback, or none) */
extern "C" cudaError_t __wbsim_occupancy_block_size(const char* text, int* min_grid, int* block_size,
                                                    size_t (*block_to_shared)(void* state, int n),
                                                    void* state, size_t shared, int limit, unsigned flags);
extern "C" cudaError_t __wbsim_occupancy_shared(const char* text, size_t* shared, int blocks, int block_size);

template <class T>
static inline cudaError_t __wbsim_func_set_attribute_of(const char* text, T*, enum cudaFuncAttribute attr,
                                                        int value) {
    return __wbsim_func_set_attribute(text, (int)attr, value);
}
#define cudaFuncSetAttribute(...) __wbsim_func_set_attribute_of(#__VA_ARGS__, __VA_ARGS__)

template <class T>
static inline cudaError_t __wbsim_func_get_attributes_of(const char* text, struct cudaFuncAttributes* attr, T*) {
    return __wbsim_func_get_attributes(text, attr);
}
/* the kernel is the second argument: the text after the first top-level comma */
#define cudaFuncGetAttributes(...) __wbsim_func_get_attributes_of(#__VA_ARGS__, __VA_ARGS__)

template <class T>
static inline cudaError_t __wbsim_func_set_cache_of(const char* text, T*, enum cudaFuncCache config) {
    return __wbsim_func_set_cache(text, (int)config);
}
#define cudaFuncSetCacheConfig(...) __wbsim_func_set_cache_of(#__VA_ARGS__, __VA_ARGS__)
template <class T>
static inline cudaError_t __wbsim_func_set_shared_config_of(const char*, T*, enum cudaSharedMemConfig) {
    return cudaSuccess;
}
#define cudaFuncSetSharedMemConfig(...) __wbsim_func_set_shared_config_of(#__VA_ARGS__, __VA_ARGS__)

/* occupancy: the kernel is the second argument of these two... */
template <class T>
static inline cudaError_t __wbsim_occupancy_blocks_of(const char* text, int* blocks, T*, int block_size,
                                                      size_t dynamic_shared, unsigned flags = 0) {
    return __wbsim_occupancy_blocks(text, blocks, block_size, dynamic_shared, flags);
}
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor(...) \
    __wbsim_occupancy_blocks_of(#__VA_ARGS__, __VA_ARGS__)
#define cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(...) \
    __wbsim_occupancy_blocks_of(#__VA_ARGS__, __VA_ARGS__)
template <class T>
static inline cudaError_t __wbsim_occupancy_shared_of(const char* text, size_t* shared, T*, int blocks,
                                                      int block_size) {
    return __wbsim_occupancy_shared(text, shared, blocks, block_size);
}
#define cudaOccupancyAvailableDynamicSMemPerBlock(...) __wbsim_occupancy_shared_of(#__VA_ARGS__, __VA_ARGS__)

/* ... and the third of these. */
template <class T>
static inline cudaError_t __wbsim_block_size_of(const char* text, int* min_grid, int* block_size, T*,
                                                size_t shared = 0, int limit = 0, unsigned flags = 0) {
    return __wbsim_occupancy_block_size(text, min_grid, block_size, nullptr, nullptr, shared, limit, flags);
}
template <class S> static size_t __wbsim_call_block_to_shared(void* state, int n) {
    return (size_t)(*static_cast<S*>(state))(n);
}
template <class S, class T>
static inline cudaError_t __wbsim_block_size_variable_of(const char* text, int* min_grid, int* block_size, T*,
                                                         S block_to_shared, int limit = 0, unsigned flags = 0) {
    return __wbsim_occupancy_block_size(text, min_grid, block_size, &__wbsim_call_block_to_shared<S>,
                                        &block_to_shared, 0, limit, flags);
}
#define cudaOccupancyMaxPotentialBlockSize(...) __wbsim_block_size_of(#__VA_ARGS__, __VA_ARGS__)
#define cudaOccupancyMaxPotentialBlockSizeWithFlags(...) __wbsim_block_size_of(#__VA_ARGS__, __VA_ARGS__)
#define cudaOccupancyMaxPotentialBlockSizeVariableSMem(...) \
    __wbsim_block_size_variable_of(#__VA_ARGS__, __VA_ARGS__)
#define cudaOccupancyMaxPotentialBlockSizeVariableSMemWithFlags(...) \
    __wbsim_block_size_variable_of(#__VA_ARGS__, __VA_ARGS__)
#endif
