"""The simulator's CUDA runtime for whole programs behaves as a GPU's does
where programs rely on it: allocation limits, the dynamic shared memory opt-in."""
import workbench as wb


def sim(source, **kw):
    kw.setdefault("echo", False)
    return wb.program(source, backend="simulator", **kw)


HUGE_MALLOC = r"""
#include <cstdio>
#include <cstdint>
int main() {
    void* huge = nullptr;
    cudaError_t e = cudaMalloc(&huge, (size_t)-1024);
    printf("huge: %s %d\n", cudaGetErrorString(e), huge == nullptr);
    cudaGetLastError();
    char *a = nullptr, *b = nullptr;
    cudaMalloc(&a, 1 << 20);
    cudaMalloc(&b, 1 << 20);
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    printf("overlap: %d\n", (int)(x < y + (1 << 20) && y < x + (1 << 20)));
    printf("past end: %s\n", cudaGetErrorString(cudaMemset(a + 16, 0, (size_t)-8)));
    return 0;
}
"""


def test_a_huge_cuda_malloc_fails_and_later_allocations_do_not_overlap():
    lines = sim(HUGE_MALLOC).stdout.splitlines()
    assert lines[0] == "huge: out of memory 1"
    assert lines[1] == "overlap: 0"
    assert lines[2] == "past end: invalid argument"
