# distutils: language = c++
# cython: language_level=3, auto_pickle=False
"""Rebinding static tensors: rebind() and replay_with() point the executable's nodes at other
tensors' memory, with no copy (docs/design.md, "Graph update"). The node records, their
addresses and the setters on the executable are graph_update.pyx's (Note [Executable nodes],
Note [Extents and bounds]).

Note [Rebinding]
Rebinding points every node that refers to a static tensor's memory at another tensor's, with no
copy: each device address in a kernel argument of ours (pointer parameters, and the addresses
inside the structs they take), in a copy's source or target and in a memset's target that lies
inside the static tensor's bytes moves to the same offset in the new tensor. Addresses are
found once per static tensor and cached until the next update. A node whose addresses cannot be
known (a kernel of another library, a host callback, a child graph, memory allocation nodes, a
batch of memory operations) could hide a reference, so a graph holding one is refused before
anything changes, naming the node; so is a node that covers the tensor's bytes only in part
from an address outside them, and a moved address whose extent the new tensor does not hold
(Note [Extents and bounds]). Two addresses of one node, one of them written, whose memory would
overlap after the move are refused (the node would read what it already wrote), unless they
moved by the same amount (they were that way at capture, where the node ran so) or are exactly
the same memory of a kernel whose annotation says it runs in place (elementwise kernels over
contiguous memory; not the strided, reduction or copy kernels, where an output element
is not the input element at the same offset). replay_with() changes the executable for one
launch: the next launch without bindings puts the persistent addresses back first. Setters
change future launches only; launches already queued keep the parameters they were launched
with (CUDA driver API, cuGraphExecKernelNodeSetParams). Every check comes before anything
changes, so a refusal leaves the executable as it was.
"""
from libc.stdint cimport uintptr_t

from cuda.bindings.cyruntime cimport cudaGraphExec_t, cudaStream_t

from tensorplay._runtime.memory cimport allocator
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.tensor cimport core as tensor, factories
from tensorplay._runtime.tensor.core cimport TensorCore
from tensorplay._runtime.graphs.graph_update cimport (NODE_KERNEL, ROLE_WRITE, SLOT_ARGUMENT,
                                                      SLOT_COPY_SOURCE, AddressSlot,
                                                      ExecutableState, NodeRecord, kernel_family,
                                                      move_slots, node_text)

# The widest load of our kernels (a vector4_t of doubles, elementwise.cu): a kernel captured
# with an address aligned for it must get one aligned the same way.
VECTOR_BYTES = 32


cdef tuple _span(TensorCore value):
    cdef size_t itemsize = value.dtype_object.itemsize
    if tensor.is_contiguous(value):
        return (value.data, value.data + <size_t>value.element_count * itemsize)
    return (value.data, value.data + tensor.reach_bytes(value.sizes, value.element_strides,
                                                       itemsize))


cdef str _slot_text(ExecutableState state, Py_ssize_t index):
    """What a node does through one of its addresses, in words: "reads 'a'", "writes its
    target"."""
    cdef AddressSlot* slot = &state.slots[index]
    cdef NodeRecord record = state.records[slot.record]
    verb = ("reads", "writes", "reads and writes")[slot.role - 1]
    if slot.field == SLOT_ARGUMENT and record.signature is not None:
        return f"{verb} {record.signature.accesses[slot.access].name!r}"
    if slot.field == SLOT_COPY_SOURCE:
        return f"{verb} its source"
    return f"{verb} its target"


cdef int _refuse_partial_cover(ExecutableState state, uintptr_t start, uintptr_t end,
                               str what) except -1:
    """A node reaching into [start, end) through an address outside it: moving the addresses
    inside would leave it on the static tensor's memory, which the graph lets go."""
    cdef AddressSlot* slot
    cdef Py_ssize_t index
    cdef long long first, last
    for index in range(<Py_ssize_t>state.slots.size()):
        slot = &state.slots[index]
        if start <= slot.persistent < end or slot.bound_high <= slot.bound_low:
            continue
        first = <long long>slot.persistent + slot.bound_low
        last = <long long>slot.persistent + slot.bound_high
        if first < <long long>end and <long long>start < last:
            side = "before" if slot.persistent < start else "after"
            raise ValueError(f"{what}: the graph's {node_text(state.records[slot.record])} "
                             f"covers the tensor's memory from an address {side} it "
                             f"({_slot_text(state, index)} at {slot.persistent:#x}, bytes "
                             f"[{slot.bound_low}, {slot.bound_high}) from there), so it cannot "
                             "be moved to the new tensor alone; bind the tensor that holds all "
                             "the node covers; nothing was changed")
    return 0


