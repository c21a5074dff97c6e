// The CUDA runtime of whole programs on the simulator: start and exit, errors, the
// device, device output and the profiler API (see cudart_internal.h for the parts).
//
//  * A fault (bad address, __trap, deadlock, time limit) ends the program: device printf
//    output so far is written, then one message on stderr (and in $WBSIM_FAULT_FILE for
//    the workbench) saying what and where.
//  * A failed device assert does what it does on a GPU: the asserting thread ends, its
//    message goes to stderr at the next synchronising call, which returns cudaErrorAssert,
//    and so does every call after it (the error is sticky) until cudaDeviceReset.
//  * The runtime starts on the first CUDA call; at exit (on_exit) it writes the device
//    output still held and ends the process at once: the pool threads never stop.
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cudart_internal.h"

wbsim_control* g_ctl = nullptr;
cudaError_t g_sticky = cudaSuccess;
cudaDeviceProp g_prop;

// -- errors ------------------------------------------------------------------------
static thread_local cudaError_t g_last_error = cudaSuccess;  // per host thread, as CUDA's

cudaError_t fail(cudaError_t e, const char* fmt, ...) {
    g_last_error = e;
    if (fmt) {  // what a GPU would leave unsaid, on stderr
        char text[600];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        fflush(stdout);
        fprintf(stderr, "wbsim: %s (%s)\n", text, cudaGetErrorName(e));
    }
    return e;
}

