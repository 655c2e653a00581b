# cython: language_level=3
"""nonzero(), argwhere(), masked_select(), x[mask], bincount(), unique() and unique_consecutive()
(api.yaml: the tensorplay functions and the Tensor methods), as PyTorch's: the operations whose
result's size depends on the values.

Note [Selection by value]
nonzero lists the coordinates of the elements that are not zero (NaN is not zero), in the
order of the flattened tensor, as PyTorch's: an int64 (count, ndim) tensor, or with as_tuple
one int64 vector per dimension (a 0-d tensor counts as one of one element there). argwhere is
nonzero's matrix; masked_select the elements of input where the mask is True, input and mask
broadcast together, as a vector.
x[mask], for a bool mask of x's leading shape (on x's device or the CPU), is the rows of x
flattened over the mask's dimensions at the mask's positions, as PyTorch's: a new tensor of
shape (count,) + x.shape[mask.dim():], whose gradient is index_select's.
The count decides the result's shape, so it is read on the host, as PyTorch's nonzero reads
it (a synchronisation, which a capture refuses: "operation not permitted when stream is
capturing"); both are refused there before anything is queued, naming the operation. On a
device the positions are computed there: the running count of the nonzero elements (cumsum of
the mask), whose last value is the one number read back, gives each nonzero element its slot,
and a scatter writes each element's flat position into its slot (the others into a spare slot
past the end, dropped). The coordinates follow from the flat positions by division by the
row-major strides. On the CPU numpy's flatnonzero gives the positions. masked_select gathers
the broadcast input at the positions (index_select of the flattened input), so its gradient is
index_select's: the gradient added back at the positions, zero elsewhere, as PyTorch's.

Note [Counting]
bincount counts each non-negative integer of a vector (or sums the weights at it) into
max(largest + 1, minlength) bins, as PyTorch's: int64 counts, float32 sums of float32 weights
and float64 sums of any others. The bin count depends on the largest value, so the largest and
the smallest (a negative one is refused, as PyTorch refuses it) are read on the host, the one
wait, and a capture refuses it as nonzero. The bins are a scatter-add into zeros (scatter.cu's
atomic additions on a device, numpy's bincount on the CPU); like PyTorch's, the result has no
gradient.

Note [Unique elements]
unique_consecutive keeps the first of each run of equal elements (or of equal slices along
dim); unique does the same after sorting, so its values come sorted (whatever `sorted` asks:
PyTorch's CUDA kernel sorts too), NaN last and each NaN its own value, as PyTorch's. The
flattened tensor is sorted by sort.pyx's stable sort; slices along dim (rows, once dim is moved
first and the rest flattened) are sorted lexicographically by one stable sort per column, from
the last to the first, each reordering the rows the later columns ordered. A run starts where
an element (a row) differs from the one before; the running count of the starts (cumsum) is
each element's group, whose last value, the group count, is the one number read back (a
capture refuses it, as nonzero). The values are scattered into their group's slot (every
member writes the same value; rows are gathered at the starts), the inverse is the group of
each input element (scattered back through the sort's order) and the counts are a scatter-add
of ones. The results have no gradient: PyTorch has no derivative for unique either.
"""
from tensorplay._runtime.base cimport dtypes
from tensorplay._runtime.base.dtypes cimport CODE_BOOL
from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.tensor cimport copies, elementwise, factories, reduction, scan, sort
from tensorplay._runtime.tensor.arguments cimport broadcast_shape, np
from tensorplay._runtime.tensor.core cimport (CPU, TensorCore, current_stream, device_text,
                                              dim_with_size, new_empty, strided_view, wrap_cpu)
from tensorplay._runtime.tensor.scatter_gather cimport index_copy_, scatter_into


cdef object nonzero(TensorCore tensor, bint as_tuple):
    positions = flat_positions(tensor, "nonzero")
    if as_tuple:  # one vector per dimension; a 0-d tensor as a vector of one element
        sizes = tensor.sizes or (1,)
        return tuple(coordinate(positions, sizes, dim) for dim in range(len(sizes)))
    return coordinates(positions, tensor.sizes)


cdef object argwhere(TensorCore tensor):
    return coordinates(flat_positions(tensor, "argwhere"), tensor.sizes)


