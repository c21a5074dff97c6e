// The device of whole programs on the simulator: its properties (the virtual device's,
// from $WBSIM_DEVICE), every cudaDeviceAttr, and the calls about the device as a whole.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cudart_internal.h"

cudaDeviceProp g_prop;

// -- the device --------------------------------------------------------------------
// The virtual device's properties: $WBSIM_DEVICE ("key=value;..." from the
// workbench), else an H100's.
void load_properties() {
    cudaDeviceProp& p = g_prop;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "NVIDIA H100 80GB HBM3 (simulated)");
    p.totalGlobalMem = 80ull << 30; p.sharedMemPerBlock = 48 << 10; p.regsPerBlock = 65536;
    p.warpSize = 32; p.memPitch = 2147483647; p.maxThreadsPerBlock = 1024;
    p.maxThreadsDim[0] = 1024; p.maxThreadsDim[1] = 1024; p.maxThreadsDim[2] = 64;
    p.maxGridSize[0] = 2147483647; p.maxGridSize[1] = 65535; p.maxGridSize[2] = 65535;
    p.clockRate = 1980000; p.totalConstMem = 65536; p.major = 9; p.minor = 0;
    p.textureAlignment = 512; p.texturePitchAlignment = 32; p.deviceOverlap = 1; p.multiProcessorCount = 132;
    p.canMapHostMemory = 1; p.concurrentKernels = 1; p.asyncEngineCount = 3; p.ECCEnabled = 1;
    p.maxTexture1D = 131072; p.maxTexture1DMipmap = 32768; p.maxTexture1DLinear = 268435456;
    p.maxTexture2D[0] = 131072; p.maxTexture2D[1] = 65536;
    p.maxTexture2DMipmap[0] = p.maxTexture2DMipmap[1] = 32768;
    p.maxTexture2DLinear[0] = 131072; p.maxTexture2DLinear[1] = 65000; p.maxTexture2DLinear[2] = 2097120;
    p.maxTexture2DGather[0] = p.maxTexture2DGather[1] = 32768;
    p.maxTexture3D[0] = p.maxTexture3D[1] = p.maxTexture3D[2] = 16384;
    p.maxTexture3DAlt[0] = p.maxTexture3DAlt[1] = 8192; p.maxTexture3DAlt[2] = 32768;
    p.maxTextureCubemap = 32768; p.maxTexture1DLayered[0] = 32768; p.maxTexture1DLayered[1] = 2048;
    p.maxTexture2DLayered[0] = p.maxTexture2DLayered[1] = 32768; p.maxTexture2DLayered[2] = 2048;
    p.maxTextureCubemapLayered[0] = 32768; p.maxTextureCubemapLayered[1] = 2046;
    p.maxSurface1D = 32768; p.maxSurface2D[0] = 131072; p.maxSurface2D[1] = 65536;
    p.maxSurface3D[0] = p.maxSurface3D[1] = p.maxSurface3D[2] = 16384;
    p.maxSurface1DLayered[0] = 32768; p.maxSurface1DLayered[1] = 2048;
    p.maxSurface2DLayered[0] = p.maxSurface2DLayered[1] = 32768; p.maxSurface2DLayered[2] = 2048;
    p.maxSurfaceCubemap = 32768; p.maxSurfaceCubemapLayered[0] = 32768; p.maxSurfaceCubemapLayered[1] = 2046;
    p.surfaceAlignment = 512;
    p.unifiedAddressing = 1; p.memoryClockRate = 2619000; p.memoryBusWidth = 5120;
    p.l2CacheSize = 50 << 20; p.persistingL2CacheMaxSize = 0x2000000; p.maxThreadsPerMultiProcessor = 2048;
    p.streamPrioritiesSupported = 1; p.globalL1CacheSupported = 1; p.localL1CacheSupported = 1;
    p.sharedMemPerMultiprocessor = 228 << 10; p.regsPerMultiprocessor = 65536; p.managedMemory = 1;
    p.singleToDoublePrecisionPerfRatio = 2; p.computePreemptionSupported = 1;
    p.canUseHostPointerForRegisteredMem = 1; p.cooperativeMultiDeviceLaunch = 1;
    p.concurrentManagedAccess = 1; p.sharedMemPerBlockOptin = 227 << 10; p.cooperativeLaunch = 1;
    p.maxBlocksPerMultiProcessor = 32; p.accessPolicyMaxWindowSize = 134213632;
    p.reservedSharedMemPerBlock = 1024; p.hostRegisterSupported = 1; p.sparseCudaArraySupported = 1;
    p.hostRegisterReadOnlySupported = 1; p.timelineSemaphoreInteropSupported = 1;
    p.memoryPoolsSupported = 1; p.gpuDirectRDMASupported = 1; p.gpuDirectRDMAFlushWritesOptions = 1;
    p.gpuDirectRDMAWritesOrdering = 100; p.memoryPoolSupportedHandleTypes = 9;
    p.deferredMappingCudaArraySupported = 1; p.ipcEventSupported = 1; p.clusterLaunch = 1;
    p.unifiedFunctionPointers = 1;
    const char* env = getenv("WBSIM_DEVICE");
    if (!env) return;
    std::string s(env);
    size_t at = 0;
    while (at < s.size()) {
        size_t end = s.find(';', at);
        if (end == std::string::npos) end = s.size();
        std::string item = s.substr(at, end - at);
        at = end + 1;
        size_t eq = item.find('=');
        if (eq == std::string::npos) continue;
        std::string k = item.substr(0, eq), v = item.substr(eq + 1);
        unsigned long long n = strtoull(v.c_str(), nullptr, 10);
        if (k == "name") snprintf(p.name, sizeof p.name, "%s (simulated)", v.c_str());
        else if (k == "major") p.major = (int)n;
        else if (k == "minor") p.minor = (int)n;
        else if (k == "sms") p.multiProcessorCount = (int)n;
        else if (k == "memory") p.totalGlobalMem = n;
        else if (k == "shared_block") p.sharedMemPerBlock = n;
        else if (k == "shared_optin") p.sharedMemPerBlockOptin = n;
        else if (k == "shared_sm") p.sharedMemPerMultiprocessor = n;
        else if (k == "regs_block") p.regsPerBlock = (int)n;
        else if (k == "regs_sm") p.regsPerMultiprocessor = (int)n;
        else if (k == "threads_sm") p.maxThreadsPerMultiProcessor = (int)n;
        else if (k == "blocks_sm") p.maxBlocksPerMultiProcessor = (int)n;
        else if (k == "l2") p.l2CacheSize = (int)n;
        else if (k == "clock_khz") p.clockRate = (int)n;
        else if (k == "memory_clock_khz") p.memoryClockRate = (int)n;
        else if (k == "bus_width") p.memoryBusWidth = (int)n;
    }
    p.clusterLaunch = p.major >= 9;
}

