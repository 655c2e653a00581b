# cython: language_level=3, auto_pickle=False
"""A graph's capture: the stream it captures on, the capturing thread, and the private pool its
allocations go to; and is_current_stream_capturing(). graph.pyx's GraphBase drives these steps,
with those of its other parts (conditional bodies, generator states, the executable).

Note [Capture state]
A graph object goes through: empty -> capturing (capture_begin) -> executable (capture_end,
which instantiates) -> empty again (reset). Each step records what it took, so every exit path
(a failed capture, an exception in the body, reset(), the destructor) gives back exactly that:
- holds_pool: one reference to the private pool (pools.retain_pool), released by reset() or by
  a capture that fails. Allocations made while the capture runs come from that pool
  (pools.begin_allocate_to_pool, keyed by the capture id, so work on any stream joined to the
  capture is routed too); they survive the graph's reset until the tensors are freed, and
  empty_cache() then returns the memory (PyTorch's rules, docs/design.md).
- routing: the pool receives the capture's allocations; stopped as soon as the capture ends,
  before any error is raised, so that no "capture active" state outlives a failed capture.
- capturing: cudaStreamBeginCapture ran on the capture stream and cudaStreamEndCapture did not.
- stream_swapped: capture_begin made the capture stream (and its device) current on the
  capturing thread, so the body's work lands in the capture; its end restores both.
The capture stream is the one given, else (CUDAGraph, graph()) the device's dedicated side
stream, or (accelerator.Graph) the current stream unless that is the legacy default stream,
which cannot capture (CUDA Runtime API, "Stream capture").

Setting TENSORPLAY_GRAPH_GC=1 makes graph() and accelerator.Graph run gc.collect() on entry,
before emptying the cache (PyTorch made this opt-in because it is slow for back-to-back
captures).
"""
import gc
import os
import threading

from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdint cimport uintptr_t

from cuda.bindings cimport cyruntime
from cuda.bindings.cyruntime cimport (cudaError_t, cudaErrorStreamCaptureUnjoined,
                                      cudaGraphInstantiateFlagAutoFreeOnLaunch,
                                      cudaGraphInstantiateFlagUseNodePriority, cudaGraphExec_t,
                                      cudaGraph_t, cudaStreamCaptureMode,
                                      cudaStreamCaptureModeGlobal, cudaStreamCaptureModeRelaxed, cudaStreamCaptureStatus,
                                      cudaStreamCaptureStatusNone, cudaStreamLegacy,
                                      cudaStream_t, cudaSuccess)

from tensorplay._runtime.memory cimport allocator, pools
from tensorplay._runtime.devices cimport captures, device as _device
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.devices.device cimport DeviceSwitch
from tensorplay._runtime.devices.stream cimport StreamCore

# A capture_error_mode arrives as its index in api.yaml's choices (global, thread_local,
# relaxed: errors.choice_arg), which is its cudaStreamCaptureMode, so it is used as it is
# (docs/design.md, "Capture rules"; the test
# test_capture_modes_arrive_as_their_cuda_stream_capture_mode holds the two orders equal).


