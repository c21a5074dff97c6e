/* The CUDA runtime API of whole programs on the CPU simulator.
 *
 * A program's every source file is compiled with the prelude (the device
 * API) and this header, then linked with the worker runtime's parts (grid,
 * fibers, warps, faults, printf; native/) and cudart.cpp, which implements
 * what is declared here. Only what is declared here is supported: a call of
 * any other cuda* function fails to compile, and the build names it
 * (backends/simulator/programs.py reads the names declared here).
 *
 * A launch `k<<<grid, block, shmem, stream>>>(args)` is rewritten by
 * programs.py into `__wbsim_launch_program("k", __wbsim_cfg(grid, block,
 * shmem, stream), [&](auto... a) { k(a...); }, args)`: the arguments are
 * evaluated once, on the host, and every simulated thread calls the kernel
 * with them (templates are deduced as in CUDA). Launches are synchronous. */
#ifndef WBSIM_PROGRAM_H
#define WBSIM_PROGRAM_H
#include <cstddef>
#include <cstring>
#include <tuple>
#include <utility>
#include <type_traits>

#include "wbsim_abi.h"
#include "vector_types.h"

#ifndef CUDART_VERSION
#define CUDART_VERSION 13000
#endif

/* ---- types -------------------------------------------------------------------- */
enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidSymbol = 13,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotSupported = 801,
    cudaErrorUnknown = 999
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4
};

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9
};

enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1, cudaDevAttrMaxBlockDimX = 2, cudaDevAttrMaxBlockDimY = 3,
    cudaDevAttrMaxBlockDimZ = 4, cudaDevAttrMaxGridDimX = 5, cudaDevAttrMaxGridDimY = 6,
    cudaDevAttrMaxGridDimZ = 7, cudaDevAttrMaxSharedMemoryPerBlock = 8, cudaDevAttrWarpSize = 10,
    cudaDevAttrMultiProcessorCount = 16, cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76, cudaDevAttrL2CacheSize = 38,
    cudaDevAttrMaxThreadsPerMultiProcessor = 39, cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97, cudaDevAttrManagedMemory = 83,
    cudaDevAttrConcurrentManagedAccess = 89, cudaDevAttrMaxBlocksPerMultiprocessor = 106
};

struct CUstream_st;
struct CUevent_st;
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04
#define cudaHostRegisterDefault 0x00
#define cudaMemAttachGlobal 0x01
#define cudaMemAttachHost 0x02
#define cudaCpuDeviceId (-1)
#define cudaDeviceScheduleAuto 0x00
#define cudaDeviceMapHost 0x08

enum cudaMemoryAdvise { cudaMemAdviseSetReadMostly = 1, cudaMemAdviseUnsetReadMostly = 2,
                        cudaMemAdviseSetPreferredLocation = 3, cudaMemAdviseUnsetPreferredLocation = 4,
                        cudaMemAdviseSetAccessedBy = 5, cudaMemAdviseUnsetAccessedBy = 6 };
enum cudaMemLocationType { cudaMemLocationTypeInvalid = 0, cudaMemLocationTypeDevice = 1,
                           cudaMemLocationTypeHost = 2 };
struct cudaMemLocation { enum cudaMemLocationType type; int id; };

/* The fields textbook programs read (CUDA 12's names; CUDA 13 removed a few,
 * such as clockRate, that the simulator keeps). */
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    size_t memPitch;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int clockRate;
    size_t totalConstMem;
    int major;
    int minor;
    size_t textureAlignment;
    int deviceOverlap;
    int multiProcessorCount;
    int kernelExecTimeoutEnabled;
    int integrated;
    int canMapHostMemory;
    int computeMode;
    int concurrentKernels;
    int ECCEnabled;
    int pciBusID;
    int pciDeviceID;
    int pciDomainID;
    int asyncEngineCount;
    int unifiedAddressing;
    int memoryClockRate;
    int memoryBusWidth;
    int l2CacheSize;
    int persistingL2CacheMaxSize;
    int maxThreadsPerMultiProcessor;
    int streamPrioritiesSupported;
    int globalL1CacheSupported;
    int localL1CacheSupported;
    size_t sharedMemPerMultiprocessor;
    int regsPerMultiprocessor;
    int managedMemory;
    int isMultiGpuBoard;
    int concurrentManagedAccess;
    int pageableMemoryAccess;
    size_t sharedMemPerBlockOptin;
    int cooperativeLaunch;
    int maxBlocksPerMultiProcessor;
    size_t reservedSharedMemPerBlock;
};

/* ---- the runtime API (cudart.cpp) --------------------------------------------- */
extern "C" {
const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaSetDeviceFlags(unsigned int flags);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);

cudaError_t cudaMalloc(void** ptr, size_t size);
cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned int flags = cudaMemAttachGlobal);
cudaError_t cudaMallocHost(void** ptr, size_t size);
cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags);
cudaError_t cudaHostUnregister(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream = 0);
cudaError_t cudaMallocPitch(void** ptr, size_t* pitch, size_t width, size_t height);
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                              size_t height, enum cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemset2D(void* ptr, size_t pitch, int value, size_t width, size_t height);
cudaError_t cudaMemset(void* ptr, int value, size_t count);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream = 0);
cudaError_t cudaMemPrefetchAsync(const void* ptr, size_t count, int device, cudaStream_t stream = 0);
cudaError_t cudaMemAdvise(const void* ptr, size_t count, enum cudaMemoryAdvise advice, int device);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

