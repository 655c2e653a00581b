// C[M, N] = A[M, K] @ B[K, N] for contiguous float32, tiled through shared memory: each block
// computes a TILE x TILE tile of C, staging matching tiles of A and B so every global element is
// read once per tile instead of once per product. Launched one-dimensionally (TILE * TILE
// threads per block, one block per tile of C, row-major over the tiles).
#define TILE 16

extern "C" __global__ void matmul_f32(const float* a, const float* b, float* c, int m, int n,
                                      int k) {
    __shared__ float a_tile[TILE][TILE];
    __shared__ float b_tile[TILE][TILE + 1];  // +1 avoids shared-memory bank conflicts
    int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
    int tiles_across = (n + TILE - 1) / TILE;
    int row = (blockIdx.x / tiles_across) * TILE + ty;
    int column = (blockIdx.x % tiles_across) * TILE + tx;
    float sum = 0.0f;
    for (int start = 0; start < k; start += TILE) {
        a_tile[ty][tx] = (row < m && start + tx < k) ? a[(long long)row * k + start + tx] : 0.0f;
        b_tile[ty][tx] = (column < n && start + ty < k) ? b[(long long)(start + ty) * n + column]
                                                        : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) sum += a_tile[ty][i] * b_tile[i][tx];
        __syncthreads();
    }
    if (row < m && column < n) c[(long long)row * n + column] = sum;
}