cdef class CaptureState:
    """A graph's capture (capture.pxd lists its state)."""

    cdef int start(self, int device, cudaStream_t stream, object owner, int mode) except -1:
        """Make stream (and its device) current on this thread and begin capturing on it. The
        graph discards the capture if this raises (Note [Capture state])."""
        self.stream = stream
        # A Stream made for the call (capture_begin(stream=Stream())) would otherwise be
        # destroyed while it captures.
        self.stream_owner = owner
        self.mode = mode
        self.previous_device = _device.current_device()
        self.previous_stream = _stream.current_stream_handle(device)
        self.thread = PyThread_get_thread_ident()
        self.thread_object = threading.current_thread()
        self.stream_slot = _stream.current_stream_slot(device)
        if self.previous_device != device:
            _device.set_current_device(device)
        _stream.put_current_stream(device, stream)
        self.stream_swapped = True
        cdef cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone
        cdef unsigned long long capture_id = 0
        cdef DeviceSwitch saved
        # Known as open before the stream captures: from then on no thread may record an
        # allocator event on it (device.pyx, Note [Calls during capture]), and another thread
        # runs while this one waits in cudaStreamBeginCapture without the GIL.
        _device.capture_opened(device, self.stream)
        try:
            with nogil:
                _device.enter_device(device, &saved)
                try:
                    errors.check(cyruntime.cudaStreamBeginCapture(
                        self.stream, <cudaStreamCaptureMode>mode), b"cudaStreamBeginCapture")
                    self.capturing = True
                    errors.check(cyruntime.cudaStreamGetCaptureInfo(
                        self.stream, &status, &capture_id, NULL, NULL, NULL, NULL),
                        b"cudaStreamGetCaptureInfo")
                finally:
                    _device.exit_device(&saved)
        except BaseException:
            if not self.capturing:  # else stopped() closes it
                _device.capture_closed(self.stream)
            raise
        self.capture_id = capture_id
        captures.capture_began(self.capture_id, self.capture_id)
        _stream.current_stream_changed(device)  # stream.pyx, Note [Current stream listeners]
        return 0

    cdef int route(self, int device) except -1:
        pools.begin_allocate_to_pool(device, self.pool_id, self.capture_id, self.capture_id)
        self.routing = True
        return 0

    cdef int end_on_stream(self, int device, cudaGraph_t* template,
                           cudaError_t* status) except -1:
        """End the capture: the captured graph into template, CUDA's answer into status."""
        cdef DeviceSwitch saved
        with nogil:
            _device.enter_device(device, &saved)
            status[0] = cyruntime.cudaStreamEndCapture(self.stream, template)
            if status[0] != cudaSuccess:
                cyruntime.cudaGetLastError()  # reported by the graph; must not surface elsewhere
            _device.exit_device(&saved)
        return 0

    cdef int end_partial(self, int device) except -1:
        """End the capture without keeping what it captured."""
        cdef cudaGraph_t partial = NULL
        cdef DeviceSwitch saved
        cdef int mode
        with nogil:
            _device.enter_device(device, &saved)
            # Its error (usually "invalidated") is the reason we are here, not news.
            if cyruntime.cudaStreamEndCapture(self.stream, &partial) != cudaSuccess:
                cyruntime.cudaGetLastError()
            if partial != NULL:
                _device.enter_relaxed(&mode)
                cyruntime.cudaGraphDestroy(partial)
                _device.exit_relaxed(&mode)
            _device.exit_device(&saved)
        return 0

    cdef list stopped(self):
        """cudaStreamEndCapture ran: the capture is no longer open. Returns the external events
        recorded in it, which its replays record (stream.pyx), or None."""
        self.capturing = False
        _device.capture_closed(self.stream)
        captures.capture_ended(self.capture_id)
        return captures.take_external_records(self.capture_id)

    cdef int stop_routing(self, int device) except -1:
        if self.routing:
            self.routing = False
            pools.end_allocate_to_pool(device, self.pool_id)
        return 0

    cdef int restore_stream(self, int device) except -1:
        if not self.stream_swapped:
            return 0
        self.stream_swapped = False
        if PyThread_get_thread_ident() != self.thread:
            # A relaxed-mode capture ended on another thread: put the capturing thread's stream
            # back through its slot, if that thread still runs and nothing replaced the capture
            # stream since (its current device is its own to change).
            if (self.thread_object.is_alive()
                    and self.stream_slot[0] == <void*>self.stream):
                self.stream_slot[0] = <void*>self.previous_stream
            self.thread_object = None
            return 0
        self.thread_object = None
        _stream.put_current_stream(device, self.previous_stream)
        if self.previous_device != device:
            _device.set_current_device(self.previous_device)
        _stream.current_stream_changed(device)  # stream.pyx, Note [Current stream listeners]
        return 0

    cdef int check_thread(self, str what) except -1:
        """CUDA lets only the thread that began a global or thread_local capture end it."""
        if (self.capturing and self.mode != cudaStreamCaptureModeRelaxed
                and PyThread_get_thread_ident() != self.thread):
            mode = "global" if self.mode == cudaStreamCaptureModeGlobal else "thread_local"
            raise RuntimeError(
                f"{what} called on thread {PyThread_get_thread_ident()}, but this graph's "
                f"capture began on thread {self.thread} in '{mode}' mode, which only "
                "the capturing thread may end (CUDA: cudaErrorStreamCaptureWrongThread). End it "
                "there, or capture with capture_error_mode='relaxed' to end it elsewhere. The "
                "capture goes on")
        return 0


