/* The functions of CUDA's runtime API that whole programs on the simulator may call
 * (implemented by the .cpp files of this folder). Only what is declared here, in
 * wbsim_program_launch.h and in cuda_profiler_api.h is supported: a call of any other
 * cuda* function fails to compile, and the build names it (programs.py reads the names
 * declared in this folder's headers). */
#ifndef WBSIM_RUNTIME_API_H
#define WBSIM_RUNTIME_API_H
#include "wbsim_runtime_types.h"

extern "C" {
/* errors */
const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);

/* the device */
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags);
cudaError_t cudaChooseDevice(int* device, const struct cudaDeviceProp* prop);
cudaError_t cudaSetDeviceFlags(unsigned int flags);
cudaError_t cudaGetDeviceFlags(unsigned int* flags);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaThreadSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaThreadExit(void);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value);
cudaError_t cudaDeviceGetLimit(size_t* value, enum cudaLimit limit);
cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache config);
cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache* config);
cudaError_t cudaDeviceSetSharedMemConfig(enum cudaSharedMemConfig config);
cudaError_t cudaDeviceGetSharedMemConfig(enum cudaSharedMemConfig* config);
cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);
cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device);
cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice);
cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags);
cudaError_t cudaDeviceDisablePeerAccess(int peerDevice);
cudaError_t cudaCtxResetPersistingL2Cache(void);

/* memory */
cudaError_t cudaMalloc(void** ptr, size_t size);
cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned int flags = cudaMemAttachGlobal);
cudaError_t cudaMallocHost(void** ptr, size_t size);
cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags);
cudaError_t cudaHostUnregister(void* ptr);
cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned int flags);
cudaError_t cudaHostGetFlags(unsigned int* flags, void* host);
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attributes, const void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream = 0);
cudaError_t cudaMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t count);
cudaError_t cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count,
                                cudaStream_t stream = 0);
cudaError_t cudaMallocPitch(void** ptr, size_t* pitch, size_t width, size_t height);
cudaError_t cudaMalloc3D(struct cudaPitchedPtr* pitched, struct cudaExtent extent);
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                              size_t height, enum cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms* p);
cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms* p, cudaStream_t stream = 0);
cudaError_t cudaMemset(void* ptr, int value, size_t count);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream = 0);
cudaError_t cudaMemset2D(void* ptr, size_t pitch, int value, size_t width, size_t height);
cudaError_t cudaMemset2DAsync(void* ptr, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t stream = 0);
cudaError_t cudaMemset3D(struct cudaPitchedPtr pitched, int value, struct cudaExtent extent);
cudaError_t cudaMemset3DAsync(struct cudaPitchedPtr pitched, int value, struct cudaExtent extent,
                              cudaStream_t stream = 0);
cudaError_t cudaMemPrefetchAsync(const void* ptr, size_t count, int device, cudaStream_t stream = 0);
cudaError_t cudaMemAdvise(const void* ptr, size_t count, enum cudaMemoryAdvise advice, int device);
cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void* ptr, size_t length = 0,
                                     unsigned int flags = cudaMemAttachSingle);

/* stream-ordered allocation: one pool, the device's */
cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device);
cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* pool, int device);
cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value);
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void* value);
cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const struct cudaMemAccessDesc* descs, size_t count);
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t minBytesToKeep);

/* arrays, textures and surfaces */
struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f);
cudaError_t cudaMallocArray(cudaArray_t* array, const struct cudaChannelFormatDesc* desc, size_t width,
                            size_t height = 0, unsigned int flags = 0);
cudaError_t cudaMalloc3DArray(cudaArray_t* array, const struct cudaChannelFormatDesc* desc,
                              struct cudaExtent extent, unsigned int flags = 0);
cudaError_t cudaFreeArray(cudaArray_t array);
cudaError_t cudaArrayGetInfo(struct cudaChannelFormatDesc* desc, struct cudaExtent* extent,
                             unsigned int* flags, cudaArray_t array);
cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                              size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyFromArray(void* dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void* src,
                                     size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind,
                                     cudaStream_t stream = 0);
cudaError_t cudaMemcpy2DFromArray(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                  size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy2DFromArrayAsync(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                       size_t hOffset, size_t width, size_t height,
                                       enum cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaCreateTextureObject(cudaTextureObject_t* tex, const struct cudaResourceDesc* res,
                                    const struct cudaTextureDesc* desc,
                                    const struct cudaResourceViewDesc* view = 0);
cudaError_t cudaDestroyTextureObject(cudaTextureObject_t tex);
cudaError_t cudaGetTextureObjectResourceDesc(struct cudaResourceDesc* res, cudaTextureObject_t tex);
cudaError_t cudaGetTextureObjectTextureDesc(struct cudaTextureDesc* desc, cudaTextureObject_t tex);
cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t* surf, const struct cudaResourceDesc* res);
cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t surf);

/* streams, events, graphs */
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int priority);
cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags);
cudaError_t cudaStreamGetPriority(cudaStream_t stream, int* priority);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);
cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* userData,
                                  unsigned int flags);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData);
cudaError_t cudaStreamSetAttribute(cudaStream_t stream, cudaStreamAttrID attr, const cudaStreamAttrValue* value);
cudaError_t cudaStreamGetAttribute(cudaStream_t stream, cudaStreamAttrID attr, cudaStreamAttrValue* value);
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* status);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream = 0, unsigned int flags = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int flags);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* numNodes);

/* interprocess memory: shared with the processes the program starts */
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* ptr);
cudaError_t cudaIpcOpenMemHandle(void** ptr, cudaIpcMemHandle_t handle, unsigned int flags);
cudaError_t cudaIpcCloseMemHandle(void* ptr);
cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event);
cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle);
}