std::string format_text(const char* fmt, ...) {
    char text[1000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return text;
}

struct ErrorText { cudaError_t code; const char* name; const char* text; };
#define E(name, text) {name, #name, text}
static const ErrorText kErrors[] = {
    E(cudaSuccess, "no error"),
    E(cudaErrorInvalidValue, "invalid argument"),
    E(cudaErrorMemoryAllocation, "out of memory"),
    E(cudaErrorInitializationError, "initialization error"),
    E(cudaErrorCudartUnloading, "driver shutting down"),
    E(cudaErrorProfilerDisabled, "profiler disabled while using external profiling tool"),
    E(cudaErrorProfilerNotInitialized, "profiler not initialized: call cudaProfilerInitialize()"),
    E(cudaErrorProfilerAlreadyStarted, "profiler already started"),
    E(cudaErrorProfilerAlreadyStopped, "profiler already stopped"),
    E(cudaErrorInvalidConfiguration, "invalid configuration argument"),
    E(cudaErrorInvalidPitchValue, "invalid pitch argument"),
    E(cudaErrorInvalidSymbol, "invalid device symbol"),
    E(cudaErrorInvalidHostPointer, "invalid host pointer"),
    E(cudaErrorInvalidDevicePointer, "invalid device pointer"),
    E(cudaErrorInvalidTexture, "invalid texture reference"),
    E(cudaErrorInvalidTextureBinding, "texture is not bound to a pointer"),
    E(cudaErrorInvalidChannelDescriptor, "invalid channel descriptor"),
    E(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
    E(cudaErrorAddressOfConstant, "invalid address of constant"),
    E(cudaErrorTextureFetchFailed, "fetch from texture failed"),
    E(cudaErrorTextureNotBound, "cannot fetch from a texture that is not bound"),
    E(cudaErrorSynchronizationError, "incorrect use of __syncthreads()"),
    E(cudaErrorInvalidFilterSetting, "linear filtering not supported for non-float type"),
    E(cudaErrorInvalidNormSetting, "read as normalized float not supported for 32-bit non float type"),
    E(cudaErrorMixedDeviceExecution, "device emulation mode and device execution mode cannot be mixed"),
    E(cudaErrorNotYetImplemented, "feature not yet implemented"),
    E(cudaErrorMemoryValueTooLarge, "memory size or pointer value too large to fit in 32 bit"),
    E(cudaErrorStubLibrary, "CUDA driver is a stub library"),
    E(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"),
    E(cudaErrorCallRequiresNewerDriver, "API call is not supported in the installed CUDA driver"),
    E(cudaErrorInvalidSurface, "invalid surface reference"),
    E(cudaErrorDuplicateVariableName, "duplicate global variable looked up by string name"),
    E(cudaErrorDuplicateTextureName, "duplicate texture looked up by string name"),
    E(cudaErrorDuplicateSurfaceName, "duplicate surface looked up by string name"),
    E(cudaErrorDevicesUnavailable, "CUDA-capable device(s) is/are busy or unavailable"),
    E(cudaErrorIncompatibleDriverContext, "incompatible driver context"),
    E(cudaErrorMissingConfiguration, "__global__ function call is not configured"),
    E(cudaErrorPriorLaunchFailure, "unspecified launch failure in prior launch"),
    E(cudaErrorLaunchMaxDepthExceeded, "launch would exceed maximum depth of nested launches"),
    E(cudaErrorLaunchFileScopedTex, "launch failed because kernel uses unsupported, file-scoped textures "
                                    "(texture objects are supported)"),
    E(cudaErrorLaunchFileScopedSurf, "launch failed because kernel uses unsupported, file-scoped surfaces "
                                     "(surface objects are supported)"),
    E(cudaErrorSyncDepthExceeded, "cudaDeviceSynchronize failed because caller's grid depth exceeds "
                                  "cudaLimitDevRuntimeSyncDepth"),
    E(cudaErrorLaunchPendingCountExceeded, "launch failed because launch would exceed "
                                           "cudaLimitDevRuntimePendingLaunchCount"),
    E(cudaErrorInvalidDeviceFunction, "invalid device function"),
    E(cudaErrorNoDevice, "no CUDA-capable device is detected"),
    E(cudaErrorInvalidDevice, "invalid device ordinal"),
    E(cudaErrorDeviceNotLicensed, "device doesn't have valid Grid license"),
    E(cudaErrorSoftwareValidityNotEstablished, "integrity checks failed"),
    E(cudaErrorStartupFailure, "startup failure in cuda runtime"),
    E(cudaErrorInvalidKernelImage, "device kernel image is invalid"),
    E(cudaErrorDeviceUninitialized, "invalid device context"),
    E(cudaErrorMapBufferObjectFailed, "mapping of buffer object failed"),
    E(cudaErrorUnmapBufferObjectFailed, "unmapping of buffer object failed"),
    E(cudaErrorArrayIsMapped, "array is mapped"),
    E(cudaErrorAlreadyMapped, "resource already mapped"),
    E(cudaErrorNoKernelImageForDevice, "no kernel image is available for execution on the device"),
    E(cudaErrorAlreadyAcquired, "resource already acquired"),
    E(cudaErrorNotMapped, "resource not mapped"),
    E(cudaErrorNotMappedAsArray, "resource not mapped as array"),
    E(cudaErrorNotMappedAsPointer, "resource not mapped as pointer"),
    E(cudaErrorECCUncorrectable, "uncorrectable ECC error encountered"),
    E(cudaErrorUnsupportedLimit, "limit is not supported on this architecture"),
    E(cudaErrorDeviceAlreadyInUse, "exclusive-thread device already in use by a different thread"),
    E(cudaErrorPeerAccessUnsupported, "peer access is not supported between these two devices"),
    E(cudaErrorInvalidPtx, "a PTX JIT compilation failed"),
    E(cudaErrorInvalidGraphicsContext, "invalid OpenGL or DirectX context"),
    E(cudaErrorNvlinkUncorrectable, "uncorrectable NVLink error detected during the execution"),
    E(cudaErrorJitCompilerNotFound, "PTX JIT compiler library not found"),
    E(cudaErrorUnsupportedPtxVersion, "the provided PTX was compiled with an unsupported toolchain."),
    E(cudaErrorJitCompilationDisabled, "PTX JIT compilation was disabled"),
    E(cudaErrorUnsupportedExecAffinity, "the provided execution affinity is not supported"),
    E(cudaErrorUnsupportedDevSideSync, "cudaDeviceSynchronize is not supported on this device"),
    E(cudaErrorInvalidSource, "device kernel image is invalid"),
    E(cudaErrorFileNotFound, "file not found"),
    E(cudaErrorSharedObjectSymbolNotFound, "shared object symbol not found"),
    E(cudaErrorSharedObjectInitFailed, "shared object initialization failed"),
    E(cudaErrorOperatingSystem, "OS call failed or operation not supported on this OS"),
    E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    E(cudaErrorIllegalState, "the operation cannot be performed in the present state"),
    E(cudaErrorLossyQuery, "attempted introspection would be semantically lossy"),
    E(cudaErrorSymbolNotFound, "named symbol not found"),
    E(cudaErrorNotReady, "device not ready"),
    E(cudaErrorIllegalAddress, "an illegal memory access was encountered"),
    E(cudaErrorLaunchOutOfResources, "too many resources requested for launch"),
    E(cudaErrorLaunchTimeout, "the launch timed out and was terminated"),
    E(cudaErrorLaunchIncompatibleTexturing, "launch uses incompatible texturing mode"),
    E(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled"),
    E(cudaErrorPeerAccessNotEnabled, "peer access has not been enabled"),
    E(cudaErrorSetOnActiveProcess, "cannot set while device is active in this process"),
    E(cudaErrorContextIsDestroyed, "context is destroyed"),
    E(cudaErrorAssert, "device-side assert triggered"),
    E(cudaErrorTooManyPeers, "peer mapping resources exhausted"),
    E(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped"),
    E(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region"),
    E(cudaErrorHardwareStackError, "hardware stack error"),
    E(cudaErrorIllegalInstruction, "an illegal instruction was encountered"),
    E(cudaErrorMisalignedAddress, "misaligned address"),
    E(cudaErrorInvalidAddressSpace, "operation not supported on global/shared address space"),
    E(cudaErrorInvalidPc, "invalid program counter"),
    E(cudaErrorLaunchFailure, "unspecified launch failure"),
    E(cudaErrorCooperativeLaunchTooLarge, "too many blocks in cooperative launch"),
    E(cudaErrorNotPermitted, "operation not permitted"),
    E(cudaErrorNotSupported, "operation not supported"),
    E(cudaErrorSystemNotReady, "system not yet initialized"),
    E(cudaErrorSystemDriverMismatch, "system has unsupported display driver / cuda driver combination"),
    E(cudaErrorCompatNotSupportedOnDevice, "forward compatibility was attempted on non supported HW"),
    E(cudaErrorMpsConnectionFailed, "MPS client failed to connect to the MPS control daemon or the MPS server"),
    E(cudaErrorMpsRpcFailure, "the remote procedural call between the MPS server and the MPS client failed"),
    E(cudaErrorMpsServerNotReady, "MPS server is not ready to accept new MPS client requests"),
    E(cudaErrorMpsMaxClientsReached, "the hardware resources required to create MPS client have been exhausted"),
    E(cudaErrorMpsMaxConnectionsReached, "the hardware resources required to support device connections "
                                         "have been exhausted"),
    E(cudaErrorMpsClientTerminated, "the MPS client has been terminated by the server"),
    E(cudaErrorCdpNotSupported, "the module is using CUDA Dynamic Parallelism, but the current configuration, "
                                "like MPS, does not support it"),
    E(cudaErrorCdpVersionMismatch, "the module uses CUDA Dynamic Parallelism, which is not supported in this "
                                   "runtime"),
    E(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing"),
    E(cudaErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture"),
    E(cudaErrorStreamCaptureMerge, "operation would result in a merge of separate capture sequences"),
    E(cudaErrorStreamCaptureUnmatched, "capture was not ended in the same stream as it began"),
    E(cudaErrorStreamCaptureUnjoined, "capturing stream has unjoined work"),
    E(cudaErrorStreamCaptureIsolation, "dependency created on uncaptured work in another stream"),
    E(cudaErrorStreamCaptureImplicit, "operation would make the legacy stream depend on a capturing blocking "
                                      "stream"),
    E(cudaErrorCapturedEvent, "operation not permitted on an event last recorded in a capturing stream"),
    E(cudaErrorStreamCaptureWrongThread, "attempt to terminate a thread-local capture sequence from another "
                                         "thread"),
    E(cudaErrorTimeout, "wait operation timed out"),
    E(cudaErrorGraphExecUpdateFailure, "the graph update was not performed because it included changes which "
                                       "violated constraints specific to instantiated graph update"),
    E(cudaErrorExternalDevice, "an async error has occured in external entity outside of CUDA"),
    E(cudaErrorInvalidClusterSize, "a kernel launch error has occurred due to cluster misconfiguration"),
    E(cudaErrorFunctionNotLoaded, "the function handle is not loaded when calling an API that requires a "
                                  "loaded function"),
    E(cudaErrorInvalidResourceType, "one or more resources passed in are not valid resource types for the "
                                    "operation"),
    E(cudaErrorInvalidResourceConfiguration, "one or more resources are insufficient or non-applicable for "
                                             "the operation"),
    E(cudaErrorUnknown, "unknown error"),
    E(cudaErrorApiFailureBase, "api failure base"),
};
#undef E

extern "C" const char* cudaGetErrorString(cudaError_t e) {
    for (const auto& t : kErrors) if (t.code == e) return t.text;
    return "unrecognized error code";
}
extern "C" const char* cudaGetErrorName(cudaError_t e) {
    for (const auto& t : kErrors) if (t.code == e) return t.name;
    return "unrecognized error code";
}
extern "C" cudaError_t cudaGetLastError(void) {
    if (g_sticky != cudaSuccess) return g_sticky;
    cudaError_t e = g_last_error;
    g_last_error = cudaSuccess;
    return e;
}
extern "C" cudaError_t cudaPeekAtLastError(void) {
    return g_sticky != cudaSuccess ? g_sticky : g_last_error;
}

// -- the device --------------------------------------------------------------------
// The virtual device's properties: $WBSIM_DEVICE ("key=value;..." from the
// workbench), else an H100's.
static void load_properties() {
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

// -- the profiler: no profiler watches a simulator program -------------------------------------
extern "C" cudaError_t cudaProfilerStart(void) { API_ENTER(); return cudaSuccess; }
extern "C" cudaError_t cudaProfilerStop(void) { API_ENTER(); return cudaSuccess; }

// -- device output: printf and failed asserts ------------------------------------------------
static std::mutex g_assert_mu;
static std::string g_assert_text;   // messages of failed asserts not yet written
static bool g_assert_failed = false;  // in the launch running now

void note_failed_assert(const char* message) {
    std::lock_guard<std::mutex> lk(g_assert_mu);
    if (g_assert_text.size() < (64u << 10)) {
        g_assert_text += message;
        g_assert_text += '\n';
    }
    g_assert_failed = true;
}
bool take_failed_assert() {
    std::lock_guard<std::mutex> lk(g_assert_mu);
    bool failed = g_assert_failed;
    g_assert_failed = false;
    return failed;
}

[[noreturn]] static void assert_hook(const char* message) {
    note_failed_assert(message);
    g_launch_abandoned.store(1);  // no block starts after this one (the GPU ends the launch)
    throw __wbsim_thread_exit();
}

static void write_all(int fd, const char* p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

// from_fault: in a signal handler (no stdio, no locks).
static void write_device_output(bool from_fault) {
    if (!g_ctl) return;
    uint64_t n = __atomic_load_n(&g_ctl->printf_committed, __ATOMIC_ACQUIRE);
    uint64_t dropped = g_ctl->printf_dropped;
    const char* buf = (const char*)g_ctl + WBSIM_PRINTF_OFFSET;
    if (from_fault) {
        write_all(1, buf, n);
        return;
    }
    if (n) {
        fwrite(buf, 1, n, stdout);
        fflush(stdout);
    }
    if (dropped)
        fprintf(stderr, "wbsim: %llu bytes of device printf output were dropped (more than %u bytes "
                "in one launch)\n", (unsigned long long)dropped, WBSIM_PRINTF_BYTES);
    g_ctl->printf_len = g_ctl->printf_committed = g_ctl->printf_dropped = 0;
    std::string asserts;
    {
        std::lock_guard<std::mutex> lk(g_assert_mu);
        asserts.swap(g_assert_text);
    }
    if (!asserts.empty()) {
        fputs(asserts.c_str(), stderr);
        fflush(stderr);
    }
}
void flush_device_output() { write_device_output(false); }

// -- start, exit, faults -------------------------------------------------------------
static bool g_started = false;

static const char* signal_text(int sig) {
    switch (sig) {
        case SIGSEGV: return "invalid memory access (SIGSEGV)";
        case SIGBUS: return "invalid memory access (SIGBUS)";
        case SIGFPE: return "arithmetic error (SIGFPE: integer division by zero?)";
        case SIGILL: return "illegal instruction (SIGILL)";
        case SIGABRT: return "abort (SIGABRT)";
        default: return "signal";
    }
}

static void on_fault(int kind) {
    const wbsim_fault& f = g_ctl->fault;
    bool in_kernel = f.has_block != 0;
    write_device_output(true);
    char what[1300], where[300] = "", address[300] = "";
    if (kind == WBSIM_FAULT_SIGNAL && strncmp(f.message, "stack overflow", 14) != 0) {
        if (f.signo == SIGSEGV || f.signo == SIGBUS) {
            describe_address(address, sizeof address, f.address, in_kernel);
            snprintf(what, sizeof what, "%s at address 0x%llx%s", signal_text(f.signo),
                     (unsigned long long)f.address, address);
        } else {
            snprintf(what, sizeof what, "%s", signal_text(f.signo));
        }
    } else {
        snprintf(what, sizeof what, "%s", f.message);
    }
    if (in_kernel)
        snprintf(where, sizeof where, "kernel '%s' faulted in block (%u,%u,%u), thread (%u,%u,%u)",
                 f.kernel, f.block[0], f.block[1], f.block[2], f.thread[0], f.thread[1], f.thread[2]);
    else
        snprintf(where, sizeof where, "the program faulted in host code");
    const char* gpu = "";
    if (in_kernel && kind == WBSIM_FAULT_SIGNAL)
        gpu = "\nwbsim: on a GPU: cudaErrorIllegalAddress (\"an illegal memory access was encountered\"), "
              "returned by the next synchronising call";
    else if (in_kernel && kind == WBSIM_FAULT_TRAP)
        gpu = "\nwbsim: on a GPU: cudaErrorLaunchFailure (\"unspecified launch failure\"), returned by the "
              "next synchronising call";
    char msg[2000];
    int len = snprintf(msg, sizeof msg, "wbsim: %s: %s%s\n", where, what, gpu);
    if (len < 0) return;
    if ((size_t)len >= sizeof msg) len = (int)sizeof msg - 1;
    write_all(2, msg, (size_t)len);
    if (const char* path = getenv("WBSIM_FAULT_FILE")) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) { write_all(fd, msg + 7, (size_t)len - 7); close(fd); }
    }
}

static void at_exit(int status, void*) {
    // The pool threads wait for work for ever: end the process here, after
    // writing what the program and its kernels wrote, instead of destroying their state.
    flush_device_output();
    std::cout.flush();
    std::cerr.flush();
    fflush(nullptr);
    _exit(status);
}

static std::recursive_mutex g_api;

ApiLock start() {
    if (t_in_kernel)  // the host thread that launched the kernel holds the lock
        fault_now(WBSIM_FAULT_UNSUPPORTED, "a CUDA runtime call in device code, which the simulator "
                  "does not support");
    ApiLock lock(g_api);
    if (g_started) return lock;
    g_started = true;
    load_properties();
    void* page = mmap(nullptr, WBSIM_ARENA_RESERVED, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g_ctl = (wbsim_control*)page;
    g_ctl->magic = WBSIM_CONTROL_MAGIC;
    g_ctl->printf_capacity = WBSIM_PRINTF_BYTES;
    g_fault_hook = on_fault;
    g_assert_hook = assert_hook;
    reserve_memory();
    thread_setup();
    install_handlers();
    unsigned threads = 0;
    if (const char* t = getenv("WBSIM_THREADS")) threads = (unsigned)atoi(t);
    if (threads == 0) {
        cpu_set_t set;
        threads = sched_getaffinity(0, sizeof set, &set) == 0 ? (unsigned)CPU_COUNT(&set) : 1;
    }
    start_threads(threads - 1);
    on_exit(at_exit, nullptr);
    return lock;
}

// Output appears line by line, as on a terminal, even into a pipe.
__attribute__((constructor)) static void line_buffered() { setvbuf(stdout, nullptr, _IOLBF, 0); }