cdef int _check_cover(ExecutableState state, Py_ssize_t index, uintptr_t address,
                      uintptr_t fresh_start, uintptr_t fresh_end, Py_ssize_t position,
                      str what) except -1:
    """The bytes the slot's node touches from its new address lie in the new tensor's."""
    cdef AddressSlot* slot = &state.slots[index]
    if slot.high <= slot.low:
        return 0
    cdef long long first = <long long>address + slot.low
    cdef long long last = <long long>address + slot.high
    if <long long>fresh_start <= first and last <= <long long>fresh_end:
        return 0
    raise ValueError(
        f"{what}: binding {position}'s new tensor does not cover what the graph's "
        f"{node_text(state.records[slot.record])} touches: it {_slot_text(state, index)}, "
        f"bytes [{first - <long long>fresh_start}, {last - <long long>fresh_start}) from the new "
        f"tensor's start, and the tensor holds {fresh_end - fresh_start} bytes (at "
        f"{fresh_start:#x}). The node covers more than the static tensor (a view of less than "
        "the node reads or writes?): bind the tensor that holds all it covers; nothing was "
        "changed")


cdef int _refuse_overlaps(ExecutableState state, dict targets, str what) except -1:
    """Two addresses of one node, one of them written, whose memory would overlap after the
    move, unless they moved together (as captured) or are exactly the same memory of a kernel
    that runs in place (Note [Rebinding])."""
    cdef set touched = set()
    cdef AddressSlot* slot
    cdef AddressSlot* one
    cdef AddressSlot* other
    cdef Py_ssize_t index, i, j, end
    cdef long long first_low, first_high, second_low, second_high, first_move, second_move
    for index, address in targets.items():
        slot = &state.slots[<Py_ssize_t>index]
        if slot.persistent != <uintptr_t>address:
            touched.add(slot.record)
    cdef NodeRecord record
    for record_index in touched:
        record = state.records[record_index]
        in_place = (record.node_type == NODE_KERNEL and record.signature is not None
                    and record.signature.in_place)
        end = record.first_slot + record.slot_count
        for i in range(record.first_slot, end):
            one = &state.slots[i]
            if one.high <= one.low:
                continue
            first_move = <long long>targets.get(i, one.persistent) - <long long>one.persistent
            first_low = <long long>one.persistent + first_move + one.low
            first_high = <long long>one.persistent + first_move + one.high
            for j in range(i + 1, end):
                other = &state.slots[j]
                if other.high <= other.low or not ((one.role | other.role) & ROLE_WRITE):
                    continue
                second_move = (<long long>targets.get(j, other.persistent)
                               - <long long>other.persistent)
                if second_move == first_move:
                    continue  # as they were: the node ran that way when captured
                second_low = <long long>other.persistent + second_move + other.low
                second_high = <long long>other.persistent + second_move + other.high
                if first_high <= second_low or second_high <= first_low:
                    continue
                if first_low == second_low and first_high == second_high:
                    if in_place:
                        continue
                    how = (f"the same memory, and {kernel_family(record.signature)} does not "
                           "run in place" if record.signature is not None
                           else "the same memory, which a copy does not allow")
                else:
                    how = "memory that partly overlaps, so it would read what it already wrote"
                raise ValueError(
                    f"{what}: after the binding the graph's {node_text(record)} "
                    f"{_slot_text(state, i)} at bytes [{first_low:#x}, {first_high:#x}) and "
                    f"{_slot_text(state, j)} at [{second_low:#x}, {second_high:#x}): {how}; "
                    "an output must be apart from the inputs, or exactly an input's memory "
                    "for a kernel that runs in place; nothing was changed")
    return 0


cdef int bindings_arg(object bindings, str what) except -1:
    if not isinstance(bindings, dict):
        raise TypeError(f"{what}: bindings must be a dict of static tensors to new tensors, "
                        f"got {errors.shown(bindings)}")
    return 0


cdef list _checked_pairs(ExecutableState state, object bindings, str what):
    """[(static span, static, new)] of a {static tensor: new tensor} mapping, all checked."""
    bindings_arg(bindings, what)
    cdef list pairs = []
    cdef TensorCore static, fresh
    for position, (key, value) in enumerate(bindings.items()):
        static = factories.tensor_arg(key, "bindings key", position)
        fresh = factories.tensor_arg(value, "bindings value", position)
        if static.device_index != state.device or fresh.device_index != state.device:
            raise ValueError(f"{what}: binding {position} pairs a tensor on "
                             f"{tensor.device_text(static.device_index)} with one on "
                             f"{tensor.device_text(fresh.device_index)}; both must be on the "
                             f"graph's device, cuda:{state.device}")
        if (static.sizes != fresh.sizes or static.dtype_object is not fresh.dtype_object
                or static.element_strides != fresh.element_strides):
            raise ValueError(f"{what}: binding {position} pairs a tensor of shape "
                             f"{static.sizes}, {static.dtype_object.name}, strides "
                             f"{static.element_strides} with one of shape {fresh.sizes}, "
                             f"{fresh.dtype_object.name}, strides {fresh.element_strides}; the "
                             "new tensor must have the static tensor's shape, dtype and strides")
        if (fresh.data - static.data) % VECTOR_BYTES:
            raise ValueError(f"{what}: binding {position}'s new tensor is at {fresh.data:#x}, "
                             f"{(fresh.data - static.data) % VECTOR_BYTES} bytes off the "
                             f"static tensor's alignment; the graph's kernels may have been "
                             f"captured loading {VECTOR_BYTES} bytes at a time, so the two "
                             f"addresses must differ by a multiple of {VECTOR_BYTES}")
        if static.element_count == 0:
            raise ValueError(f"{what}: binding {position}'s static tensor has no elements, so "
                             "the graph cannot refer to it")
        pairs.append((_span(static), static, fresh))
    if len(pairs) < 2:
        return pairs
    ordered = sorted(pairs, key=lambda pair: pair[0])
    for before, after in zip(ordered, ordered[1:]):
        if after[0][0] < before[0][1]:
            raise ValueError(f"{what}: two static tensors of the bindings overlap in memory, so "
                             "an address inside both could not be told apart; nothing was "
                             "changed")
    return pairs


