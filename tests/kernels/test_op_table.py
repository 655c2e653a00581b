"""The op table (runtime/kernels/ops.pyx, Note [Op table]): each op declared once, the kernel
constants, the dispatch and the gradient formulas derived from it."""
import re
import subprocess
import sys

import pytest

import tensorplay as tp
from tensorplay._runtime.autograd import formulas
from tensorplay._runtime.kernels import nvrtc as kernels
from tensorplay._runtime.kernels import ops

Op = ops.Op


def test_every_op_has_one_row_and_a_unique_name():
    names = ops.op_names()
    assert len(names) == len(Op) - 1  # all but OP_COUNT
    assert len(set(names)) == len(names)
    assert names[Op.OP_ADD] == "add" and names[Op.OP_DIV_TRUNC] == "div_trunc"


def test_the_table_and_the_gradient_formulas_match_exactly():
    assert set(ops.gradient_names()) == set(formulas.FORMULAS)


def test_an_op_without_its_formula_is_an_error_naming_it():
    table = dict(formulas.FORMULAS)
    del table["rounded_div"]
    with pytest.raises(RuntimeError, match="no formula for rounded_div"):
        formulas.formulas_by_op(table)


def test_a_formula_for_no_op_is_an_error_naming_it():
    table = {**formulas.FORMULAS, "mull": formulas.FORMULAS["mul"]}
    with pytest.raises(RuntimeError, match="formulas for no op: mull"):
        formulas.formulas_by_op(table)


def test_each_op_finds_its_formula_by_code():
    by_op = formulas.formulas_by_op(formulas.FORMULAS)
    assert by_op[Op.OP_ADD] is formulas.FORMULAS["add"]
    assert by_op[Op.OP_DIV_FLOOR] is formulas.FORMULAS["rounded_div"]
    assert by_op[Op.OP_EQ] is None  # comparisons have no gradient


def test_the_kernel_op_codes_are_the_tables_in_every_source():
    defined = dict(kernels.KERNEL_CONSTANTS)
    assert defined["OP_ADD"] == Op.OP_ADD and defined["OP_SUM"] == Op.OP_SUM
    assert f"#define OP_LOG {int(Op.OP_LOG)}\n" in kernels.CONSTANTS_PRELUDE
    for source in kernels.kernel_source_names():
        text = kernels.read_kernel_source(source)
        # No source numbers the ops itself; every op it names is one the prelude defines.
        assert not re.search(r"\benum\s+\w*Op\b", text), source
        for name in re.findall(r"\bOP_\w+", text):
            assert name in defined, (source, name)


def test_a_node_is_named_by_its_ops_gradient():
    x = tp.tensor([3.0, -1.5], requires_grad=True)
    assert x.div(2, rounding_mode="floor").grad_fn.name() == "RoundedDivBackward"
    assert (x * 2).grad_fn.name() == "MulBackward"
    assert x.exp().grad_fn.name() == "ExpBackward"


def test_import_installs_the_tape_recorder_and_leaves_numpy_for_later():
    # The tensor layer records Nodes through the recorder the tape installs when it is imported
    # (core.pyx, Note [Tape recorder]); the public package imports it. numpy, which costs more
    # than the rest of the import, waits for the first CPU operation.
    code = ("import sys, tensorplay\n"
            "print('tensorplay._runtime.autograd.tape' in sys.modules, 'numpy' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                            text=True)
    assert result.stdout.split() == ["True", "False"]
