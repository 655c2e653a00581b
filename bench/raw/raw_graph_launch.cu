/* Raw CUDA baseline for bench_graphs.py, for graphs of 1 to 4096 one-block kernels captured from
   a stream. Prints "cudaGraphLaunch KERNELS NS" lines: the host cost of cudaGraphLaunch called
   in a loop, nanoseconds per launch, best of 7 rounds, with the schedule bench_graphs.py uses
   (max(20, 200 / KERNELS) launches per round, the device synchronised between rounds); and
   "capture KERNELS US" lines: microseconds to capture the kernels and instantiate the graph,
   the median of bench_graphs.py's number of captures (max(5, min(50, 4096 / KERNELS))). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cuda_runtime_api.h>

#define CHECK(call) do { cudaError_t status_ = (call); if (status_ != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(status_)); exit(1); } } while (0)

__global__ void add_one(float *x) { x[threadIdx.x] += 1.0f; }

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void capture(cudaStream_t stream, float *x, int kernels, cudaGraph_t *graph,
                    cudaGraphExec_t *executable) {
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int k = 0; k < kernels; k++) add_one<<<1, 32, 0, stream>>>(x);
    CHECK(cudaStreamEndCapture(stream, graph));
    CHECK(cudaGraphInstantiate(executable, *graph, cudaGraphInstantiateFlagAutoFreeOnLaunch
                               | cudaGraphInstantiateFlagUseNodePriority));
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void) {
    float *x;
    cudaStream_t stream;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&x, 32 * sizeof(float)));
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    add_one<<<1, 32, 0, stream>>>(x); /* load the module outside the capture */
    CHECK(cudaStreamSynchronize(stream));
    for (int kernels = 1; kernels <= 4096; kernels *= 4) {
        cudaGraph_t graph;
        cudaGraphExec_t executable;
        double captures[50];
        int count = 4096 / kernels < 5 ? 5 : (4096 / kernels > 50 ? 50 : 4096 / kernels);
        for (int c = 0; c < count; c++) {
            CHECK(cudaStreamSynchronize(stream));
            double start = now_ns();
            capture(stream, x, kernels, &graph, &executable);
            captures[c] = (now_ns() - start) / 1e3;
            CHECK(cudaGraphExecDestroy(executable));
            CHECK(cudaGraphDestroy(graph));
        }
        qsort(captures, count, sizeof(double), by_value);
        double median = count % 2 ? captures[count / 2]
                                  : (captures[count / 2 - 1] + captures[count / 2]) / 2;
        printf("capture %d %.1f\n", kernels, median);
        capture(stream, x, kernels, &graph, &executable);
        CHECK(cudaGraphLaunch(executable, stream)); /* the first launch uploads the graph */
        CHECK(cudaStreamSynchronize(stream));
        int launches = 200 / kernels < 20 ? 20 : 200 / kernels;
        double best = 1e30;
        for (int round = 0; round < 7; round++) {
            CHECK(cudaDeviceSynchronize());
            double start = now_ns();
            for (int i = 0; i < launches; i++) cudaGraphLaunch(executable, stream);
            double elapsed = (now_ns() - start) / launches;
            if (elapsed < best) best = elapsed;
        }
        CHECK(cudaDeviceSynchronize());
        printf("cudaGraphLaunch %d %.1f\n", kernels, best);
        CHECK(cudaGraphExecDestroy(executable));
        CHECK(cudaGraphDestroy(graph));
    }
    return 0;
}