cdef object getitem(TensorCore tensor, object key):
    """tensor[key] (api.yaml: Tensor.__getitem__): a boolean mask here, every other key
    copies.getitem's."""
    if not copies.is_mask(key):
        return copies.getitem(tensor, masks_as_indices(tensor, key, "__getitem__"))
    cdef TensorCore mask = key
    copies.check_mask(tensor, mask, "__getitem__")  # refused during a capture, as nonzero
    if mask.device_index != tensor.device_index:  # a CPU mask of a CUDA tensor
        mask = copies.to(mask, device_text(tensor.device_index), None, False, False)
    positions = flat_positions(mask, "__getitem__")
    rows = copies.reshape(tensor, ((mask.element_count,) + tensor.sizes[len(mask.sizes):],))
    return copies.index_select(<TensorCore>rows, 0, positions)


cdef object masks_as_indices(TensorCore tensor, object key, str name):
    """key with each bool tensor of one or more dimensions among its items replaced by the
    coordinates of its True elements, one integer index per dimension it covers (PyTorch turns
    a mask in a key into the indices nonzero() gives), checked as a lone mask is (check_mask):
    of the shape of the dimensions it covers, on tensor's device or the CPU, refused during a
    capture. key itself where it holds no such mask."""
    if not isinstance(key, tuple) or not any(
            copies.is_mask(item) and (<TensorCore>item).sizes for item in key):
        return key
    # Checked, as PyTorch checks it, against the view of the basic items (a mask's dimensions
    # and each integer index's a full slice there), at the dimension it starts at in that view.
    basic = []
    for item in key:
        if copies.is_mask(item) and (<TensorCore>item).sizes:
            basic.extend([slice(None)] * len((<TensorCore>item).sizes))
        else:
            basic.append(slice(None) if isinstance(item, list) or (
                isinstance(item, TensorCore) and not copies.is_mask(item)) else item)
    cdef TensorCore view = tensor.c_getitem(tuple(basic))
    taken = sum(dims_taken(item) for item in key)
    items = []
    start = 0  # the dimension of the view the next item's dimensions start at
    cdef TensorCore mask
    for item in key:
        if item is Ellipsis:
            start += max(len(tensor.sizes) - taken, 0)
        elif copies.is_mask(item) and (<TensorCore>item).sizes:
            mask = item
            copies.check_mask(view, mask, name, start)
            positions = flat_positions(mask, name)
            for dim in range(len(mask.sizes)):
                column = coordinate(<TensorCore>positions, mask.sizes, dim)
                items.append(copies.to(<TensorCore>column, device_text(tensor.device_index), None,
                                       False, False))
            start += len(mask.sizes)
            continue
        items.append(item)
        if item is not Ellipsis and (isinstance(item, bool) or
                                     not isinstance(item, (int, np().integer))):
            start += 1  # an int leaves no dimension in the view; the others one each
    return tuple(items)


cdef int dims_taken(object item) except -1:
    """How many dimensions of the tensor an item of a key indexes (... counted apart)."""
    if item is None or item is Ellipsis or isinstance(item, bool):
        return 0
    if copies.is_mask(item):
        return len((<TensorCore>item).sizes)
    return 1


cdef object setitem(TensorCore tensor, object key, object value):
    """tensor[key] = value (api.yaml: Tensor.__setitem__): an integer index here, every other
    key copies.setitem's; recorded as copies.setitem records."""
    return copies.setitem_with(tensor, key, value, assign)


cdef object assign(TensorCore tensor, object key, object value):
    """tensor[key] = value, not recorded: through integer indices (masks among other items made
    indices first) here, assign_indices; every other key copies.assign's."""
    key = masks_as_indices(tensor, key, "__setitem__")
    found = copies.integer_index(tensor, key) if copies.holds_sequence(key) else None
    if found is None:
        return copies.assign(tensor, key, value)
    view, axes, indices = found
    return assign_indices(view, axes, indices, value)


cdef TensorCore value_as(TensorCore view, object value, tuple selected):
    """value (a tensor on view's device or the CPU, or a Python scalar, whose type setitem_with
    checked) in view's dtype on its device, expanded to the shape selected."""
    if isinstance(value, TensorCore):
        broadcast_shape((<TensorCore>value).sizes, selected, "__setitem__")
        if (<TensorCore>value).device_index not in (CPU, view.device_index):
            raise ValueError(f"__setitem__: the value is on "
                             f"{device_text((<TensorCore>value).device_index)} and the tensor "
                             f"on {device_text(view.device_index)}")
        source = copies.to(<TensorCore>(<TensorCore>value).c_detach(),
                           device_text(view.device_index), view.dtype_object, False, False)
    else:
        dtypes.check_scalar(value, view.dtype_object, "value")
        source = factories.full((), value, view.dtype_object, device_text(view.device_index),
                                False)
    return (<TensorCore>source).c_expand((selected,))


