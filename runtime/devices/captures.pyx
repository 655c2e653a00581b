# cython: language_level=3
"""What the runtime records of the captures it opened, beyond CUDA's own state.

Every capture the runtime begins (a graph's, and each conditional body's inside it) is
registered here by its capture id until it ends, with the graph capture that holds what it keeps
alive: that answers whether an id is a capture still open, and whether a stream captures a
conditional body (stream.pyx asks both of events). device.pyx keeps the open captures by device
and stream (Note [Calls during capture]), for the calls that a capture forbids.

Note [Joined streams]
A stream that waits on an event recorded in an open capture joins that capture (CUDA
Programming Guide, "Cross-stream Dependencies and Events"): its later work is captured into the
same graph, and it must join back into the origin stream (the origin waits on an event recorded
after that work) before the capture ends, or cudaStreamEndCapture fails with
cudaErrorStreamCaptureUnjoined. CUDA reports that error without naming the stream, so every
join made through tensorplay's Stream.wait_event() is recorded here (stream.pyx), by capture id,
and before the capture ends the graph asks which joined streams have captured work that the
origin stream does not depend on (unjoined_streams), to name them if the end fails. The record
also keeps the joined Stream objects alive until the capture ends: destroying a stream that
takes part in a capture would invalidate it.

Host memory a capture reads (a copy from page-locked CPU memory becomes a memcpy node that reads
that memory on every replay) is recorded here too, and handed to the graph when the capture
ends, which keeps it alive for as long as it can replay (copies.pyx, copy_from_host).
All of it changes with the GIL held.
"""
from libc.stdint cimport uintptr_t
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

from cuda.bindings cimport cyruntime
from cuda.bindings.cyruntime cimport (cudaGraphNode_t, cudaStreamCaptureStatus,
                                      cudaStreamCaptureStatusActive,
                                      cudaStreamCaptureStatusNone, cudaStream_t)

from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.base cimport errors

# capture id -> [(Stream object, its cudaStream_t as an int)], each stream once, in the order
# they joined.
cdef dict _joined = {}
# graph capture id -> [objects that own host memory its nodes (or its bodies') read]
cdef dict _kept = {}
# The open captures the runtime began: capture id (a graph's or a conditional body's) -> the
# graph's capture id, which holds its memory. A graph's capture is its own holder, so a capture
# whose holder differs is a conditional body's.
cdef dict _holders = {}
# capture id -> [external events recorded in it, which only a replay of its graph records]
cdef dict _external_records = {}


cdef int stream_joined(unsigned long long capture_id, object stream, uintptr_t handle) except -1:
    """stream (a Stream whose handle is handle) joined capture_id through an event wait."""
    joined = _joined.setdefault(capture_id, [])
    for _, known in joined:
        if known == handle:
            return 0
    joined.append((stream, handle))
    return 0


cdef int capture_began(unsigned long long capture_id, unsigned long long holder) except -1:
    _holders[capture_id] = holder
    return 0


cdef int capture_ended(unsigned long long capture_id) except -1:
    _joined.pop(capture_id, None)
    _holders.pop(capture_id, None)
    return 0


cdef bint capture_id_open(unsigned long long capture_id) except -1:
    return capture_id in _holders


cdef bint in_body_capture(void* stream, int device) except -1:
    if not _holders:
        return False
    cdef unsigned long long capture_id = _device.stream_capture_id(stream, device)
    holder = _holders.get(capture_id)
    return holder is not None and holder != capture_id


cdef int external_recorded(unsigned long long capture_id, object event) except -1:
    _external_records.setdefault(capture_id, []).append(event)
    return 0


cdef list take_external_records(unsigned long long capture_id):
    return _external_records.pop(capture_id, None)


cdef int keep_alive(unsigned long long capture_id, object owner) except -1:
    _kept.setdefault(_holders.get(capture_id, capture_id), []).append(owner)
    return 0


cdef list release_kept(unsigned long long holder):
    return _kept.pop(holder, None)


