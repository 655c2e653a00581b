# The caching allocator's settings (alloc_conf.pyx): TENSORPLAY_CUDA_ALLOC_CONF, read once, at the
# first use of a device by the allocator.
cdef struct AllocSettings:
    bint expandable_segments        # the shared pools grow by mapping (docs/design.md)
    bint graph_expandable_segments  # graph private pools do, which sleep() needs

# The settings, parsed from the environment on the first call (raises ValueError for a bad one).
cdef AllocSettings* settings() except NULL