cdef object assign_indices(TensorCore view, tuple axes, list indices, object value):
    """view[...] = value at one or more integer indices (copies.integer_index's), as PyTorch's
    index_put_ without accumulation: value, broadcast to what the read selects, copied by
    index_copy_ into view's indexed dimensions moved first and flattened (at
    copies.linear_positions), through a view where their strides allow it, else through a
    contiguous copy written back. Where the indices name an element twice, one of the values
    lands there, as PyTorch's. An element out of range is PyTorch's IndexError on the CPU; on a
    device the scatter skips it (index.cu), as indexing selects zeros there, since reading the
    indices back would break a capture."""
    positions, shape, total, place = copies.linear_positions(view, axes, indices, "__setitem__")
    count = (<TensorCore>positions).element_count
    front = <TensorCore>copies.movedim(view, axes, tuple(range(len(axes))))
    rest = front.sizes[len(axes):]
    # value broadcast to the read's shape (the indices' shape at place), that shape moved first
    source = copies.movedim(value_as(view, value, rest[:place] + shape + rest[place:]),
                            tuple(range(place, place + len(shape))), tuple(range(len(shape))))
    source = copies.reshape(<TensorCore>source, ((count,) + rest,))
    flat = merged_front(front, len(axes), total)
    if flat is not None:
        index_copy_(flat, 0, positions, source)
        return None
    flat = copies.reshape(<TensorCore>copies.contiguous(front), ((total,) + rest,))
    index_copy_(flat, 0, positions, source)
    copies.copy_(front, copies.reshape(<TensorCore>flat, (front.sizes,)), False)
    return None


cdef object merged_front(TensorCore tensor, int count, object total):
    """A view of tensor with its first count dimensions as one of total elements, or None where
    their strides do not allow one."""
    strides = tensor.element_strides
    for dim in range(count - 1):
        if tensor.sizes[dim] != 1 and strides[dim] != strides[dim + 1] * tensor.sizes[dim + 1]:
            return None
    return strided_view(tensor, (total,) + tensor.sizes[count:],
                        (strides[count - 1],) + strides[count:])


cdef object masked_select(TensorCore tensor, object mask):
    if not isinstance(mask, TensorCore) or (<TensorCore>mask).dtype_object.code != CODE_BOOL:
        got = f"a {(<TensorCore>mask).dtype_object.name} tensor" if isinstance(mask, TensorCore) \
            else type(mask).__name__
        raise TypeError(f"masked_select(): mask must be a bool tensor (a comparison such as "
                        f"x > 0), got {got}")
    cdef TensorCore chosen = mask
    if chosen.device_index != tensor.device_index:
        raise ValueError(f"masked_select(): the mask is on {device_text(chosen.device_index)} "
                         f"and input on {device_text(tensor.device_index)}; both must be on one "
                         "device")
    shape = broadcast_shape(tensor.sizes, chosen.sizes, "masked_select()")
    positions = flat_positions(<TensorCore>chosen.c_expand((shape,)), "masked_select")
    whole = copies.reshape(<TensorCore>tensor.c_expand((shape,)), ((-1,),))
    return copies.index_select(<TensorCore>whole, 0, positions)


cdef TensorCore flat_positions(TensorCore tensor, str name):
    """The int64 positions, in the flattened tensor, of its nonzero elements, in order (Note
    above); refused during a capture."""
    int64 = dtypes.named_dtype("int64")
    if tensor.device_index == CPU:
        found = np().flatnonzero(copies.host_values(tensor))
        return wrap_cpu(np().ascontiguousarray(found, dtype=np().int64), int64)
    _device.refuse_on_capturing_stream(
        f"{name}() (its result's size depends on the values, read on the host, as "
        "torch.nonzero)", <void*>current_stream(tensor.device_index), tensor.device_index)
    count = tensor.element_count
    if count == 0:
        return new_empty((0,), int64, tensor.device_index)
    flags = copies.reshape(<TensorCore>copies.to(
        <TensorCore>elementwise.ne(tensor.c_detach(), 0), None, int64, False, False), ((-1,),))
    running = scan.cumsum(<TensorCore>flags, 0, None)  # the slot of each nonzero element, + 1
    found = copies.item(<TensorCore>copies.narrow(<TensorCore>running, 0, count - 1, 1))
    slots = elementwise.where(elementwise.ne(<TensorCore>flags, 0),
                              elementwise.sub(<TensorCore>running, 1), found)
    cdef TensorCore spread = new_empty((found + 1,), int64, tensor.device_index)
    everywhere = factories.arange(0, count, 1, int64, device_text(tensor.device_index), False)
    scatter_into(spread, 0, <TensorCore>slots, <TensorCore>everywhere, False)
    return copies.contiguous(<TensorCore>copies.narrow(spread, 0, 0, found))


