/* Raw CUDA baselines for the benchmarks, built with nvcc by bench_memory.py and bench_tensor.py:
   cudaMalloc + cudaFree with no cache and cudaMemGetInfo (ns per call), and a 256 MiB
   device-to-device cudaMemcpyAsync (ms per copy, timed with events). */
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

    size_t copy_bytes = (size_t)256 << 20;
    void *source, *target;
    cudaEvent_t begin, end;
    float milliseconds;
    cudaMalloc(&source, copy_bytes);
    cudaMalloc(&target, copy_bytes);
    cudaEventCreate(&begin);
    cudaEventCreate(&end);
    cudaMemcpyAsync(target, source, copy_bytes, cudaMemcpyDeviceToDevice, 0); /* warm up */
    cudaEventRecord(begin, 0);
    for (int i = 0; i < 20; i++)
        cudaMemcpyAsync(target, source, copy_bytes, cudaMemcpyDeviceToDevice, 0);
    cudaEventRecord(end, 0);
    cudaEventSynchronize(end);
    cudaEventElapsedTime(&milliseconds, begin, end);
    printf("cudaMemcpyDeviceToDevice %zu %.4f\n", copy_bytes, milliseconds / 20);
    return 0;
}
