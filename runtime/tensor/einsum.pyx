# cython: language_level=3
"""einsum(), as PyTorch's torch.einsum: the equation's subscripts, its ellipsis, broadcasting
of size-1 dimensions, repeated subscripts (diagonals) and PyTorch's messages.

Note [Einsum by pairwise products]
Each operand's repeated subscripts are first reduced to one (the diagonal: a product with an
equality mask of two aranges, summed over the second), and its subscripts that no other operand
and not the output names are summed out. Then the operands are contracted left to right, as
PyTorch's default path does (without opt_einsum): for a pair, the subscripts both hold that a
later operand or the output needs are the batch, those both hold and nothing later needs are
contracted, and the rest belong to one side; each side is permuted and reshaped to (batch,
rows, contracted) and (batch, contracted, columns), and one matmul (cuBLASLt on a device)
gives (batch, rows, columns). Integer operands, which matmul refuses, multiply by broadcasting
and sum instead. Everything is recorded tensor operations, so autograd differentiates the
result and a CUDA graph captures it. PyTorch's sublist form (operands each followed by a list
of int subscripts) becomes the equation it stands for, A-Z for 0-25 and a-z for 26-51.
"""
from tensorplay._runtime.base cimport dtypes, errors
from tensorplay._runtime.tensor cimport factories
from tensorplay._runtime.tensor.core cimport TensorCore, check_device, device_text

from tensorplay._runtime.tensor.arguments import DtypeError

from math import prod  # exact: sizes multiply as Python ints

LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
# The letter of each int subscript of the sublist form, as PyTorch's: 0-25 A-Z, 26-51 a-z.
SUBLIST_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class EquationError(ValueError, RuntimeError):
    """An einsum equation that is malformed or does not fit its operands: a ValueError, and the
    RuntimeError PyTorch raises (its messages)."""


cdef tuple parse(str equation):
    """(the subscripts of each operand's term, the output's or None): letters, and "..." once
    at most in each; spaces are skipped, as PyTorch's parser skips them."""
    terms = [[]]
    output = None
    current = terms[0]
    at = 0
    while at < len(equation):
        character = equation[at]
        where = "output" if output is not None else f"operand {len(terms) - 1}"
        if character == " ":
            at += 1
        elif character == "," and output is None:
            terms.append([])
            current = terms[-1]
            at += 1
        elif equation.startswith("->", at) and output is None:
            output = current = []
            at += 2
        elif equation.startswith("...", at) and "..." not in current:
            current.append("...")
            at += 3
        elif character == ".":
            if "..." in current:
                raise EquationError(f"einsum(): found '.' for {where} " + (
                    "but an ellipsis (...) was already found" if output is not None
                    else "for which an ellipsis was already found"))
            raise EquationError(f"einsum(): found '.' for {where} that is not part of any "
                                "ellipsis" + (" (...)" if output is not None else ""))
        elif character in LETTERS:
            current.append(character)
            at += 1
        else:
            raise EquationError(f"einsum(): invalid subscript given at index {at} in the "
                                "equation string, subscripts must be in [a-zA-Z]")
    return terms, output


cdef tuple from_sublists(tuple args):
    """PyTorch's sublist form, einsum(op1, [0, 1], op2, [1, 2], [0, 2]), as (equation,
    operands): each operand followed by its subscripts, ints from 0 to 51 (A-Z, then a-z) or
    Ellipsis, and an optional list of the output's last."""
    if len(args) < 2:  # PyTorch's words
        raise EquationError("einsum(): must specify the equation string and at least one "
                            "operand, or at least one operand and its subscripts list")
    sublists = list(args[1::2]) + ([args[-1]] if len(args) % 2 else [])
    operands = args[:-1:2] if len(args) % 2 else args[::2]
    for index, subscripts in enumerate(sublists):
        if not isinstance(subscripts, (list, tuple)):
            raise TypeError(f"einsum(): the sublist form takes a list of subscripts after each "
                            f"operand (and one for the output), got {errors.shown(subscripts)} "
                            f"at argument {2 * index + 1}")
        for subscript in subscripts:
            if subscript is not Ellipsis and (isinstance(subscript, bool)
                                              or not isinstance(subscript, int)):
                raise TypeError(f"einsum(): subscripts must be ints from 0 to 51 or Ellipsis, "
                                f"got {errors.shown(subscript)}")
    for subscripts in sublists:
        for subscript in subscripts:
            if subscript is not Ellipsis and not 0 <= subscript < 52:  # PyTorch's words
                raise EquationError("einsum(): subscript in subscript list is not within the "
                                    "valid range [0, 52)")
    terms = ["".join("..." if subscript is Ellipsis else SUBLIST_LETTERS[subscript]
                     for subscript in subscripts) for subscripts in sublists]
    equation = ",".join(terms[:len(operands)])
    if len(args) % 2:
        equation += "->" + terms[-1]
    return equation, tuple(operands)