cdef object coordinates(TensorCore positions, tuple sizes):
    """The (count, len(sizes)) int64 coordinates of flat positions in a tensor of sizes."""
    if not sizes:  # no coordinates to give: (count, 0)
        return new_empty((positions.element_count, 0), positions.dtype_object,
                         positions.device_index)
    columns = [copies.reshape(<TensorCore>coordinate(positions, sizes, dim), ((-1, 1),))
               for dim in range(len(sizes))]
    return copies.contiguous(<TensorCore>copies.cat(columns, 1))


cdef object coordinate(TensorCore positions, tuple sizes, int dim):
    """The coordinate along dim of each flat position in a row-major tensor of sizes."""
    if not positions.element_count:  # sizes may hold a 0: no stride to divide by
        return new_empty((0,), positions.dtype_object, positions.device_index)
    stride = 1
    for size in sizes[dim + 1:]:
        stride *= size
    along = elementwise.floordiv(positions, stride) if stride != 1 else positions
    if dim == 0:
        return copies.contiguous(<TensorCore>along)
    return elementwise.mod(<TensorCore>along, sizes[dim])


cdef object bincount(TensorCore tensor, object weights, long long minlength):
    if weights is not None and not isinstance(weights, TensorCore):  # types before values
        raise TypeError(f"bincount(): weights must be a tensor or None, got "
                        f"{type(weights).__name__}")
    if not tensor.dtype_object.name.startswith(("int", "uint")):  # PyTorch's error type
        raise NotImplementedError(f"bincount is not implemented for {tensor.dtype_object.name} "
                                  "tensors: it counts integers (as PyTorch's)")
    if len(tensor.sizes) != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs. (got a "
                           f"tensor of shape {list(tensor.sizes)})")
    if minlength < 0:
        raise RuntimeError(f"minlength should be >= 0 (got {minlength})")
    cdef TensorCore weighing = None
    if weights is not None:
        weighing = weights
        if weighing.sizes != tensor.sizes:
            raise RuntimeError("weights should be 1-d and have the same length as input (got "
                               f"weights of shape {list(weighing.sizes)} for an input of "
                               f"{tensor.sizes[0]})")
        if weighing.device_index != tensor.device_index:
            raise ValueError(f"bincount(): weights are on {device_text(weighing.device_index)} "
                             f"and input on {device_text(tensor.device_index)}")
    int64 = dtypes.named_dtype("int64")
    result_dtype = int64 if weighing is None else \
        weighing.dtype_object if weighing.dtype_object.name == "float32" else \
        dtypes.named_dtype("float64")
    if tensor.device_index != CPU:
        _device.refuse_on_capturing_stream(
            "bincount() (its result's size depends on the largest value, read on the host, as "
            "torch.bincount)", <void*>current_stream(tensor.device_index), tensor.device_index)
    bins = minlength
    if tensor.element_count:
        source = tensor.c_detach()
        ends = copies.host_values(<TensorCore>copies.stack(  # one read of both
            [reduction.minimum(source), reduction.maximum(source)], 0))
        if ends[0] < 0:
            raise RuntimeError("bincount only supports 1-d non-negative integral inputs. (got "
                               f"{ends[0]})")
        bins = max(bins, int(ends[1]) + 1)
    device = device_text(tensor.device_index)
    cdef TensorCore counts = factories.zeros((bins,), result_dtype, device, False)
    if not tensor.element_count:
        return counts
    index = copies.to(tensor.c_detach(), None, int64, False, False)
    if weighing is None:
        added = factories.ones(tensor.sizes, int64, device, False)
    else:
        added = copies.to(weighing.c_detach(), None, result_dtype, False, False)
    scatter_into(counts, 0, <TensorCore>index, <TensorCore>added, True)
    return counts


cdef object unique(TensorCore tensor, bint sorted, bint return_inverse, bint return_counts,
                   object dim):
    return asked_for(distinct(tensor, dim, True, return_inverse, return_counts, "unique"),
                     return_inverse, return_counts)


cdef object unique_consecutive(TensorCore tensor, bint return_inverse, bint return_counts,
                               object dim):
    return asked_for(distinct(tensor, dim, False, return_inverse, return_counts,
                              "unique_consecutive"), return_inverse, return_counts)


cdef object asked_for(tuple results, bint return_inverse, bint return_counts):
    """The values alone, or a tuple of the values, the inverse and the counts asked for, as
    PyTorch's."""
    values, inverse, counts = results
    if not return_inverse and not return_counts:
        return values
    return (values,) + ((inverse,) if return_inverse else ()) + \
        ((counts,) if return_counts else ())


