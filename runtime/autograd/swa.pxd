# Weight averaging (swa.pyx; api.yaml: tensorplay.optim.swa_utils).

# The averaging functions AveragedModel takes: exponential moving averages (decay from 0 to 1)
# and equal-weight running averages, of a list of parameters in place or of one parameter.
cdef object get_ema_multi_avg_fn(double decay)
cdef object get_swa_multi_avg_fn()
cdef object get_ema_avg_fn(double decay)
cdef object get_swa_avg_fn()
# BatchNorm statistics recomputed over loader's batches with model's current weights.
cdef object update_bn(object loader, object model, object device)