/* CUDA 13's cudaMemPrefetchAsync and cudaMemAdvise (a location instead of a device). */
cudaError_t cudaMemPrefetchAsync(const void* ptr, size_t count, struct cudaMemLocation location,
                                 unsigned int flags, cudaStream_t stream = 0);
cudaError_t cudaMemAdvise(const void* ptr, size_t count, enum cudaMemoryAdvise advice,
                          struct cudaMemLocation location);

/* ---- typed forms, as cuda_runtime.h has them ------------------------------------------ */
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
template <class T> static inline cudaError_t cudaMallocHost(T** ptr, size_t size, unsigned int flags = 0) {
    return flags ? cudaHostAlloc((void**)ptr, size, flags) : cudaMallocHost((void**)ptr, size);
}
template <class T> static inline cudaError_t cudaHostAlloc(T** ptr, size_t size, unsigned int flags) {
    return cudaHostAlloc((void**)ptr, size, flags);
}
template <class T> static inline cudaError_t cudaHostGetDevicePointer(T** device, void* host, unsigned int flags) {
    return cudaHostGetDevicePointer((void**)device, host, flags);
}
template <class T> static inline cudaError_t cudaMallocAsync(T** ptr, size_t size, cudaStream_t stream) {
    return cudaMallocAsync((void**)ptr, size, stream);
}
template <class T> static inline cudaError_t cudaMallocAsync(T** ptr, size_t size, cudaMemPool_t pool,
                                                             cudaStream_t stream) {
    return cudaMallocFromPoolAsync((void**)ptr, size, pool, stream);
}
static inline cudaError_t cudaEventCreate(cudaEvent_t* event, unsigned int flags) {
    return cudaEventCreateWithFlags(event, flags);
}
static inline cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, const void* ptr, size_t length = 0,
                                                   unsigned int flags = cudaMemAttachSingle) {
    return cudaStreamAttachMemAsync(stream, const_cast<void*>(ptr), length, flags);
}

/* ---- channel descriptors ----------------------------------------------------------- */
template <class T> struct __wbsim_channel;
#define WBSIM_CHANNEL(T, N, BITS, KIND)                                                           \
    template <> struct __wbsim_channel<T> {                                                      \
        static cudaChannelFormatDesc desc() {                                                    \
            return cudaCreateChannelDesc(BITS, N > 1 ? BITS : 0, N > 2 ? BITS : 0, N > 3 ? BITS : 0, KIND); \
        }                                                                                        \
    };
#define WBSIM_CHANNELS(T, V, BITS, KIND) \
    WBSIM_CHANNEL(T, 1, BITS, KIND) WBSIM_CHANNEL(V##1, 1, BITS, KIND) WBSIM_CHANNEL(V##2, 2, BITS, KIND) \
    WBSIM_CHANNEL(V##4, 4, BITS, KIND)
WBSIM_CHANNELS(char, char, 8, cudaChannelFormatKindSigned)
WBSIM_CHANNEL(signed char, 1, 8, cudaChannelFormatKindSigned)
WBSIM_CHANNELS(unsigned char, uchar, 8, cudaChannelFormatKindUnsigned)
WBSIM_CHANNELS(short, short, 16, cudaChannelFormatKindSigned)
WBSIM_CHANNELS(unsigned short, ushort, 16, cudaChannelFormatKindUnsigned)
WBSIM_CHANNELS(int, int, 32, cudaChannelFormatKindSigned)
WBSIM_CHANNELS(unsigned int, uint, 32, cudaChannelFormatKindUnsigned)
WBSIM_CHANNELS(float, float, 32, cudaChannelFormatKindFloat)
#undef WBSIM_CHANNELS
#undef WBSIM_CHANNEL
template <class T> static inline cudaChannelFormatDesc cudaCreateChannelDesc(void) {
    return __wbsim_channel<T>::desc();
}

/* ---- module variables ------------------------------------------------------------------ */
extern "C" cudaError_t __wbsim_symbol_copy(void* symbol, size_t symbol_bytes, size_t offset, void* other,
                                           size_t count, int to_symbol, cudaStream_t stream);
template <class T>
static inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t count,
                                             size_t offset = 0,
                                             enum cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
    (void)kind;
    return __wbsim_symbol_copy((void*)&symbol, sizeof(T), offset, (void*)src, count, 1, 0);
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t count,
                                               size_t offset = 0,
                                               enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
    (void)kind;
    return __wbsim_symbol_copy((void*)&symbol, sizeof(T), offset, dst, count, 0, 0);
}
template <class T>
static inline cudaError_t cudaMemcpyToSymbolAsync(const T& symbol, const void* src, size_t count,
                                                  size_t offset = 0,
                                                  enum cudaMemcpyKind kind = cudaMemcpyHostToDevice,
                                                  cudaStream_t stream = 0) {
    (void)kind;
    return __wbsim_symbol_copy((void*)&symbol, sizeof(T), offset, (void*)src, count, 1, stream);
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const T& symbol, size_t count,
                                                    size_t offset = 0,
                                                    enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost,
                                                    cudaStream_t stream = 0) {
    (void)kind;
    return __wbsim_symbol_copy((void*)&symbol, sizeof(T), offset, dst, count, 0, stream);
}
template <class T> static inline cudaError_t cudaGetSymbolAddress(void** ptr, const T& symbol) {
    *ptr = (void*)&symbol;
    return cudaSuccess;
}
template <class T> static inline cudaError_t cudaGetSymbolSize(size_t* size, const T&) {
    *size = sizeof(T);
    return cudaSuccess;
}
#endif