cdef tuple distinct(TensorCore tensor, object dim, bint sort_first, bint return_inverse,
                    bint return_counts, str name):
    """(values, inverse or None, counts or None) of unique / unique_consecutive (Note [Unique
    elements]); the caller's api keeps the ones asked for."""
    cdef int axis = -1 if dim is None else dim_with_size(tensor, dim)
    if axis >= 0 and any(size == 0 for at, size in enumerate(tensor.sizes) if at != axis):
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique "
                           f"cannot be applied ({name}(dim={dim}) of a tensor of shape "
                           f"{list(tensor.sizes)})")  # PyTorch's message
    int64 = dtypes.named_dtype("int64")
    if tensor.device_index != CPU:
        _device.refuse_on_capturing_stream(
            f"{name}() (its result's size depends on the values, read on the host, as "
            "torch.unique)", <void*>current_stream(tensor.device_index), tensor.device_index)
    cdef TensorCore source = tensor.c_detach()
    count = source.element_count if axis < 0 else source.sizes[axis]
    device = device_text(source.device_index)
    if count == 0:
        values = source if axis >= 0 else copies.reshape(source, ((0,),))
        return (copies.clone(<TensorCore>values),
                new_empty(source.sizes if axis < 0 else (0,), int64, source.device_index),
                new_empty((0,), int64, source.device_index))
    if axis < 0:
        rows = copies.reshape(source, ((count, 1),))
    else:  # one row per slice along axis, its other elements in order
        width = 1
        for at, size in enumerate(source.sizes):
            width *= size if at != axis else 1
        rows = copies.reshape(<TensorCore>copies.movedim(source, axis, 0), ((count, width),))
    order = lexicographic_order(<TensorCore>rows) if sort_first else None
    ordered = rows if order is None else copies.index_select(<TensorCore>rows, 0, order)
    starts = starts_of_rows(<TensorCore>ordered)
    groups = elementwise.sub(<TensorCore>scan.cumsum(<TensorCore>copies.to(
        <TensorCore>starts, None, int64, False, False), 0, None), 1)
    found = copies.item(<TensorCore>copies.narrow(<TensorCore>groups, 0, count - 1, 1)) + 1
    if axis < 0:  # every member of a group writes its value into the group's slot
        values = new_empty((found,), source.dtype_object, source.device_index)
        scatter_into(<TensorCore>values, 0, <TensorCore>groups, <TensorCore>copies.reshape(
            <TensorCore>ordered, ((count,),)), False)
    else:
        kept = copies.index_select(<TensorCore>ordered, 0, flat_positions(<TensorCore>starts,
                                                                          "unique"))
        shape = (found,) + tuple(size for at, size in enumerate(source.sizes) if at != axis)
        values = copies.contiguous(<TensorCore>copies.movedim(
            <TensorCore>copies.reshape(<TensorCore>kept, (shape,)), 0, axis))
    inverse = None
    if return_inverse:
        if order is None:
            inverse = groups
        else:
            inverse = new_empty((count,), int64, source.device_index)
            scatter_into(<TensorCore>inverse, 0, <TensorCore>order, <TensorCore>groups, False)
        if axis < 0:
            inverse = copies.reshape(<TensorCore>inverse, (source.sizes,))
    counts = None
    if return_counts:
        counts = factories.zeros((found,), int64, device, False)
        scatter_into(<TensorCore>counts, 0, <TensorCore>groups,
                     <TensorCore>factories.ones((count,), int64, device, False), True)
    return values, inverse, counts


cdef object lexicographic_order(TensorCore rows):
    """The int64 order that sorts rows (a 2-D tensor) lexicographically, equal rows kept in
    their order: a stable sort by each column, the last first; None for rows of no columns
    (all equal)."""
    order = None
    for column in reversed(range(rows.sizes[1])):
        keys = copies.select(rows, 1, column)
        if order is not None:  # the column in the order the later columns gave
            keys = copies.index_select(<TensorCore>keys, 0, order)
        step = sort.argsort(<TensorCore>keys, 0, False, True)
        order = step if order is None else copies.index_select(<TensorCore>order, 0, step)
    return order


cdef object starts_of_rows(TensorCore rows):
    """A bool vector: True where a row starts a run of equal rows (the first always; NaN equals
    nothing, as PyTorch's): where any of its elements starts a run down its column."""
    starts = copies.to(<TensorCore>sort.run_starts(rows, 0), None, dtypes.named_dtype("int64"),
                       False, False)
    return elementwise.gt(<TensorCore>reduction.sum_over(<TensorCore>starts, 1, False), 0)
