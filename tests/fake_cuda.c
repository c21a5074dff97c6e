/* A stand-in libcuda for tests/test_native_launch.py, where no GPU runs the C
 * launcher: the two driver functions native/launch.c looks up. cuLaunchKernel
 * keeps what it was given (the first fake_nparams argument slots, the grid,
 * block, shared memory and stream) and returns fake_status. */
#include <stdint.h>
#include <string.h>

uint64_t fake_params[64];
unsigned fake_dims[7];
void *fake_stream, *fake_function;
int fake_nparams = 0, fake_status = 0, fake_launches = 0;

int cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    (void)extra;
    unsigned dims[7] = {gx, gy, gz, bx, by, bz, shared};
    memcpy(fake_dims, dims, sizeof dims);
    fake_function = function;
    fake_stream = stream;
    for (int i = 0; i < fake_nparams && i < 64; ++i) memcpy(&fake_params[i], params[i], 8);
    ++fake_launches;
    return fake_status;
}

int cuEventRecord(void *event, void *stream) {
    (void)event; (void)stream;
    return 0;
}