cdef object einsum(object equation, tuple operands):
    if isinstance(equation, TensorCore):  # the sublist form
        equation, operands = from_sublists((equation,) + operands)
    elif not isinstance(equation, str):
        raise TypeError(f"einsum(): equation must be a str, or the first operand of the "
                        f"sublist form, got {errors.shown(equation)}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])  # einsum("ij,jk", [a, b]), as PyTorch's
    for index, operand in enumerate(operands):
        if not isinstance(operand, TensorCore):
            raise TypeError(f"einsum(): operands must be tensors, but operand {index} is a "
                            f"{type(operand).__name__} ({errors.shown(operand)})")
    if not operands:
        raise EquationError("einsum(): must specify the equation string and at least one "
                            "operand")
    parsed, output = parse(equation)
    if len(parsed) > len(operands):
        raise EquationError("einsum(): fewer operands were provided than specified in the "
                            "equation")
    if len(parsed) < len(operands):
        raise EquationError("einsum(): more operands were provided than specified in the "
                            "equation")
    cdef TensorCore first = operands[0], tensor
    for index, tensor in enumerate(operands[1:], 1):
        check_device(first, tensor, "einsum")
        if tensor.dtype_object is not first.dtype_object:  # PyTorch refuses them too
            raise DtypeError(f"einsum(): expected operands of one dtype, got "
                             f"{first.dtype_object.name} for operand 0 and "
                             f"{tensor.dtype_object.name} for operand {index}")
    if first.dtype_object.name == "bool":  # PyTorch's bmm refuses bool
        raise DtypeError("einsum(): bool operands are not supported; convert them with "
                         ".to(tensorplay.int64) or to a floating dtype first")
    # Each ellipsis covers the dimensions its operand has beyond its letters, aligned to the
    # right of the widest one (broadcasting): ("...", k) names the k-th of those.
    widths = []
    for index, (labels, tensor) in enumerate(zip(parsed, operands)):
        letters = len(labels) - ("..." in labels)
        width = len(tensor.sizes) - letters
        if width < 0 or (width > 0 and "..." not in labels):
            if "..." in labels:
                raise EquationError(f"einsum(): the number of subscripts in the equation "
                                    f"({letters}) is more than the number of dimensions "
                                    f"({len(tensor.sizes)}) for operand {index}")
            raise EquationError(f"einsum(): the number of subscripts in the equation "
                                f"({letters}) does not match the number of dimensions "
                                f"({len(tensor.sizes)}) for operand {index} and no ellipsis "
                                "was given")
        widths.append(width)
    widest = max(widths, default=0)
    named = []
    for labels, width in zip(parsed, widths):
        at = labels.index("...") if "..." in labels else len(labels)
        named.append(labels[:at] + [("...", widest - width + k) for k in range(width)] +
                     labels[at + 1:])
    ellipsis = [("...", k) for k in range(widest)]
    if output is None:  # implicit: the ellipsis, then the letters named once, sorted
        counts = {}
        for labels in parsed:
            for label in labels:
                counts[label] = counts.get(label, 0) + 1
        output = ellipsis + sorted(label for label, count in counts.items()
                                   if count == 1 and label != "...")
    else:
        seen = set()
        for label in output:
            if label in seen:
                raise EquationError(f"einsum(): output subscript {label} appears more than "
                                    "once in the output")
            seen.add(label)
            if label != "..." and not any(label in labels for labels in parsed):
                raise EquationError(f"einsum(): output subscript {label} does not appear in "
                                    "the equation for any input operand")
        at = output.index("...") if "..." in output else len(output)
        output = output[:at] + (ellipsis if "..." in output else []) + output[at + 1:]
    # The size of each subscript: sizes of 1 broadcast, others must agree.
    sizes = {}
    for index, (labels, tensor) in enumerate(zip(named, operands)):
        own = {}
        for label, size in zip(labels, tensor.sizes):
            if own.setdefault(label, size) != size:  # a diagonal needs equal sizes
                raise EquationError(f"einsum(): subscript {label} is repeated for operand "
                                    f"{index} but the sizes don't match, {size} != "
                                    f"{own[label]}")
        for dimension, (label, size) in enumerate(zip(labels, tensor.sizes)):
            known = sizes.get(label, 1)
            if size != 1 and known != 1 and size != known:
                if isinstance(label, str):
                    raise EquationError(f"einsum(): subscript {label} has size {size} for "
                                        f"operand {index} which does not broadcast with "
                                        f"previously seen size {known}")
                raise EquationError(f"einsum(): dimension {dimension} covered by ellipsis in "
                                    f"operand {index} has size {size} which does not "
                                    f"broadcast with previously seen ellipsis with size "
                                    f"{known} for the respective dimension")
            if size != 1 or label not in sizes:
                sizes[label] = size
    # Every check is done; the work starts here (Note [Einsum by pairwise products]).
    pieces = []
    for index, (labels, tensor) in enumerate(zip(named, operands)):
        tensor, labels = diagonal(tensor, labels)
        later = set(output).union(*[set(other) for at, other in enumerate(named)
                                    if at != index])
        tensor, labels = summed(tensor, labels, later)
        pieces.append((tensor, labels))
    result, labels = pieces[0]
    for index in range(1, len(pieces)):
        needed = set(output).union(*[set(other) for other in named[index + 1:]])
        result, labels = contracted(result, labels, pieces[index][0], pieces[index][1], needed,
                                    sizes)
    result, labels = summed(result, labels, set(output))
    return result.permute(*[labels.index(label) for label in output]) if output else result


cdef tuple diagonal(TensorCore tensor, list labels):
    """tensor with each repeated subscript kept once (its diagonal), and its subscripts."""
    labels = list(labels)
    device = device_text(tensor.device_index)
    int64 = dtypes.named_dtype("int64")
    while len(set(labels)) < len(labels):
        first = next(at for at, label in enumerate(labels) if labels.index(label) != at)
        kept = labels.index(labels[first])
        shape = [1] * len(labels)
        rows, columns = list(shape), list(shape)
        rows[kept], columns[first] = tensor.sizes[kept], tensor.sizes[first]
        same = (factories.arange(0, tensor.sizes[kept], 1, int64, device, False).reshape(rows) ==
                factories.arange(0, tensor.sizes[first], 1, int64, device, False).reshape(
                    columns))
        tensor = (tensor * same.to(dtype=tensor.dtype_object)).sum(first)
        del labels[first]
    return tensor, labels


cdef tuple summed(TensorCore tensor, list labels, set needed):
    """tensor summed over the subscripts not in needed, and the subscripts left."""
    dropped = tuple(at for at, label in enumerate(labels) if label not in needed)
    if not dropped:
        return tensor, labels
    return tensor.sum(dropped), [label for label in labels if label in needed]


cdef tuple contracted(TensorCore a, list a_labels, TensorCore b, list b_labels, set needed,
                      dict sizes):
    """The product of a and b summed over the subscripts both hold that needed lacks, and its
    subscripts: the batch (both, needed), a's own, b's own."""
    a, a_labels = summed(a, a_labels, needed | set(b_labels))
    b, b_labels = summed(b, b_labels, needed | set(a_labels))
    batch = [label for label in a_labels if label in b_labels and label in needed]
    inner = [label for label in a_labels if label in b_labels and label not in needed]
    rows = [label for label in a_labels if label not in b_labels]
    columns = [label for label in b_labels if label not in a_labels]
    a = aligned(a, a_labels, batch + rows + inner, batch + inner, sizes)
    b = aligned(b, b_labels, batch + inner + columns, batch + inner, sizes)
    # Sizes as the operands hold them: a side's own subscript may still be 1 here where a
    # later operand broadcasts it.
    batch_sizes = a.sizes[:len(batch)]
    row_sizes = a.sizes[len(batch):len(batch) + len(rows)]
    column_sizes = b.sizes[len(batch) + len(inner):]
    count = prod(batch_sizes)
    left = a.reshape(count, prod(row_sizes), prod(a.sizes[len(batch) + len(rows):]))
    right = b.reshape(count, prod(b.sizes[len(batch):len(batch) + len(inner)]),
                      prod(column_sizes))
    if a.dtype_object.floating:
        result = left.matmul(right)
    else:  # matmul takes floating point only: a broadcast product and a sum
        result = (left.unsqueeze(3) * right.unsqueeze(1)).sum(2)
    return result.reshape(batch_sizes + row_sizes + column_sizes), batch + rows + columns


cdef TensorCore aligned(TensorCore tensor, list labels, list order, list shared, dict sizes):
    """tensor permuted to order, its subscripts of shared expanded to their full sizes."""
    tensor = tensor.permute(*[labels.index(label) for label in order])
    target = tuple(sizes[label] if label in shared else size
                   for label, size in zip(order, tensor.sizes))
    return tensor if target == tensor.sizes else tensor.expand(*target)