bool valid_device(int device, const char* api) {
    if (device == 0) return true;
    fail(cudaErrorInvalidDevice, "%s: device %d; the simulator has one device, 0", api, device);
    return false;
}

extern "C" cudaError_t cudaGetDeviceCount(int* count) {
    ApiLock held = start();
    if (!count) return fail(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGetDevice(int* device) {
    ApiLock held = start();
    if (!device) return fail(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}
extern "C" cudaError_t cudaSetDevice(int device) {
    ApiLock held = start();
    return valid_device(device, "cudaSetDevice") ? cudaSuccess : cudaErrorInvalidDevice;
}
extern "C" cudaError_t cudaInitDevice(int device, unsigned int, unsigned int) {
    ApiLock held = start();
    return valid_device(device, "cudaInitDevice") ? cudaSuccess : cudaErrorInvalidDevice;
}
extern "C" cudaError_t cudaChooseDevice(int* device, const cudaDeviceProp*) {
    ApiLock held = start();
    *device = 0;
    return cudaSuccess;
}
static unsigned g_device_flags = 0;
extern "C" cudaError_t cudaSetDeviceFlags(unsigned int flags) {
    API_ENTER();
    g_device_flags = flags;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
    ApiLock held = start();
    *flags = g_device_flags | cudaDeviceMapHost;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
    ApiLock held = start();
    if (!prop) return fail(cudaErrorInvalidValue);
    if (!valid_device(device, "cudaGetDeviceProperties")) return cudaErrorInvalidDevice;
    *prop = g_prop;
    return cudaSuccess;
}

// Attributes with no meaning on the simulator answer what a GPU of the profile reports.
static bool attribute_value(cudaDeviceAttr attr, int* value) {
    const cudaDeviceProp& p = g_prop;
    int v;
    switch (attr) {
        case cudaDevAttrMaxThreadsPerBlock: v = p.maxThreadsPerBlock; break;
        case cudaDevAttrMaxBlockDimX: v = p.maxThreadsDim[0]; break;
        case cudaDevAttrMaxBlockDimY: v = p.maxThreadsDim[1]; break;
        case cudaDevAttrMaxBlockDimZ: v = p.maxThreadsDim[2]; break;
        case cudaDevAttrMaxGridDimX: v = p.maxGridSize[0]; break;
        case cudaDevAttrMaxGridDimY: v = p.maxGridSize[1]; break;
        case cudaDevAttrMaxGridDimZ: v = p.maxGridSize[2]; break;
        case cudaDevAttrMaxSharedMemoryPerBlock: v = (int)p.sharedMemPerBlock; break;
        case cudaDevAttrTotalConstantMemory: v = (int)p.totalConstMem; break;
        case cudaDevAttrWarpSize: v = p.warpSize; break;
        case cudaDevAttrMaxPitch: v = (int)p.memPitch; break;
        case cudaDevAttrMaxRegistersPerBlock: v = p.regsPerBlock; break;
        case cudaDevAttrClockRate: v = p.clockRate; break;
        case cudaDevAttrTextureAlignment: v = (int)p.textureAlignment; break;
        case cudaDevAttrGpuOverlap: v = p.deviceOverlap; break;
        case cudaDevAttrMultiProcessorCount: v = p.multiProcessorCount; break;
        case cudaDevAttrKernelExecTimeout: v = p.kernelExecTimeoutEnabled; break;
        case cudaDevAttrIntegrated: v = p.integrated; break;
        case cudaDevAttrCanMapHostMemory: v = p.canMapHostMemory; break;
        case cudaDevAttrComputeMode: v = cudaComputeModeDefault; break;
        case cudaDevAttrMaxTexture1DWidth: v = p.maxTexture1D; break;
        case cudaDevAttrMaxTexture2DWidth: v = p.maxTexture2D[0]; break;
        case cudaDevAttrMaxTexture2DHeight: v = p.maxTexture2D[1]; break;
        case cudaDevAttrMaxTexture3DWidth: v = p.maxTexture3D[0]; break;
        case cudaDevAttrMaxTexture3DHeight: v = p.maxTexture3D[1]; break;
        case cudaDevAttrMaxTexture3DDepth: v = p.maxTexture3D[2]; break;
        case cudaDevAttrMaxTexture2DLayeredWidth: v = p.maxTexture2DLayered[0]; break;
        case cudaDevAttrMaxTexture2DLayeredHeight: v = p.maxTexture2DLayered[1]; break;
        case cudaDevAttrMaxTexture2DLayeredLayers: v = p.maxTexture2DLayered[2]; break;
        case cudaDevAttrSurfaceAlignment: v = (int)p.surfaceAlignment; break;
        case cudaDevAttrConcurrentKernels: v = p.concurrentKernels; break;
        case cudaDevAttrEccEnabled: v = p.ECCEnabled; break;
        case cudaDevAttrPciBusId: v = p.pciBusID; break;
        case cudaDevAttrPciDeviceId: v = p.pciDeviceID; break;
        case cudaDevAttrTccDriver: v = p.tccDriver; break;
        case cudaDevAttrMemoryClockRate: v = p.memoryClockRate; break;
        case cudaDevAttrGlobalMemoryBusWidth: v = p.memoryBusWidth; break;
        case cudaDevAttrL2CacheSize: v = p.l2CacheSize; break;
        case cudaDevAttrMaxThreadsPerMultiProcessor: v = p.maxThreadsPerMultiProcessor; break;
        case cudaDevAttrAsyncEngineCount: v = p.asyncEngineCount; break;
        case cudaDevAttrUnifiedAddressing: v = p.unifiedAddressing; break;
        case cudaDevAttrMaxTexture1DLayeredWidth: v = p.maxTexture1DLayered[0]; break;
        case cudaDevAttrMaxTexture1DLayeredLayers: v = p.maxTexture1DLayered[1]; break;
        case cudaDevAttrMaxTexture2DGatherWidth: v = p.maxTexture2DGather[0]; break;
        case cudaDevAttrMaxTexture2DGatherHeight: v = p.maxTexture2DGather[1]; break;
        case cudaDevAttrMaxTexture3DWidthAlt: v = p.maxTexture3DAlt[0]; break;
        case cudaDevAttrMaxTexture3DHeightAlt: v = p.maxTexture3DAlt[1]; break;
        case cudaDevAttrMaxTexture3DDepthAlt: v = p.maxTexture3DAlt[2]; break;
        case cudaDevAttrPciDomainId: v = p.pciDomainID; break;
        case cudaDevAttrTexturePitchAlignment: v = (int)p.texturePitchAlignment; break;
        case cudaDevAttrMaxTextureCubemapWidth: v = p.maxTextureCubemap; break;
        case cudaDevAttrMaxTextureCubemapLayeredWidth: v = p.maxTextureCubemapLayered[0]; break;
        case cudaDevAttrMaxTextureCubemapLayeredLayers: v = p.maxTextureCubemapLayered[1]; break;
        case cudaDevAttrMaxSurface1DWidth: v = p.maxSurface1D; break;
        case cudaDevAttrMaxSurface2DWidth: v = p.maxSurface2D[0]; break;
        case cudaDevAttrMaxSurface2DHeight: v = p.maxSurface2D[1]; break;
        case cudaDevAttrMaxSurface3DWidth: v = p.maxSurface3D[0]; break;
        case cudaDevAttrMaxSurface3DHeight: v = p.maxSurface3D[1]; break;
        case cudaDevAttrMaxSurface3DDepth: v = p.maxSurface3D[2]; break;
        case cudaDevAttrMaxSurface1DLayeredWidth: v = p.maxSurface1DLayered[0]; break;
        case cudaDevAttrMaxSurface1DLayeredLayers: v = p.maxSurface1DLayered[1]; break;
        case cudaDevAttrMaxSurface2DLayeredWidth: v = p.maxSurface2DLayered[0]; break;
        case cudaDevAttrMaxSurface2DLayeredHeight: v = p.maxSurface2DLayered[1]; break;
        case cudaDevAttrMaxSurface2DLayeredLayers: v = p.maxSurface2DLayered[2]; break;
        case cudaDevAttrMaxSurfaceCubemapWidth: v = p.maxSurfaceCubemap; break;
        case cudaDevAttrMaxSurfaceCubemapLayeredWidth: v = p.maxSurfaceCubemapLayered[0]; break;
        case cudaDevAttrMaxSurfaceCubemapLayeredLayers: v = p.maxSurfaceCubemapLayered[1]; break;
        case cudaDevAttrMaxTexture1DLinearWidth: v = p.maxTexture1DLinear; break;
        case cudaDevAttrMaxTexture2DLinearWidth: v = p.maxTexture2DLinear[0]; break;
        case cudaDevAttrMaxTexture2DLinearHeight: v = p.maxTexture2DLinear[1]; break;
        case cudaDevAttrMaxTexture2DLinearPitch: v = p.maxTexture2DLinear[2]; break;
        case cudaDevAttrMaxTexture2DMipmappedWidth: v = p.maxTexture2DMipmap[0]; break;
        case cudaDevAttrMaxTexture2DMipmappedHeight: v = p.maxTexture2DMipmap[1]; break;
        case cudaDevAttrComputeCapabilityMajor: v = p.major; break;
        case cudaDevAttrComputeCapabilityMinor: v = p.minor; break;
        case cudaDevAttrMaxTexture1DMipmappedWidth: v = p.maxTexture1DMipmap; break;
        case cudaDevAttrStreamPrioritiesSupported: v = p.streamPrioritiesSupported; break;
        case cudaDevAttrGlobalL1CacheSupported: v = p.globalL1CacheSupported; break;
        case cudaDevAttrLocalL1CacheSupported: v = p.localL1CacheSupported; break;
        case cudaDevAttrMaxSharedMemoryPerMultiprocessor: v = (int)p.sharedMemPerMultiprocessor; break;
        case cudaDevAttrMaxRegistersPerMultiprocessor: v = p.regsPerMultiprocessor; break;
        case cudaDevAttrManagedMemory: v = p.managedMemory; break;
        case cudaDevAttrIsMultiGpuBoard: v = p.isMultiGpuBoard; break;
        case cudaDevAttrMultiGpuBoardGroupID: v = p.multiGpuBoardGroupID; break;
        case cudaDevAttrHostNativeAtomicSupported: v = p.hostNativeAtomicSupported; break;
        case cudaDevAttrSingleToDoublePrecisionPerfRatio: v = p.singleToDoublePrecisionPerfRatio; break;
        case cudaDevAttrPageableMemoryAccess: v = p.pageableMemoryAccess; break;
        case cudaDevAttrConcurrentManagedAccess: v = p.concurrentManagedAccess; break;
        case cudaDevAttrComputePreemptionSupported: v = p.computePreemptionSupported; break;
        case cudaDevAttrCanUseHostPointerForRegisteredMem: v = p.canUseHostPointerForRegisteredMem; break;
        case cudaDevAttrCooperativeLaunch: v = p.cooperativeLaunch; break;
        case cudaDevAttrCooperativeMultiDeviceLaunch: v = p.cooperativeMultiDeviceLaunch; break;
        case cudaDevAttrMaxSharedMemoryPerBlockOptin: v = (int)p.sharedMemPerBlockOptin; break;
        case cudaDevAttrCanFlushRemoteWrites: v = 0; break;
        case cudaDevAttrHostRegisterSupported: v = p.hostRegisterSupported; break;
        case cudaDevAttrPageableMemoryAccessUsesHostPageTables: v = p.pageableMemoryAccessUsesHostPageTables; break;
        case cudaDevAttrDirectManagedMemAccessFromHost: v = p.directManagedMemAccessFromHost; break;
        case cudaDevAttrMaxBlocksPerMultiprocessor: v = p.maxBlocksPerMultiProcessor; break;
        case cudaDevAttrMaxPersistingL2CacheSize: v = p.persistingL2CacheMaxSize; break;
        case cudaDevAttrMaxAccessPolicyWindowSize: v = p.accessPolicyMaxWindowSize; break;
        case cudaDevAttrReservedSharedMemoryPerBlock: v = (int)p.reservedSharedMemPerBlock; break;
        case cudaDevAttrSparseCudaArraySupported: v = p.sparseCudaArraySupported; break;
        case cudaDevAttrHostRegisterReadOnlySupported: v = p.hostRegisterReadOnlySupported; break;
        case cudaDevAttrTimelineSemaphoreInteropSupported: v = p.timelineSemaphoreInteropSupported; break;
        case cudaDevAttrMemoryPoolsSupported: v = p.memoryPoolsSupported; break;
        case cudaDevAttrGPUDirectRDMASupported: v = p.gpuDirectRDMASupported; break;
        case cudaDevAttrGPUDirectRDMAFlushWritesOptions: v = (int)p.gpuDirectRDMAFlushWritesOptions; break;
        case cudaDevAttrGPUDirectRDMAWritesOrdering: v = p.gpuDirectRDMAWritesOrdering; break;
        case cudaDevAttrMemoryPoolSupportedHandleTypes: v = (int)p.memoryPoolSupportedHandleTypes; break;
        case cudaDevAttrClusterLaunch: v = p.clusterLaunch; break;
        case cudaDevAttrDeferredMappingCudaArraySupported: v = p.deferredMappingCudaArraySupported; break;
        case cudaDevAttrIpcEventSupport: v = p.ipcEventSupported; break;
        case cudaDevAttrMemSyncDomainCount: v = p.major >= 9 ? 4 : 1; break;
        case cudaDevAttrNumaConfig: v = 0; break;
        case cudaDevAttrNumaId: case cudaDevAttrHostNumaId: v = -1; break;
        case cudaDevAttrMpsEnabled: v = 0; break;
        case cudaDevAttrD3D12CigSupported: case cudaDevAttrVulkanCigSupported: v = 0; break;
        case cudaDevAttrGpuPciDeviceId: case cudaDevAttrGpuPciSubsystemId: v = 0; break;
        case cudaDevAttrHostNumaMemoryPoolsSupported: case cudaDevAttrHostNumaMultinodeIpcSupported: v = 0; break;
        case cudaDevAttrHostMemoryPoolsSupported: v = 0; break;
        case cudaDevAttrOnlyPartialHostNativeAtomicSupported: v = 0; break;
        case cudaDevAttrReserved92: case cudaDevAttrReserved93: case cudaDevAttrReserved94:
        case cudaDevAttrReserved122: case cudaDevAttrReserved123: case cudaDevAttrReserved124:
        case cudaDevAttrReserved127: case cudaDevAttrReserved128: case cudaDevAttrReserved129:
        case cudaDevAttrReserved132: case cudaDevAttrReserved141: case cudaDevAttrReserved145: v = 0; break;
        default: return false;
    }
    *value = v;
    return true;
}

extern "C" cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
    ApiLock held = start();
    if (!value) return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: value is NULL");
    if (!valid_device(device, "cudaDeviceGetAttribute")) return cudaErrorInvalidDevice;
    if (!attribute_value(attr, value))
        return fail(cudaErrorInvalidValue, "cudaDeviceGetAttribute: %d is not a cudaDeviceAttr", (int)attr);
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceSynchronize(void) {
    API_ENTER();
    flush_device_output();
    return g_sticky != cudaSuccess ? fail(g_sticky) : cudaSuccess;
}
extern "C" cudaError_t cudaThreadSynchronize(void) { return cudaDeviceSynchronize(); }
extern "C" cudaError_t cudaDeviceReset(void) {
    ApiLock held = start();
    flush_device_output();
    free_all_arrays();
    free_all_memory();
    reset_streams();
    reset_launch_state();
    g_sticky = cudaSuccess;
    g_device_flags = 0;
    return cudaSuccess;
}
extern "C" cudaError_t cudaThreadExit(void) { return cudaDeviceReset(); }
extern "C" cudaError_t cudaDriverGetVersion(int* v) {
    if (!v) return fail(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}
extern "C" cudaError_t cudaRuntimeGetVersion(int* v) {
    if (!v) return fail(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

static size_t g_limits[7] = {1024, 1 << 20, 8 << 20, 2, 2048, 64, 0};
extern "C" cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value) {
    API_ENTER();
    if ((int)limit < 0 || (int)limit > 6) return fail(cudaErrorUnsupportedLimit);
    if (limit == cudaLimitPersistingL2CacheSize && value > (size_t)g_prop.persistingL2CacheMaxSize)
        value = (size_t)g_prop.persistingL2CacheMaxSize;
    g_limits[limit] = value;
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceGetLimit(size_t* value, cudaLimit limit) {
    API_ENTER();
    if ((int)limit < 0 || (int)limit > 6) return fail(cudaErrorUnsupportedLimit);
    *value = g_limits[limit];
    return cudaSuccess;
}
static cudaFuncCache g_cache_config = cudaFuncCachePreferNone;
extern "C" cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache c) { API_ENTER(); g_cache_config = c; return cudaSuccess; }
extern "C" cudaError_t cudaDeviceGetCacheConfig(cudaFuncCache* c) { API_ENTER(); *c = g_cache_config; return cudaSuccess; }
extern "C" cudaError_t cudaDeviceSetSharedMemConfig(cudaSharedMemConfig) { API_ENTER(); return cudaSuccess; }
extern "C" cudaError_t cudaDeviceGetSharedMemConfig(cudaSharedMemConfig* c) {
    API_ENTER();
    *c = cudaSharedMemBankSizeFourByte;
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
    API_ENTER();
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceGetPCIBusId(char* id, int len, int device) {
    API_ENTER();
    if (!valid_device(device, "cudaDeviceGetPCIBusId")) return cudaErrorInvalidDevice;
    snprintf(id, (size_t)len, "0000:%02x:00.0", g_prop.pciBusID);
    return cudaSuccess;
}
// One device: it has no peers.
extern "C" cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
    API_ENTER();
    if (!valid_device(device, "cudaDeviceCanAccessPeer") || !valid_device(peer, "cudaDeviceCanAccessPeer"))
        return cudaErrorInvalidDevice;
    *can = 0;
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int) {
    API_ENTER();
    return fail(cudaErrorInvalidDevice, "cudaDeviceEnablePeerAccess(%d): the simulator has one device, "
                "which has no peers", peer);
}
extern "C" cudaError_t cudaDeviceDisablePeerAccess(int peer) {
    API_ENTER();
    return fail(peer == 0 ? cudaErrorPeerAccessNotEnabled : cudaErrorInvalidDevice);
}
extern "C" cudaError_t cudaCtxResetPersistingL2Cache(void) { API_ENTER(); return cudaSuccess; }