cdef int _frontier(cudaStream_t stream, unsigned long long capture_id,
                   vector[cudaGraphNode_t]* nodes) except -1 nogil:
    """The nodes the next work captured on stream would depend on; 1 when the stream no longer
    takes part in capture_id."""
    cdef cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone
    cdef unsigned long long found_id = 0
    cdef const cudaGraphNode_t* dependencies = NULL
    cdef size_t count = 0, i
    errors.check(cyruntime.cudaStreamGetCaptureInfo(stream, &status, &found_id, NULL,
                                                    &dependencies, NULL, &count),
                 b"cudaStreamGetCaptureInfo")
    if status != cudaStreamCaptureStatusActive or found_id != capture_id:
        return 1
    for i in range(count):
        nodes.push_back(dependencies[i])
    return 0


cdef list unjoined_streams(int device, cudaStream_t origin, unsigned long long capture_id):
    joined = _joined.get(capture_id)
    if not joined:
        return []
    # What each joined stream's next node would depend on must be reachable, walking the graph's
    # edges backwards, from what the origin's next node would depend on; stop once all are found.
    cdef vector[cudaStream_t] handles
    cdef vector[cudaGraphNode_t] walk, parents, side
    cdef vector[size_t] first, last             # each joined stream's slice of side
    cdef unordered_map[uintptr_t, int] wanted   # node -> 0 not reached yet, 1 reached
    cdef unordered_map[uintptr_t, int] seen
    cdef size_t missing = 0, count, i, j
    cdef cudaGraphNode_t node
    cdef _device.DeviceSwitch saved
    cdef int mode
    for _, handle in joined:
        handles.push_back(<cudaStream_t><uintptr_t>handle)
    with nogil:
        _device.enter_device(device, &saved)
        _device.enter_relaxed(&mode)  # queries of the capture's graph, not captured work
        try:
            for i in range(handles.size()):
                first.push_back(side.size())
                if _frontier(handles[i], capture_id, &side) != 0:
                    side.resize(first.back())  # no longer part of the capture: nothing to join
                last.push_back(side.size())
            for i in range(side.size()):
                if wanted.count(<uintptr_t>side[i]) == 0:
                    wanted[<uintptr_t>side[i]] = 0
                    missing += 1
            if _frontier(origin, capture_id, &walk) != 0:
                missing = 0  # the origin no longer captures: CUDA's end reports what is wrong
            while missing > 0 and not walk.empty():
                node = walk.back()
                walk.pop_back()
                if seen.count(<uintptr_t>node):
                    continue
                seen[<uintptr_t>node] = 1
                if wanted.count(<uintptr_t>node) and wanted[<uintptr_t>node] == 0:
                    wanted[<uintptr_t>node] = 1
                    missing -= 1
                count = 0
                errors.check(cyruntime.cudaGraphNodeGetDependencies(node, NULL, NULL, &count),
                             b"cudaGraphNodeGetDependencies")
                if count:
                    parents.resize(count)
                    errors.check(cyruntime.cudaGraphNodeGetDependencies(node, parents.data(),
                                                                        NULL, &count),
                                 b"cudaGraphNodeGetDependencies")
                    for j in range(count):
                        walk.push_back(parents[j])
        finally:
            _device.exit_relaxed(&mode)
            _device.exit_device(&saved)
    unjoined = []
    for i in range(handles.size()):
        for j in range(first[i], last[i]):
            if wanted[<uintptr_t>side[j]] == 0:
                unjoined.append(<uintptr_t>handles[i])
                break
    return unjoined


cdef str unjoined_text(str what, int device, list unjoined, str capture):
    if unjoined:
        names = ", ".join(f"{handle:#x}" for handle in unjoined)
        streams = (f"stream {names} joined {capture} on cuda:{device} (it waited on an event "
                   "recorded in it) and captured work that was never joined back")
    else:  # a join the runtime did not see: another library's stream
        streams = (f"a stream joined {capture} on cuda:{device} and captured work that was "
                   "never joined back")
    return (f"{what} failed: {streams}. CUDA requires every stream that joins a capture to "
            "rejoin the stream the capture began on before it ends (cudaErrorStreamCaptureUnjoined"
            "; Programming Guide, 'Cross-stream Dependencies and Events'): make that stream "
            "wait on the joined one after its last work (origin.wait_stream(side)).")
