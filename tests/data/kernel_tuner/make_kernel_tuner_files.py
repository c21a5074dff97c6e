"""Writes kernel_tuner_cache.json, kernel_tuner_t4.json and
kernel_tuner_t4_metadata.json with Kernel Tuner itself (pip install
kernel_tuner), on a machine without a GPU: Kernel Tuner's C backend (g++)
tunes a C function that returns its own run time in milliseconds, so the
files are Kernel Tuner's own output with real times. The function's time
has one optimum (reps=2, chunk=2); a restriction leaves one configuration
out (reps=4, chunk=3) and one does not compile (reps=2, chunk=3): its error
says what ptxas says of a kernel with too much shared memory, the one compile
error Kernel Tuner records (CompilationFailedConfig) instead of stopping.

    python tests/data/kernel_tuner/make_kernel_tuner_files.py
"""
from pathlib import Path

import numpy as np
from kernel_tuner import tune_kernel
from kernel_tuner.file_utils import store_metadata_file, store_output_file

SOURCE = r"""
#include <time.h>
#if reps == 2 && chunk == 3
#error uses too much shared data
#endif
extern "C" float spin(float *out, int n) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const long work = 20000L * (1 + 4 * ((reps - 2) * (reps - 2) + (chunk - 2) * (chunk - 2)));
    volatile float acc = 0.0f;
    for (long i = 0; i < work; ++i) acc += 1.0f;
    for (int i = 0; i < n; ++i) out[i] = (float)i;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (float)((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6);
}
"""


def main() -> None:
    here = Path(__file__).resolve().parent
    cache = here / "kernel_tuner_cache.json"
    cache.unlink(missing_ok=True)
    n = 64
    args = [np.zeros(n, np.float32), np.int32(n)]
    tune_params = {"reps": [1, 2, 4], "chunk": [1, 2, 3]}
    results, env = tune_kernel("spin", SOURCE, n, args, tune_params, lang="C",
                               restrictions=["reps * chunk < 12"],
                               answer=[np.arange(n, dtype=np.float32), None],
                               cache=str(cache), quiet=True)
    store_output_file(str(here / "kernel_tuner_t4.json"), results, tune_params)
    store_metadata_file(str(here / "kernel_tuner_t4_metadata.json"))
    best = {k: env["best_config"][k] for k in tune_params}
    print("Kernel Tuner's best configuration:", best)


if __name__ == "__main__":
    main()
