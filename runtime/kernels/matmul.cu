// C[batch][M, N] = A[batch][M, K] @ B[batch][K, N], float or double (the prelude's scalar_t), with
// A and B read through their strides (batch, row, column; a batch stride of 0 broadcasts one
// matrix over the batch), so transposed and expanded operands need no copy. C is contiguous.
// Tiled through shared memory: each block computes a MATMUL_TILE x MATMUL_TILE tile of C (the
// edge comes from the prelude, nvrtc.pxd), staging matching tiles of A and B so every global
// element is read once per tile instead of once per product. Launched with MATMUL_TILE**2
// threads per block; blocks stride over the tiles of every matrix of C (batch-major, then
// row-major over the tiles).

struct MatrixStrides { long long batch, row, column; };

//@ read a[reach(n, 0, batch, a_strides.batch, m, a_strides.row, k, a_strides.column)]
//@ read b[reach(m, 0, batch, b_strides.batch, k, b_strides.row, n, b_strides.column)]
//@ write c[batch * m * n]
//@ launch grid: a block is one MATMUL_TILE x MATMUL_TILE tile of threads
//@ in-place no
extern "C" __global__ void matmul(const scalar_t* a, MatrixStrides a_strides, const scalar_t* b,
                                  MatrixStrides b_strides, scalar_t* c, long long batch,
                                  long long m, long long n, long long k) {
    __shared__ scalar_t a_tile[MATMUL_TILE][MATMUL_TILE];
    __shared__ scalar_t b_tile[MATMUL_TILE][MATMUL_TILE + 1];  // +1: no shared-memory bank conflicts
    int tx = threadIdx.x % MATMUL_TILE, ty = threadIdx.x / MATMUL_TILE;
    long long tiles_across = (n + MATMUL_TILE - 1) / MATMUL_TILE;
    long long tiles = ((m + MATMUL_TILE - 1) / MATMUL_TILE) * tiles_across;
    for (long long job = blockIdx.x; job < batch * tiles; job += gridDim.x) {
        long long item = job / tiles, tile = job % tiles;
        long long row = (tile / tiles_across) * MATMUL_TILE + ty;
        long long column = (tile % tiles_across) * MATMUL_TILE + tx;
        const scalar_t* a_matrix = a + item * a_strides.batch;
        const scalar_t* b_matrix = b + item * b_strides.batch;
        scalar_t sum = 0;
        for (long long start = 0; start < k; start += MATMUL_TILE) {
            a_tile[ty][tx] = (row < m && start + tx < k)
                ? a_matrix[row * a_strides.row + (start + tx) * a_strides.column] : (scalar_t)0;
            b_tile[ty][tx] = (column < n && start + ty < k)
                ? b_matrix[(start + ty) * b_strides.row + column * b_strides.column] : (scalar_t)0;
            __syncthreads();
            for (int i = 0; i < MATMUL_TILE; ++i) sum += a_tile[ty][i] * b_tile[i][tx];
            __syncthreads();
        }
        if (row < m && column < n) c[(item * m + row) * n + column] = sum;
    }
}
