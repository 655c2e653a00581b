/* Raw CUDA baseline for bench_graph_extras.py: the host cost of staging INPUTS inputs of 1 MiB
   into a graph's static buffers with cudaMemcpyAsync (device to device) and launching the graph
   with cudaGraphLaunch, as a C program would without a staging kernel. Prints one line,
   "memcpy_and_launch INPUTS US": microseconds per round, best of 7, the device synchronised
   between rounds (the schedule bench_graph_extras.py uses). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cuda_runtime_api.h>

#define CHECK(call) do { cudaError_t status_ = (call); if (status_ != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(status_)); exit(1); } } while (0)

#define INPUTS 8
#define ELEMENTS ((1 << 20) / 4)

__global__ void twice(float *x, int count) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += blockDim.x * gridDim.x)
        x[i] *= 2.0f;
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void) {
    float *statics[INPUTS], *fresh[INPUTS];
    cudaStream_t stream;
    cudaGraph_t graph;
    cudaGraphExec_t executable;
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int i = 0; i < INPUTS; i++) {
        CHECK(cudaMalloc(&statics[i], ELEMENTS * sizeof(float)));
        CHECK(cudaMalloc(&fresh[i], ELEMENTS * sizeof(float)));
    }
    twice<<<256, 256, 0, stream>>>(statics[0], ELEMENTS); /* load the module outside the capture */
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < INPUTS; i++) twice<<<256, 256, 0, stream>>>(statics[i], ELEMENTS);
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&executable, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    CHECK(cudaGraphLaunch(executable, stream)); /* the first launch uploads the graph */
    double best = 1e30;
    for (int round = 0; round < 7; round++) {
        CHECK(cudaDeviceSynchronize());
        double start = now_ns();
        for (int i = 0; i < INPUTS; i++)
            cudaMemcpyAsync(statics[i], fresh[i], ELEMENTS * sizeof(float),
                            cudaMemcpyDeviceToDevice, stream);
        cudaGraphLaunch(executable, stream);
        double elapsed = (now_ns() - start) / 1e3;
        if (elapsed < best) best = elapsed;
    }
    CHECK(cudaDeviceSynchronize());
    printf("memcpy_and_launch %d %.1f\n", INPUTS, best);
    return 0;
}
