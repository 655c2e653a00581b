// Copies between any strides, converting the element type on the way. The prelude defines
// scalar_t (the source element type) and target_t.
//@ read source[reach(source_layout)]
//@ write target[reach(target_layout)]
//@ launch any
//@ in-place no
extern "C" __global__ void copy_strided(const scalar_t* source, Layout source_layout,
                                        target_t* target, Layout target_layout,
                                        long long count) {
    GRID_STRIDE_LOOP(i, count) {
        target[strided_offset(i, target_layout)] =
            convert<target_t>(load(source[strided_offset(i, source_layout)]));
    }
}
