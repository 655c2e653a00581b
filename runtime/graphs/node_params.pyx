# distutils: language = c++
# cython: language_level=3, auto_pickle=False
"""Kernel node parameters: the KernelNodes kernel_nodes() lists, and set_kernel_node_params(),
which changes a kernel node of the executable in place (docs/design.md, "Graph update"). The
node records and the setter on the executable are graph_update.pyx's (Note [Executable nodes]);
a change is checked against each address's bound (Note [Extents and bounds] there).

Note [Launch dimensions]
Each kernel's annotation says how its result depends on its grid and block: "any" for the
grid-stride kernels (elementwise, copy), whose every element is computed by one thread whatever
the grid, so grid and block may change, one-dimensional (x alone divides the work: a y or z of 2
would run it twice, and an in-place kernel would read what it wrote) and within the driver's
CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK; "grid" where blocks stride over independent items but
the code assumes its block size (reduce_dims' block reduction, the Philox fill),
so the grid alone may change; "fixed" where the grid decides the result (reduce_partial writes a
partial result per block, reduce_final combines them in one block) or the kernel runs with one
thread (graphs.cu, the replay-state kernels) or maps blocks to work (stage_copies). A kernel of
another library has no annotation, so its dimensions are refused, as its arguments are.

Note [Listed nodes]
A KernelNode carries the id of the executable state it was listed from, unique in the process
(a counter, never 0): a new one for every instantiation (capture, reset() and capture again,
recapture_end(reinstantiate=True) that reinstantiated) and every update from a recapture. A node
of another state, of another graph, or made by hand (id 0, no graph) is refused with a
ValueError that says to list the nodes again with kernel_nodes(), before anything changes.
"""
import weakref

from libc.string cimport memcpy

from cuda.bindings.cydriver cimport CUDA_KERNEL_NODE_PARAMS
from cuda.bindings.cyruntime cimport cudaGraphExec_t

from tensorplay._runtime.base cimport errors, public
from tensorplay._runtime.graphs.graph_update cimport (NODE_KERNEL, AddressSlot, ExecutableState,
                                                      NodeRecord, apply_record, kernel_family,
                                                      launch_of, node_text)