/* what the templates below call */
struct __wbsim_config { dim3 grid, block; size_t shmem; cudaStream_t stream; };
cudaError_t __wbsim_program_launch(const wbsim_kernel* kernel, const struct __wbsim_config* c);
cudaError_t __wbsim_symbol_copy(void* symbol, size_t symbol_bytes, size_t offset, void* other,
                                size_t count, int to_symbol);
}

/* CUDA 13's cudaMemPrefetchAsync (a location instead of a device). */
cudaError_t cudaMemPrefetchAsync(const void* ptr, size_t count, struct cudaMemLocation location,
                                 unsigned int flags, cudaStream_t stream = 0);

/* cudaFuncSetAttribute is recorded per kernel name (the launch knows its kernel by the name written
 * before <<<), so the macro passes the text of its arguments along. */
extern "C" cudaError_t __wbsim_func_set_attribute(const char* call_text, int attribute, int value);
template <class T>
static inline cudaError_t __wbsim_func_set_attribute_of(const char* call_text, T*, enum cudaFuncAttribute attr,
                                                        int value) {
    return __wbsim_func_set_attribute(call_text, (int)attr, value);
}
#define cudaFuncSetAttribute(...) __wbsim_func_set_attribute_of(#__VA_ARGS__, __VA_ARGS__)

/* ---- module variables ------------------------------------------------------------ */
template <class T>
static inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t count,
                                             size_t offset = 0,
                                             enum cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
    (void)kind;
    return __wbsim_symbol_copy((void*)&symbol, sizeof(T), offset, (void*)src, count, 1);
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count,
                                               size_t offset = 0,
                                               enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
    (void)kind;
    return __wbsim_symbol_copy((void*)&symbol, sizeof(T), offset, dst, count, 0);
}
template <class T>
static inline cudaError_t cudaMemcpyToSymbolAsync(const T& symbol, const void* src, size_t count,
                                                  size_t offset = 0,
                                                  enum cudaMemcpyKind kind = cudaMemcpyHostToDevice,
                                                  cudaStream_t stream = 0) {
    (void)stream;
    return cudaMemcpyToSymbol(symbol, src, count, offset, kind);
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t count,
                                                    size_t offset = 0,
                                                    enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost,
                                                    cudaStream_t stream = 0) {
    (void)stream;
    return cudaMemcpyFromSymbol(dst, symbol, count, offset, kind);
}
template <class T> static inline cudaError_t cudaGetSymbolAddress(void** ptr, const T& symbol) {
    *ptr = (void*)&symbol;
    return cudaSuccess;
}

/* typed forms, as cuda_runtime.h has them */
template <class T> static inline cudaError_t cudaMalloc(T** ptr, size_t size) {
    return cudaMalloc((void**)ptr, size);
}
template <class T> static inline cudaError_t cudaMallocManaged(T** ptr, size_t size,
                                                               unsigned int flags = cudaMemAttachGlobal) {
    return cudaMallocManaged((void**)ptr, size, flags);
}
template <class T> static inline cudaError_t cudaMallocPitch(T** ptr, size_t* pitch, size_t width,
                                                             size_t height) {
    return cudaMallocPitch((void**)ptr, pitch, width, height);
}
template <class T> static inline cudaError_t cudaMallocHost(T** ptr, size_t size) {
    return cudaMallocHost((void**)ptr, size);
}
template <class T> static inline cudaError_t cudaHostAlloc(T** ptr, size_t size, unsigned int flags) {
    return cudaHostAlloc((void**)ptr, size, flags);
}
static inline cudaError_t cudaEventCreate(cudaEvent_t* event, unsigned int flags) {
    return cudaEventCreateWithFlags(event, flags);
}

/* ---- launches -------------------------------------------------------------------- */
static inline __wbsim_config __wbsim_cfg(dim3 grid, dim3 block, size_t shmem = 0,
                                         cudaStream_t stream = 0) {
    __wbsim_config c = {grid, block, shmem, stream};
    return c;
}

template <class F, class Tuple> struct __wbsim_program_kernel {
    F call;
    Tuple args;
    static void run_thread(void* p) {
        auto* k = static_cast<__wbsim_program_kernel*>(p);
        std::apply(k->call, k->args);
    }
    static void run_block(void* p) {
        auto* k = static_cast<__wbsim_program_kernel*>(p);
        __wbsim_block_loop([k] { std::apply(k->call, k->args); });
    }
};

template <class F, class... A>
static inline void __wbsim_launch_program(const char* name, __wbsim_config c, F call, A&&... args) {
    typedef std::tuple<std::decay_t<A>...> Tuple;
    __wbsim_program_kernel<F, Tuple> k{call, Tuple(std::forward<A>(args)...)};
    wbsim_kernel kernel = {name, &__wbsim_program_kernel<F, Tuple>::run_block,
                           &__wbsim_program_kernel<F, Tuple>::run_thread, &k};
    __wbsim_program_launch(&kernel, &c);
}
#endif
