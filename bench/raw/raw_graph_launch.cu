/* Raw CUDA baseline for bench_graphs.py, for graphs of 1 to 4096 one-block kernels captured from
   a stream. Prints "cudaGraphLaunch KERNELS NS" lines: the host cost of cudaGraphLaunch called
   in a loop, nanoseconds per launch, best of 7 rounds, with the schedule bench_graphs.py uses
   (max(20, 200 / KERNELS) launches per round, the device synchronised between rounds); and
   "capture KERNELS US" lines: microseconds to capture the kernels and instantiate the graph,
   the median of bench_graphs.py's number of captures (max(5, min(50, 4096 / KERNELS))). And
   for SPLIT_KERNELS kernels launched with cuLaunchKernel, as tensorplay launches: "launches
   under capture KERNELS US", microseconds from cudaStreamBeginCapture to the last launch, and
   "end capture and instantiate KERNELS US", cudaStreamEndCapture and cudaGraphInstantiate, each
   the median of SPLIT_CAPTURES captures (bench_graphs.py's split of a capture). And "eager
   launches EAGER_LAUNCHES NS": the host cost of one cuLaunchKernel outside a capture, in
   rounds of EAGER_LAUNCHES with the device synchronised between them, best of EAGER_ROUNDS
   (bench_tensor.py's schedule for the host cost of a small op, whose floor it is). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#define CHECK(call) do { cudaError_t status_ = (call); if (status_ != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(status_)); exit(1); } } while (0)
#define CHECK_DRIVER(call) do { CUresult status_ = (call); if (status_ != CUDA_SUCCESS) { \
    const char *name_ = "unknown"; cuGetErrorName(status_, &name_); \
    fprintf(stderr, "%s: %s\n", #call, name_); exit(1); } } while (0)

#define SPLIT_KERNELS 1024
#define SPLIT_CAPTURES 15
#define EAGER_LAUNCHES 500
#define EAGER_ROUNDS 15

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

static double median(double *values, int count) {
    qsort(values, count, sizeof(double), by_value);
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

/* The capture of SPLIT_KERNELS launches of add_one through the driver's cuLaunchKernel, timed
   in two parts: up to the last launch, and the end of the capture with the instantiation. */
static void capture_split(cudaStream_t stream, float *x) {
    CUfunction function;
    void *arguments[] = {&x};
    double launches[SPLIT_CAPTURES], ends[SPLIT_CAPTURES];
    /* A cudaFunction_t is the driver's CUfunction (CUDA Runtime API, "Interactions with the
       CUDA Driver API"). */
    CHECK(cudaGetFuncBySymbol((cudaFunction_t *)&function, (const void *)add_one));
    for (int c = 0; c < SPLIT_CAPTURES; c++) {
        cudaGraph_t graph;
        cudaGraphExec_t executable;
        CHECK(cudaStreamSynchronize(stream));
        double start = now_ns();
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        for (int k = 0; k < SPLIT_KERNELS; k++)
            CHECK_DRIVER(cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, (CUstream)stream,
                                        arguments, NULL));
        double launched = now_ns();
        CHECK(cudaStreamEndCapture(stream, &graph));
        CHECK(cudaGraphInstantiate(&executable, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch
                                   | cudaGraphInstantiateFlagUseNodePriority));
        double ended = now_ns();
        launches[c] = (launched - start) / 1e3;
        ends[c] = (ended - launched) / 1e3;
        CHECK(cudaGraphExecDestroy(executable));
        CHECK(cudaGraphDestroy(graph));
    }
    printf("launches under capture %d %.1f\n", SPLIT_KERNELS, median(launches, SPLIT_CAPTURES));
    printf("end capture and instantiate %d %.1f\n", SPLIT_KERNELS,
           median(ends, SPLIT_CAPTURES));
}

static void eager_launches(cudaStream_t stream, float *x) {
    CUfunction function;
    void *arguments[] = {&x};
    CHECK(cudaGetFuncBySymbol((cudaFunction_t *)&function, (const void *)add_one));
    double best = 1e30;
    for (int round = 0; round < EAGER_ROUNDS; round++) {
        CHECK(cudaStreamSynchronize(stream));
        double start = now_ns();
        for (int k = 0; k < EAGER_LAUNCHES; k++)
            CHECK_DRIVER(cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, (CUstream)stream,
                                        arguments, NULL));
        double elapsed = (now_ns() - start) / EAGER_LAUNCHES;
        if (elapsed < best) best = elapsed;
    }
    CHECK(cudaStreamSynchronize(stream));
    printf("eager launches %d %.1f\n", EAGER_LAUNCHES, best);
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
        printf("capture %d %.1f\n", kernels, median(captures, count));
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
    capture_split(stream, x);
    eager_launches(stream, x);
    return 0;
}