cdef int capture_device(StreamCore stream) except -1:
    if stream is not None:
        return stream.device_index
    if not _device.is_available():
        errors.raise_no_accelerator("graph capture")
    return _device.current_device_index()


cdef cudaStream_t capture_stream(StreamCore target, int device,
                                 bint side_stream_default) except? NULL:
    cdef cudaStream_t handle
    if target is not None:
        handle = target.handle
    else:
        handle = _stream.current_stream_handle(device)
        if side_stream_default or <uintptr_t>handle <= cudaStreamLegacy:
            handle = _stream.capture_side_stream(device)
    if <uintptr_t>handle <= cudaStreamLegacy:
        raise RuntimeError("stream: CUDA graphs cannot be captured on the legacy default "
                           "stream; pass a tensorplay.cuda.Stream(), or stream=None for the "
                           "device's side stream")
    if _device.stream_capturing(handle, device):
        raise RuntimeError(f"stream {<uintptr_t>handle:#x} on cuda:{device} is already "
                           "capturing a graph, and captures cannot nest on one stream (CUDA "
                           "refuses cudaStreamBeginCapture on a capturing stream: "
                           "cudaErrorIllegalState); end that capture first, or capture on "
                           "another stream")
    return handle


cdef int quiet_device(int device) except -1:
    """Skipped while any capture is open in the process: synchronising and emptying the cache
    would invalidate it (device.pyx, Note [Calls during capture])."""
    if _device.capture_open():
        return 0
    _device.synchronize(device)
    if os.environ.get("TENSORPLAY_GRAPH_GC") == "1":
        gc.collect()
    allocator.empty_cache(device)
    return 0


cdef str _cuda_error_text(cudaError_t status):
    return (f"{cyruntime.cudaGetErrorName(status).decode()} ({<int>status}): "
            f"{cyruntime.cudaGetErrorString(status).decode()}")


cdef object end_error(str what, int device, cudaError_t status, list unjoined):
    if status == cudaErrorStreamCaptureUnjoined:
        return RuntimeError(captures.unjoined_text(what, device, unjoined, "the capture") +
                            " The capture was discarded, what it took released and the "
                            "previous stream restored; no stream captures any more")
    return RuntimeError(
        f"graph capture on cuda:{device} failed: {_cuda_error_text(status)}. "
        "Something inside the capture was not permitted while capturing: a synchronising "
        "call (synchronize(), item(), tolist(), a copy to the host), work on another "
        "stream not joined to the capture, or (in 'global' mode) unsafe CUDA work on "
        "another thread. The capture was discarded, what it took released (a "
        "recaptured graph keeps its previous executable) and the previous stream "
        "restored")


cdef int instantiate(cudaGraphExec_t* executable, cudaGraph_t template) except -1 nogil:
    return errors.check(cyruntime.cudaGraphInstantiate(
        executable, template,
        cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUseNodePriority),
        b"cudaGraphInstantiate")


cdef int destroy_template(int device, cudaGraph_t template) except -1:
    cdef DeviceSwitch saved
    cdef int mode
    if template == NULL:
        return 0
    with nogil:
        _device.enter_device(device, &saved)
        _device.enter_relaxed(&mode)
        cyruntime.cudaGraphDestroy(template)
        _device.exit_relaxed(&mode)
        _device.exit_device(&saved)
    return 0


cdef bint is_current_stream_capturing() except -1:
    if not _device.is_initialized():
        return False  # no context yet, so nothing can capture; do not create one
    cdef int current = _device.current_device()
    return _device.stream_capturing(_stream.current_stream_handle(current), current)
