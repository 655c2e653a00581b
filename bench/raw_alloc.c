/* Raw CUDA baseline for bench_memory.py: cost of cudaMalloc + cudaFree with no cache, and of
   cudaMemGetInfo, in nanoseconds per call. Built by bench_memory.py with nvcc. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cuda_runtime_api.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    size_t sizes[] = {1 << 10, 1 << 20, 64 << 20};
    int iterations = argc > 1 ? atoi(argv[1]) : 2000;
    void *pointer;
    cudaFree(0); /* create the context outside the timed loops */
    for (int s = 0; s < 3; s++) {
        double start = now_ns();
        for (int i = 0; i < iterations; i++) {
            if (cudaMalloc(&pointer, sizes[s]) != cudaSuccess) return 1;
            cudaFree(pointer);
        }
        printf("cudaMalloc+cudaFree %zu %.1f\n", sizes[s], (now_ns() - start) / iterations);
    }
    size_t free_bytes, total_bytes;
    double start = now_ns();
    for (int i = 0; i < iterations; i++) cudaMemGetInfo(&free_bytes, &total_bytes);
    printf("cudaMemGetInfo 0 %.1f\n", (now_ns() - start) / iterations);
    return 0;
}
