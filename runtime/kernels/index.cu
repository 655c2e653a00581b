// Selection by index along one dimension: index_select, a gather, the forward of
// Tensor.index_select, integer-tensor indexing and nn.Embedding (scatter.cu holds their
// backward). The prelude defines scalar_t, any element type. The kernel sees a contiguous
// tensor of shape (outer, size, inner) as the one indexed along its middle dimension, and the
// output as (outer, index_count, inner), so one kernel serves every dimension.
//
// An index outside [0, size) selects a zero: PyTorch's kernels assert on the device instead,
// which poisons the CUDA context; the host checks CPU indices before any kernel, and a device
// cannot be read back without a synchronisation (which a capture refuses).

//@ read source[outer * size * inner], index[index_count]
//@ write out[outer * index_count * inner]
//@ launch any
//@ in-place no
extern "C" __global__ void index_select(const scalar_t* source, const long long* index,
                                        scalar_t* out, long long outer, long long size,
                                        long long inner, long long index_count) {
    GRID_STRIDE_LOOP(n, outer * index_count * inner) {
        long long k = n % inner;
        long long row = n / inner;  // o * index_count + i
        long long at = index[row % index_count];
        out[n] = (at >= 0 && at < size) ? source[((row / index_count) * size + at) * inner + k]
                                        : scalar_t();
    }
}