# Launch limits of every CUDA device tensorplay supports (compute capability 7.0 and newer).
MAX_GRID = (2 ** 31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_BLOCK_THREADS = 1024


cdef class KernelNodeCore:
    cdef object c_id(self):
        return self.path

    cdef object c_name(self):
        return self.name

    cdef object c_grid(self):
        return self.grid

    cdef object c_block(self):
        return self.block

    cdef object c_shared_memory_bytes(self):
        return self.shared_bytes

    cdef object c_arguments(self):
        return None if self.argument_values is None else dict(self.argument_values)

    cdef object c_signature(self):
        return self.parameter_types

    cdef object c_repr(self):
        return (f"KernelNode(id={self.path}, name={self.name!r}, grid={self.grid}, "
                f"block={self.block}, arguments={self.argument_values})")


cdef dict _scalar_arguments(NodeRecord record):
    values = {}
    for parameter in record.signature.parameters:
        if parameter.kind in ("int", "float", "bool"):
            values[parameter.name] = parameter.decode(
                (<char*>record.arguments)[parameter.offset:parameter.offset + parameter.size])
    return values


cdef list kernel_nodes(ExecutableState state, object graph):
    state.read_nodes()
    cdef list nodes = []
    cdef NodeRecord record
    cdef KernelNodeCore node
    cls = _kernel_node_class()
    for record in state.records:
        if record.node_type != NODE_KERNEL:
            continue
        node = cls.__new__(cls)
        node.graph_ref = weakref.ref(graph)
        node.executable_id = state.executable_id
        node.path = record.path
        node.name = record.name
        node.grid = (record.kernel.gridDimX, record.kernel.gridDimY, record.kernel.gridDimZ)
        node.block = (record.kernel.blockDimX, record.kernel.blockDimY,
                      record.kernel.blockDimZ)
        node.shared_bytes = record.kernel.sharedMemBytes
        if record.signature is not None:
            node.argument_values = _scalar_arguments(record)
            node.parameter_types = tuple((p.name, p.type) for p in record.signature.parameters)
        else:
            node.parameter_types = ()
        nodes.append(node)
    return nodes


cdef object _kernel_node_class():
    # The public class generated from the schema derives from KernelNodeCore.
    return public.public_class("KernelNodeCore", KernelNodeCore)


cdef tuple _dimensions(object value, str argument, tuple limits):
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if (not isinstance(value, (tuple, list)) or not 1 <= len(value) <= 3
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise TypeError(f"{argument} must be an int or a tuple of 1 to 3 ints, got "
                        f"{errors.shown(value)}")
    dims = tuple(value) + (1,) * (3 - len(value))
    for axis, (size, limit) in enumerate(zip(dims, limits)):
        if not 1 <= size <= limit:
            raise ValueError(f"{argument}[{axis}] must be from 1 to {limit}, got {size}")
    return dims


cdef tuple node_params_args(object node, object grid, object block, object arguments):
    """(grid, block) as three sizes each (None: unchanged), after checking every argument of
    set_kernel_node_params() that needs no graph."""
    if not isinstance(node, KernelNodeCore):
        raise TypeError(f"node must be a KernelNode from kernel_nodes(), got "
                        f"{errors.shown(node)}")
    cdef tuple grid_dims = _dimensions(grid, "grid", MAX_GRID)
    cdef tuple block_dims = _dimensions(block, "block", MAX_BLOCK)
    if block_dims is not None and block_dims[0] * block_dims[1] * block_dims[2] > MAX_BLOCK_THREADS:
        raise ValueError(f"block {block_dims} has more than {MAX_BLOCK_THREADS} threads")
    if arguments is not None and not isinstance(arguments, dict):
        raise TypeError(f"arguments must be a dict of argument names to values, got "
                        f"{errors.shown(arguments)}")
    if (<KernelNodeCore>node).graph_ref is None or (<KernelNodeCore>node).executable_id == 0:
        raise ValueError("node was not listed by a graph (a KernelNode made by hand); list "
                         "the graph's nodes with kernel_nodes() and pass one of those; nothing "
                         "was changed")
    return grid_dims, block_dims


cdef NodeRecord _listed_record(ExecutableState state, object graph, KernelNodeCore given):
    """The record of a node kernel_nodes() listed for this graph's executable as it is now
    (Note [Listed nodes])."""
    owner = given.graph_ref() if given.graph_ref is not None else None
    if owner is not graph:
        raise ValueError(f"node {given.path} belongs to another graph (or to one that no longer "
                         "exists); list this graph's nodes with kernel_nodes() and pass one of "
                         "those; nothing was changed")
    if given.executable_id != state.executable_id:
        raise ValueError(f"node {given.path} was listed before the graph's executable changed "
                         "(a recapture, reset() and a new capture, or a reinstantiation); call "
                         "kernel_nodes() again and pass a node it lists; nothing was changed")
    state.read_nodes()
    cdef NodeRecord record
    for record in state.records:
        if record.path == given.path and record.node_type == NODE_KERNEL:
            return record
    raise ValueError(f"node {given.path} is not a kernel node of this graph's executable; call "
                     "kernel_nodes() again and pass a node it lists; nothing was changed")


cdef int _check_launch(NodeRecord record, tuple grid, tuple block) except -1:
    """Refuse new launch dimensions the kernel's result or memory would depend on
    (Note [Launch dimensions])."""
    old_grid, old_block = launch_of(record)
    if grid == old_grid and block == old_block:
        return 0
    where = node_text(record)
    if record.signature is None:
        raise ValueError(f"{where}: its launch dimensions cannot be changed: nothing tells "
                         f"whether its result or the memory it touches depends on them "
                         f"({record.unknown}); nothing was changed")
    signature = record.signature
    if signature.launch == "fixed":
        raise ValueError(f"{where}: the result of {kernel_family(signature)} depends on its launch "
                         f"dimensions ({signature.launch_reason}), so its grid and block cannot "
                         f"change from {old_grid} and {old_block}; nothing was changed")
    if signature.launch == "grid" and block != old_block:
        raise ValueError(f"{where}: the result of {kernel_family(signature)} depends on its block "
                         f"size ({signature.launch_reason}), so its block stays {old_block}; "
                         "only its grid can change; nothing was changed")
    if grid[1:] != (1, 1) or block[1:] != (1, 1):
        raise ValueError(f"{where}: the kernel divides its work by x alone, so a grid {grid} or "
                         f"block {block} of y or z other than 1 would run it more than once "
                         "(an in-place kernel would then read what it wrote); nothing was "
                         "changed")
    if record.max_threads and block[0] > record.max_threads:
        raise ValueError(f"{where}: a block of {block[0]} threads is more than the kernel "
                         f"runs with, at most {record.max_threads} (the driver's "
                         "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK); nothing was changed")
    return 0


cdef list _checked_extents(ExecutableState state, NodeRecord record, bytes data, tuple grid,
                           tuple block, dict changed):
    """The extents of the record's kernel with these argument bytes and dimensions, each
    checked against its slot's bound (Note [Extents and bounds])."""
    where = node_text(record)
    try:
        extents = record.signature.extents(data, grid, block)
    except ValueError as error:
        raise ValueError(f"{where}: {error}; nothing was changed") from None
    cdef AddressSlot* slot
    cdef Py_ssize_t index
    for index in range(record.first_slot, record.first_slot + record.slot_count):
        slot = &state.slots[index]
        _, _, low, high = extents[slot.access]  # Python ints: a huge count does not overflow
        if high > low and (low < slot.bound_low or high > slot.bound_high):
            access = record.signature.accesses[slot.access]
            causes = [f"argument {name!r} = {value!r}" for name, value in changed.items()
                      if name in access.uses]
            if "grid" in access.uses and grid != launch_of(record)[0]:
                causes.append(f"grid {grid}")
            if "block" in access.uses and block != launch_of(record)[1]:
                causes.append(f"block {block}")
            cause = " and ".join(causes) if causes else "the change"
            raise ValueError(
                f"{cause} of {where}: the kernel would touch bytes [{low}, {high}) from "
                f"{access.name!r} at {slot.current:#x} ({(high - low) // access.unit} elements "
                f"of {access.unit} bytes: {access.name}[{access.text}]), outside the bytes "
                f"[{slot.bound_low}, {slot.bound_high}) it covered when captured or last "
                "rebound, the memory the graph knows it may touch; nothing was changed")
    return list(extents)


cdef int set_kernel_node_params(ExecutableState state, cudaGraphExec_t executable, object graph,
                                object node, object grid, object block,
                                object arguments) except -1:
    grid_dims, block_dims = node_params_args(node, grid, block, arguments)
    cdef NodeRecord record = _listed_record(state, graph, <KernelNodeCore>node)
    old_grid, old_block = launch_of(record)
    cdef tuple new_grid = grid_dims if grid_dims is not None else old_grid
    cdef tuple new_block = block_dims if block_dims is not None else old_block
    encoded = []
    changed = {}
    if arguments:
        if record.signature is None:
            raise ValueError(f"{node_text(record)}: its arguments cannot be set: "
                             f"{record.unknown}")
        for name, value in arguments.items():
            parameter = record.signature.parameter(name) if isinstance(name, str) else None
            if parameter is None:
                raise TypeError(f"argument names must be str, got {errors.shown(name)}")
            if parameter.kind not in ("int", "float", "bool"):
                raise ValueError(f"argument {name!r} of {node_text(record)} is a "
                                 f"{parameter.kind} ({parameter.type}); only scalar arguments "
                                 "can be set (rebind() moves tensors)")
            encoded.append((parameter, parameter.encode(value)))
            reason = record.signature.frozen_reason(name)
            if reason is not None:
                raise ValueError(f"argument {name!r} of {node_text(record)} cannot be changed: "
                                 f"{reason}; nothing was changed")
            changed[name] = value
    _check_launch(record, new_grid, new_block)
    extents = None
    if record.signature is not None and (encoded or new_grid != old_grid
                                         or new_block != old_block):
        data = bytearray((<char*>record.arguments)[:record.signature.size])
        for parameter, encoded_bytes in encoded:
            data[parameter.offset:parameter.offset + len(encoded_bytes)] = encoded_bytes
        extents = _checked_extents(state, record, bytes(data), new_grid, new_block, changed)
    # Everything checked: change the record, then the executable; put the record back if the
    # driver refuses.
    cdef CUDA_KERNEL_NODE_PARAMS saved_launch = record.kernel
    saved_bytes = (<char*>record.arguments)[:record.signature.size] \
        if record.signature is not None else b""
    for parameter, data in encoded:
        memcpy(record.arguments + <size_t>parameter.offset, <const char*>data, len(data))
    record.kernel.gridDimX, record.kernel.gridDimY, record.kernel.gridDimZ = new_grid
    record.kernel.blockDimX, record.kernel.blockDimY, record.kernel.blockDimZ = new_block
    try:
        apply_record(state, executable, record)
    except BaseException:
        record.kernel = saved_launch
        if saved_bytes:
            memcpy(record.arguments, <const char*>saved_bytes, len(saved_bytes))
        raise
    cdef AddressSlot* slot
    cdef Py_ssize_t index
    if extents is not None:
        for index in range(record.first_slot, record.first_slot + record.slot_count):
            slot = &state.slots[index]
            _, _, low, high = extents[slot.access]
            slot.low, slot.high = (low, high) if high > low else (0, 0)
    return 0
