// A stream captured into a graph and the graph launched several times, as the samples'
// cudaGraphsPerfScaling builds one; a host function in the graph counts the replays.
#include <cstdio>
#include <helper_check.h>

__global__ void addOne(int* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}
__global__ void doubleIt(int* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2;
}
static int replays = 0;
static void count(void*) { ++replays; }

int main() {
    const int n = 1000;
    int *d, h[n];
    checkCuda(cudaMalloc(&d, n * sizeof(int)));
    checkCuda(cudaMemset(d, 0, n * sizeof(int)));
    cudaStream_t s1, s2;
    checkCuda(cudaStreamCreate(&s1));
    checkCuda(cudaStreamCreate(&s2));
    cudaEvent_t fork, join;
    checkCuda(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    checkCuda(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

    cudaGraph_t graph;
    checkCuda(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    cudaStreamCaptureStatus status;
    checkCuda(cudaStreamIsCapturing(s1, &status));
    addOne<<<(n + 255) / 256, 256, 0, s1>>>(d, n);
    checkCuda(cudaEventRecord(fork, s1));
    checkCuda(cudaStreamWaitEvent(s2, fork, 0));        // s2 joins the capture
    doubleIt<<<(n + 255) / 256, 256, 0, s2>>>(d, n);
    checkCuda(cudaEventRecord(join, s2));
    checkCuda(cudaStreamWaitEvent(s1, join, 0));
    checkCuda(cudaLaunchHostFunc(s1, count, nullptr));
    checkCuda(cudaStreamEndCapture(s1, &graph));
    checkCuda(cudaMemcpy(h, d, sizeof(int), cudaMemcpyDeviceToHost));
    printf("capturing: %d; while captured nothing ran: %d, replays %d\n", status == cudaStreamCaptureStatusActive,
           h[0], replays);

    cudaGraphExec_t exec;
    checkCuda(cudaGraphInstantiate(&exec, graph, 0));
    for (int r = 0; r < 3; ++r) checkCuda(cudaGraphLaunch(exec, s1));
    checkCuda(cudaStreamSynchronize(s1));
    checkCuda(cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost));
    long sum = 0;
    for (int i = 0; i < n; ++i) sum += h[i];
    printf("after 3 replays: x = %d, sum %ld, replays %d\n", h[0], sum, replays);
    checkCuda(cudaGraphExecDestroy(exec));
    checkCuda(cudaGraphDestroy(graph));
    return 0;
}
