// Every error's name and words, as the samples' checkCudaErrors prints them.
#include <cstdio>
#include <cuda_runtime.h>

int main() {
    static const cudaError_t codes[] = {
        cudaSuccess, cudaErrorInvalidValue, cudaErrorMemoryAllocation, cudaErrorInitializationError,
        cudaErrorInvalidConfiguration, cudaErrorInvalidPitchValue, cudaErrorInvalidSymbol,
        cudaErrorInvalidDevicePointer, cudaErrorInvalidMemcpyDirection, cudaErrorInvalidChannelDescriptor,
        cudaErrorInvalidFilterSetting, cudaErrorInvalidNormSetting, cudaErrorInsufficientDriver,
        cudaErrorInvalidDeviceFunction, cudaErrorNoDevice, cudaErrorInvalidDevice, cudaErrorNoKernelImageForDevice,
        cudaErrorUnsupportedLimit, cudaErrorPeerAccessUnsupported, cudaErrorInvalidResourceHandle,
        cudaErrorIllegalState, cudaErrorSymbolNotFound, cudaErrorNotReady, cudaErrorIllegalAddress,
        cudaErrorLaunchOutOfResources, cudaErrorLaunchTimeout, cudaErrorPeerAccessAlreadyEnabled,
        cudaErrorPeerAccessNotEnabled, cudaErrorAssert, cudaErrorHostMemoryAlreadyRegistered,
        cudaErrorHostMemoryNotRegistered, cudaErrorIllegalInstruction, cudaErrorMisalignedAddress,
        cudaErrorLaunchFailure, cudaErrorCooperativeLaunchTooLarge, cudaErrorNotPermitted,
        cudaErrorNotSupported, cudaErrorStreamCaptureUnsupported, cudaErrorStreamCaptureInvalidated,
        cudaErrorCapturedEvent, cudaErrorTimeout, cudaErrorUnknown,
    };
    for (cudaError_t e : codes) printf("%d %s: %s\n", (int)e, cudaGetErrorName(e), cudaGetErrorString(e));
    return 0;
}