cdef int rebind(ExecutableState state, cudaGraphExec_t executable, object bindings,
                bint persistent, cudaStream_t stream, str what) except -1:
    cdef list pairs = _checked_pairs(state, bindings, what)
    state.read_nodes()
    if state.unscannable is not None:
        raise ValueError(f"{what}: {state.unscannable}; nothing was changed. Copy new values "
                         "into the static tensor instead (stage_and_launch())")
    cdef dict targets = {}
    cdef dict covers = {}  # slot index -> the new tensor's span, to narrow its bound to
    cdef TensorCore static, fresh
    cdef uintptr_t start, end, address, fresh_start, fresh_end
    cdef Py_ssize_t slot_index
    for position, (span, static, fresh) in enumerate(pairs):
        start, end = span
        found = state.span_slots.get(span)
        if found is None:
            found = _slots_in(state, start, end, what)
        if not found:
            raise ValueError(f"{what}: no node of the graph refers to the memory of binding "
                             f"{position}'s static tensor (at {start:#x}); give a tensor the "
                             "graph reads or writes, as it was bound at capture or by rebind()")
        fresh_span = _span(fresh)
        fresh_start, fresh_end = fresh_span
        for index in found:
            slot_index = index
            address = fresh.data + (state.slots[slot_index].persistent - start)
            _check_cover(state, slot_index, address, fresh_start, fresh_end, position, what)
            targets[index] = address
            covers[index] = fresh_span
    if not persistent:
        for index in state.dirty:  # bound by the previous replay_with() and not this one
            if index not in targets:
                targets[index] = state.slots[<Py_ssize_t>index].persistent
    _refuse_overlaps(state, targets, what)
    changed = {index: address for index, address in targets.items()
               if state.slots[<Py_ssize_t>index].current != address}
    if changed:
        move_slots(state, executable, changed)
    if persistent:
        _make_persistent(state, pairs, targets)
        _narrow_bounds(state, covers)
    else:
        # Until the next launch puts the persistent addresses back, the executable refers to
        # these tensors: keep them alive, and keep the allocator from handing their memory to
        # another stream before this launch is done with it.
        state.call_holding = [fresh for _, _, fresh in pairs]
        for _, _, fresh in pairs:
            if isinstance(fresh.owner, tensor.DeviceStorage):
                allocator.record_stream(<void*>(<tensor.DeviceStorage>fresh.owner).pointer,
                                        stream, state.device)
    return 0


cdef int _narrow_bounds(ExecutableState state, dict covers) except -1:
    """After a persistent move, what a slot may touch is what it could before, moved, and
    inside the new tensor: the memory the graph keeps alive for it (Note [Extents and
    bounds])."""
    cdef AddressSlot* slot
    cdef long long base, low, high
    for index, (fresh_start, fresh_end) in covers.items():
        slot = &state.slots[<Py_ssize_t>index]
        base = <long long>slot.persistent
        low = max(slot.bound_low, <long long>fresh_start - base)
        high = min(slot.bound_high, <long long>fresh_end - base)
        if high <= low:
            low = high = 0
        slot.bound_low = low
        slot.bound_high = high
    return 0


cdef list _slots_in(ExecutableState state, uintptr_t start, uintptr_t end, str what):
    """The slots whose persistent address lies in [start, end), cached per span; a node that
    reaches into the span from an address outside it is refused."""
    _refuse_partial_cover(state, start, end, what)
    cdef list found = [i for i in range(<Py_ssize_t>state.slots.size())
                       if start <= state.slots[i].persistent < end]
    state.span_slots[(start, end)] = found
    return found


cdef int _make_persistent(ExecutableState state, list pairs, dict targets) except -1:
    cdef AddressSlot* slot
    for index, address in targets.items():
        slot = &state.slots[<Py_ssize_t>index]
        slot.persistent = address
        state.dirty.discard(index)
    state.span_slots = {}
    for span, static, fresh in pairs:
        # The graph now refers to fresh: keep it alive, and let static go.
        state.holding.pop(span[0], None)
        state.holding[(<TensorCore>fresh).data] = fresh
    return 0


cdef int restore_bindings(ExecutableState state, cudaGraphExec_t executable) except -1:
    if state.dirty:
        move_slots(state, executable,
                    {index: state.slots[<Py_ssize_t>index].persistent for index in state.dirty})
    state.call_holding = None
    return 0
