// Selection by index along one dimension: index_select, the forward of Tensor.index_select,
// integer-tensor indexing and nn.Embedding; gather, Tensor.gather's; and scatter, the store of
// Tensor.scatter (scatter.cu holds the additions: index_select's and gather's backward). The prelude defines scalar_t, any element type. The kernel sees a contiguous
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

// out[i][j][k] = source[i][index[i][j][k]][k] for axis 1 (Tensor.gather): out is contiguous, of
// the index's shape; the host checks that the index is no larger than the source apart from
// axis, so every coordinate but axis's is within source_layout. (out's own offset is n: the
// offset indexed_offsets reads with source_layout as with_layout goes unused.)
//@ read source[reach(source_layout)], index[reach(index_layout)]
//@ write out[count]
//@ launch any
//@ in-place no
extern "C" __global__ void gather(const scalar_t* source, Layout source_layout,
                                  const long long* index, Layout index_layout, scalar_t* out,
                                  long long count, int axis) {
    GRID_STRIDE_LOOP(n, count) {
        IndexedOffsets at = indexed_offsets(n, index_layout, source_layout, source_layout, axis);
        long long chosen = index[at.index];
        out[n] = (chosen >= 0 && chosen < source_layout.sizes[axis])
                     ? source[at.along + chosen * source_layout.strides[axis]]
                     : scalar_t();
    }
}

// target[i][index[i][j][k]][k] = source[i][j][k] for axis 1 (Tensor.scatter_): source_layout
// holds the index's sizes and the source's strides (all 0 for one value); an index outside
// [0, size) stores nothing. Where indices repeat, which store lands is not fixed (PyTorch's
// scatter_ leaves it undefined too).
//@ read source[reach(source_layout)], index[reach(index_layout)]
//@ write target[reach(target_layout)]
//@ launch any
//@ in-place no
extern "C" __global__ void scatter(const scalar_t* source, Layout source_layout,
                                   const long long* index, Layout index_layout, scalar_t* target,
                                   Layout target_layout, long long count, int axis) {
    GRID_STRIDE_LOOP(n, count) {
        IndexedOffsets at = indexed_offsets(n, index_layout, source_layout, target_layout, axis);
        long long chosen = index[at.index];
        if (chosen >= 0 && chosen < target_layout.sizes[axis]) {
            target[at.along + chosen * target_layout.strides[axis]] = source[at.with];
        }
    }
}
