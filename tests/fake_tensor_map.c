/* A stand-in libcuda for tests/test_kernel_library_hopper.py, where no GPU can
 * encode a tensor map: cuTensorMapEncodeTiled writes what it was given into the
 * 128-byte map (so that the test reads back how workbench/kernels/tensor_maps.py
 * marshalled its arguments) or returns fake_status; cuGetErrorName names it. */
#include <stdint.h>
#include <string.h>

int fake_status = 0;

int cuTensorMapEncodeTiled(void *map, int dtype, uint32_t rank, void *address, const uint64_t *dims,
                           const uint64_t *strides, const uint32_t *box, const uint32_t *steps,
                           int interleave, int swizzle, int l2, int fill) {
    if (fake_status) return fake_status;
    uint64_t out[16] = {(uint64_t)(uintptr_t)map % 64, (uint64_t)dtype, rank,
                        (uint64_t)(uintptr_t)address, dims[0], dims[1], strides[0], box[0], box[1],
                        steps[0], steps[1], (uint64_t)interleave, (uint64_t)swizzle, (uint64_t)l2,
                        (uint64_t)fill, 0x7e57};
    memcpy(map, out, sizeof out);
    return 0;
}

int cuGetErrorName(int code, const char **name) {
    *name = code == 1 ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_UNKNOWN";
    return 0;
}
