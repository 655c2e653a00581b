# Datasets, samplers and the DataLoader (data.pyx; api.yaml: tensorplay.utils.data).

# A batch of samples as one: tensors stacked, numbers as tensors, containers field by field.
cdef object default_collate(object batch)
# One sample's numpy arrays as tensors, containers field by field (batch_size=None).
cdef object default_convert(object data)
# Subsets of dataset of the given lengths (or fractions), from one random permutation.
cdef object random_split(object dataset, object lengths, object generator)
# The worker process the caller runs in: None, since every batch loads in the calling thread.
cdef object get_worker_info()
