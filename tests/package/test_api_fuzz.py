"""Every public callable rejects arguments outside its declared type and range, by name.

The test walks api.yaml through codegen.model.load_api, so it sees exactly the functions,
constructors and methods the wrappers are generated from, and a new API entry is fuzzed without
editing this file. For each parameter, hypothesis draws values outside its schema type from the
type vocabulary (codegen/types.py); the other parameters keep their defaults, or a small valid
sample per type. Each call must raise TypeError (a wrong type) or ValueError (a wrong value of
the right type) whose message names the parameter and stays short; never crash, hang or return.
Two exceptions follow Python: a binary operator may answer NotImplemented, and an int index out
of range may be an IndexError.

Each argument rule is a test of its own, over every public callable. The limits a parameter's
kind declares (an int's `range:`, a str's `choices:`; codegen/types.py, Note [Parameter kinds])
add candidates at and beyond them, which must be ValueErrors. A parameter the schema leaves
untyped (Any) whose values the runtime checks gets fixed candidates of its own (ANY_CANDIDATES).

Arguments are checked before anything needs the device (docs/design.md, "Where arguments are
checked"), so on a machine without a GPU no bad argument may be answered with "no accelerator
is available": a test of its own holds every call to that, whatever error it raised.

The calls run in a child process per public module (this file, run as a script), which prints
each call before making it: a crash or a hang is reported naming the call, and the child starts
again after it.
"""
import builtins
import importlib
import json
import os
import re
import resource
import selectors
import signal
import subprocess
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from codegen.model import load_api

ROOT = Path(__file__).resolve().parents[2]

EXAMPLES_PER_PARAMETER = 6     # hypothesis draws per parameter, besides the fixed values
# A call answers in milliseconds; a child that prints nothing this long (each call prints a line
# before and after it) is hung. A limit per call, not per module: a module of 1,300 cases takes
# 20 s alone and minutes on a 2-core machine running every module's child at once.
CALL_TIMEOUT_S = 60
# A child's writable private memory (RLIMIT_DATA): a call that asks for more (a huge shape
# allocated before it is checked) fails with MemoryError, which the rules report, instead of
# exhausting the machine. CUDA's address-space reservations are not writable, so not counted.
CHILD_MEMORY_BYTES = 8 << 30
MESSAGE_LIMIT = 400            # characters of an error message
# Runtime modules being rewritten in their own branches (RNG: rng, random_ops; capture:
# graph): their callables' problems are reported by a test of their own (the last one below),
# not by the rules' tests.
MAX_DEVICES = 63               # an index no machine here has; the runtime supports 64


# --------------------------------------------------------------------------------------------
# The callables, from the schema


@dataclass(frozen=True)
class Target:
    """A public callable: a module function, a class constructor or a method."""

    module: str          # the public module it is reached from
    owner: str           # the class name, or "" for a module function
    name: str            # the function or method name; "__init__" for a constructor
    params: tuple
    impl_module: str     # the runtime module implementing it (runtime/<name>.pyx)

    @property
    def qualname(self):
        if not self.owner:
            return f"{self.module}.{self.name}"
        if self.name == "__init__":
            return f"{self.module}.{self.owner}"
        return f"{self.module}.{self.owner}.{self.name}"


def load_schema():
    return load_api(ROOT / "api.yaml", ROOT / "runtime")


def targets_of(api):
    """Every public callable, once (re-exports are the same objects); exceptions excluded."""
    found = []
    for module in api.modules:
        for function in module.functions:
            found.append(Target(module.name, "", function.name, function.params,
                                function.impl_module))
        for cls in module.classes:
            if cls.kind == "exception":
                continue
            if cls.init is not None:
                found.append(Target(module.name, cls.name, "__init__", cls.init,
                                    cls.impl_module))
            for method in cls.methods:
                found.append(Target(module.name, cls.name, method.name, method.params,
                                    cls.impl_module))
    return found


# --------------------------------------------------------------------------------------------
# Membership: whether a value is inside a schema type ("member"), of an accepted Python type
# but a wrong value ("value", a ValueError), or of a wrong type ("type", a TypeError).

RANK = {"type": 0, "value": 1, "member": 2}
INT_RANGE = range(-2 ** 63, 2 ** 64)  # what any C integer parameter can hold
LONG_TEXT = 10 ** 5                   # a string this long is no sensible argument
DEVICE_TEXT = re.compile(r"cuda(:[0-9]+)?")


def worst(kinds):
    return min(kinds, key=RANK.__getitem__, default="member")


def classify(expr, value, classes):
    """'member', 'value' or 'type' for value against the schema type expr."""
    name, args = expr.name, expr.args
    if name == "|":
        return max((classify(arg, value, classes) for arg in args), key=RANK.__getitem__)
    if name == "Optional":
        return "member" if value is None else classify(args[0], value, classes)
    if name in ("Any", "object"):
        return "member"
    if name == "None":
        return "member" if value is None else "type"
    if name == "int":
        if type(value) is not int:
            return "type"
        return "member" if value in INT_RANGE else "value"
    if name == "float":
        if type(value) not in (int, float):
            return "type"
        # An int beyond the largest float cannot become one: a wrong value, by name.
        return "member" if type(value) is float or abs(value) < 2 ** 1024 else "value"
    if name == "bool":
        return "member" if type(value) is bool else "type"
    if name in ("str", "bytes"):
        if not isinstance(value, str if name == "str" else bytes):
            return "type"
        return "member" if len(value) < LONG_TEXT else "value"
    if name == "Path":
        return "member" if isinstance(value, (str, os.PathLike)) else "type"
    if name == "Callable":
        return "member" if callable(value) else "type"
    if name == "Unset":  # Literal['__unset__']: another string is another type
        return "member" if value == "__unset__" else "type"
    if name in ("Device", "DeviceSelection", "TensorDevice"):
        return classify_device(name, value)
    if name == "GraphPool":
        if value is None or isinstance(value, (classes["Graph"], classes["CUDAGraph"])):
            return "member"
        # A pool id is a tuple of two ints (the type); negative, both zero or too big for C is
        # a wrong value.
        if not (isinstance(value, tuple) and len(value) == 2
                and all(type(v) is int for v in value)):
            return "type"
        return "member" if value != (0, 0) and all(v in range(2 ** 64) for v in value) \
            else "value"
    if name in ("list", "set", "tuple", "dict"):
        container = {"list": list, "set": set, "tuple": tuple, "dict": dict}[name]
        if not isinstance(value, container):
            return "type"
        if name == "dict":
            return worst([classify(args[0], k, classes) for k in value]
                         + [classify(args[1], v, classes) for v in value.values()])
        if name == "tuple" and not (len(args) == 2 and args[1].name == "..."):
            if len(value) != len(args):
                return "value"
            return worst([classify(a, v, classes) for a, v in zip(args, value)])
        return worst([classify(args[0], v, classes) for v in value])
    if name in classes:
        return "member" if isinstance(value, classes[name]) else "type"
    raise AssertionError(f"the fuzz test does not know the type name {name!r}; add it to "
                         "classify() and outside()")


def classify_param(param, value, classes):
    """classify() for a parameter, with the limits of its kind: an int outside the `range:`
    its declaration gives, or a str outside its `choices:`, is a wrong value."""
    kind = classify(param.type, value, classes)
    if kind != "member":
        return kind
    if param.bounds is not None and type(value) is int \
            and not param.bounds[0] <= value <= param.bounds[1]:
        return "value"
    if param.choices is not None and isinstance(value, str) and value not in param.choices \
            and not (value == "__unset__" and param.default == "__unset__"):
        return "value"
    return "member"


# Candidates for untyped (Any) parameters whose values the runtime checks, by (callable name,
# parameter name): (value, "type" or "value"), each the error it must give. The values are made
# in the child (tensorplay imported), by name.
ANY_CANDIDATES = {
    ("set_rng_state", "new_state"): [("short_state", "value"), ("long_state", "value"),
                                     ("tpu", "type"), (1.5, "type"), ("float_state", "type")],
    ("set_state", "new_state"): [("short_state", "value"), ("long_state", "value"),
                                 ("tpu", "type"), (1.5, "type"), ("float_state", "type")],
}
ANY_VALUES = {
    "short_state": lambda tp: b"\x00" * 15,
    "long_state": lambda tp: tp.zeros(17, dtype=tp.uint8),
    "float_state": lambda tp: tp.zeros(16),
}


def any_candidates(target, param):
    """[(value, kind)] for an untyped parameter ANY_CANDIDATES lists, else []."""
    import tensorplay

    found = ANY_CANDIDATES.get((target.name, param.name), [])
    return [(ANY_VALUES[value](tensorplay) if isinstance(value, str) and value in ANY_VALUES
             else value, kind) for value, kind in found]


def outside_param(param, samples):
    """outside() for a parameter, with candidates at and beyond the limits of its kind."""
    fixed, drawn = outside(param.type, samples)
    if param.bounds is not None:
        low, high = param.bounds
        fixed = fixed + [low - 1, high + 1]
    if param.choices is not None:
        fixed = fixed + ["tpu", param.choices[0].upper(), param.choices[0] + " "]
    return fixed, drawn


def classify_device(name, value):
    import tensorplay

    if value is None:
        return "member"
    if isinstance(value, bool):
        return "type"
    if isinstance(value, int):
        lowest = -1 if name == "DeviceSelection" else 0
        return "member" if lowest <= value < MAX_DEVICES else "value"
    if isinstance(value, str):
        match = DEVICE_TEXT.fullmatch(value)
        if (value == "cpu" and name == "TensorDevice") or (
                match and (not match.group(1) or int(match.group(1)[1:]) < MAX_DEVICES)):
            return "member"
        return "value"
    if isinstance(value, tensorplay.device):
        kinds = ("cuda", "cpu") if name == "TensorDevice" else ("cuda",)
        return "member" if value.type in kinds else "value"
    return "type"


# --------------------------------------------------------------------------------------------
# Candidates outside each type: fixed values every run tries, and hypothesis strategies that
# draw more. classify() decides which are really outside the whole parameter type and which
# error each must give.


def outside(expr, samples):
    """(fixed values, strategy) of candidates outside the schema type expr."""
    from hypothesis import strategies as st

    name, args = expr.name, expr.args
    other = samples["device"] if name != "device" else samples["dtype"]
    if name in ("|", "Optional"):
        parts = [outside(arg, samples) for arg in args if arg.name != "None"]
        return [v for fixed, _ in parts for v in fixed], st.one_of([s for _, s in parts])
    if name in ("Any", "object"):
        return [], st.nothing()
    if name == "int":
        return (["tpu", 1.5, None, True, b"1", object(), 2 ** 70, -2 ** 70],
                st.one_of(st.integers(min_value=2 ** 64, max_value=2 ** 80),
                          st.integers(min_value=-2 ** 80, max_value=-2 ** 63 - 1),
                          st.floats(), st.text(max_size=4)))
    if name == "float":
        return ["tpu", None, b"1", object(), 1j, 10 ** 400, -10 ** 400], st.text(max_size=4)
    if name == "bool":
        return ["tpu", object(), 2, None, 1.0], st.one_of(st.integers(), st.text(max_size=4))
    if name == "str":
        return [1, b"global", None, object(), "x" * 10 ** 6], st.one_of(st.integers(),
                                                                        st.binary(max_size=4))
    if name == "bytes":
        return ["tpu", 1, None], st.integers()
    if name == "None":
        return [0, "tpu"], st.nothing()
    if name == "Path":
        return [1, None, object(), 1.5], st.integers()
    if name == "Callable":
        return [1, "tpu", None], st.integers()
    if name == "Unset":
        return ["tpu", 1, "x" * 10 ** 6], st.text(max_size=4)
    if name in ("Device", "DeviceSelection", "TensorDevice"):
        return ([-7, -2 ** 70, 63, 2 ** 70, "tpu", "cuda:x", "cuda:-1", object(), 1.5, True,
                 "x" * 10 ** 6],
                st.one_of(st.integers(max_value=-2), st.integers(min_value=MAX_DEVICES),
                          st.text(max_size=6)))
    if name == "GraphPool":
        return (["tpu", 1, (1,), (1, 2, 3), ("a", "b"), object(), other, (0, 0), (-1, 0),
                 (2 ** 70, 0)],
                st.tuples(st.integers(), st.text(max_size=2)))
    if name in ("list", "set", "tuple", "dict"):
        fixed = ["", "tpu", {} if name != "dict" else [], 1, None, 1.5]
        element_fixed, element = outside(args[0], samples)
        if name == "list":
            fixed.append(iter([]))
        if not element_fixed or name not in ("list", "tuple"):
            return fixed, st.nothing()
        container = tuple if name == "tuple" else list
        fixed.append(container(element_fixed[:2]))
        return fixed, st.lists(element, min_size=1, max_size=2).map(container)
    # A class the schema declares.
    return ["tpu", 1, object(), other], st.integers()


# --------------------------------------------------------------------------------------------
# Valid samples for the parameters not being fuzzed, per type name


def make_samples(api, classes):
    """A small valid value per type name; classes from their constructor's defaults."""
    import tensorplay

    samples = {"int": 1, "float": 1.0, "bool": False, "str": "cpu", "bytes": b"",
               "None": None, "Path": os.devnull,
               "Callable": print, "Unset": "__unset__", "Device": None,
               "DeviceSelection": -1, "TensorDevice": "cpu", "GraphPool": None,
               "Tensor": tensorplay.tensor([1.0, 2.0]), "device": tensorplay.device("cpu"),
               "dtype": tensorplay.float32}
    # A tensor is a valid value of most parameters the schema leaves untyped (data, inputs).
    samples["Any"] = samples["object"] = samples["Tensor"]
    # Parameters whose type does not say what a valid value is: where()'s condition is a bool
    # tensor, so that a fuzzed input or other is what gets judged; a registered attribute's
    # name must not be one of Module's methods (cpu), or the name is what gets refused; a
    # selection (Tensor.__setitem__'s key) is an int, so that the value is what gets judged;
    # MultiheadAttention's embed_dim is a multiple of num_heads (whose sample is 2); an
    # optimiser's params are a list of parameters, so that the schedulers get a working
    # optimiser; ReduceLROnPlateau.step's metrics is a number.
    samples["by_name"] = {"condition": tensorplay.tensor([True, False]), "name": "registered",
                          "key": 0, "embed_dim": 4,
                          "params": [tensorplay.nn.Parameter(tensorplay.zeros(2))],
                          "metrics": 1.0}
    for module in api.modules:
        for cls in module.classes:
            if cls.name in samples or cls.kind == "exception":
                continue
            target = classes[cls.name]
            try:
                args, kwargs = arguments(cls.init or (), None, None, samples)
                samples[cls.name] = target(*args, **kwargs)
            except (RuntimeError, TypeError, ValueError):
                # Without a GPU the constructor says no accelerator is available, a class
                # only the runtime makes (autograd's Node) refuses construction, and one whose
                # arguments must hold something refuses the samples (ChainedScheduler's
                # schedulers, an empty list); an instance that was never initialised still has
                # the right type, and its methods must check their arguments before they need
                # the device.
                samples[cls.name] = target.__new__(target)
    return samples


def by_name_fits(param, samples):
    """Whether the sample kept for param's name applies: not to a Tensor parameter unless it
    is a tensor (__setitem__'s key is an int, scaled_dot_product_attention's a Tensor)."""
    import tensorplay

    if param.name not in samples["by_name"]:
        return False
    return param.type.name != "Tensor" or isinstance(samples["by_name"][param.name],
                                                     tensorplay.Tensor)


def sample_of(expr, samples, position=0):
    """The sample of a type; numbers ascend with the parameter's position among the required
    ones, so that pairs such as randint's (low, high) come in order."""
    if expr.name == "|":
        return sample_of(expr.args[0], samples, position)
    if expr.name == "Optional":
        return None
    if expr.name in ("list", "tuple", "set", "dict"):
        return {"list": [], "tuple": (), "set": set(), "dict": {}}[expr.name]
    if expr.name in ("int", "float"):
        return samples[expr.name] + position
    return samples[expr.name]


def arguments(params, fuzzed, value, samples, positional=False):
    """Positional and keyword arguments: value for fuzzed, defaults or samples elsewhere.

    positional: pass every parameter that is not keyword-only by position (special methods
    such as __add__ take no keywords). So are those before a *args (einsum's equation), which
    a keyword would give twice.
    """
    args, kwargs = [], {}
    needed = [p for p in params if p is fuzzed or not (p.has_default or p.kind == "var_keyword")]
    positional = positional or any(p.kind == "var_positional" for p in params)
    by_position = ("positional_only", "var_positional") + (("positional",) if positional else ())
    last_positional = max((i for i, p in enumerate(params)
                           if p in needed and p.kind in by_position), default=-1)
    for index, param in enumerate(params):
        if param.kind == "var_keyword" and param is not fuzzed:  # **kwargs: no keyword needed
            continue
        chosen = value if param is fuzzed else (
            param.default if param.has_default else
            samples["by_name"][param.name] if by_name_fits(param, samples) else
            sample_of(param.type, samples, needed.index(param)))
        if param.kind == "var_positional":
            args.append(chosen)
        elif param.kind in by_position:
            if index <= last_positional:
                args.append(chosen)
        elif param in needed:
            kwargs[param.name] = chosen
    return args, kwargs


# --------------------------------------------------------------------------------------------
# The child: calls one module's callables and prints one JSON line per call


def shown(value, limit=120):
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


# Special methods (__add__) take their arguments by position only.
SPECIAL = re.compile(r"__\w+__")
# Binary operators answer NotImplemented for an operand they do not take, so that Python can
# try the other operand and then raise TypeError itself.
OPERATOR = re.compile(r"__r?(add|sub|mul|truediv|matmul|eq|ne|lt|le|gt|ge)__")


def judge(target, param, expected, outcome):
    """None when the outcome is right, else what is wrong with it."""
    kind, result = outcome
    if kind == "returned":
        if result == "NotImplemented" and OPERATOR.fullmatch(target.name):
            return None
        return f"returned {result} instead of raising {expected}"
    error, message = result
    if error == "IndexError" and expected == "ValueError" and param.type.names() == {"int"}:
        error = "ValueError"  # an index out of range is an IndexError, as in Python and PyTorch
    if error != expected:
        return f"raised {error} instead of {expected}: {shown(message, 300)}"
    if len(message) > MESSAGE_LIMIT:
        return f"{error} message of {len(message)} characters (at most {MESSAGE_LIMIT})"
    return None


def names_argument(params, param, value, message):
    """Whether message names param; or names a parameter given a sample, since a sample is a
    valid value of its type but not always of its parameter (where()'s condition must be a bool
    tensor), and an error may report either of two wrong arguments."""
    sampled = [p for p in params if p is not param and not p.has_default]
    if any(re.search(rf"\b{re.escape(p.name)}\b", message) for p in [param] + sampled):
        return True
    # A positional-only or variadic parameter may name the value instead of itself.
    return param.kind in ("positional_only", "var_positional") and (
        shown(value, 30)[:30] in message or type(value).__name__ in message)


def resolve(target, classes, samples):
    if not target.owner:
        return getattr(importlib.import_module(target.module), target.name)
    if target.name == "__init__":
        return classes[target.owner]
    return getattr(samples[target.owner], target.name)


def run_child(module_name, start):
    from hypothesis import HealthCheck, Phase, example, given, settings
    from hypothesis import strategies as st

    import tensorplay  # noqa: F401  (registers the public classes before any sample is made)

    warnings.simplefilter("ignore", FutureWarning)  # the deprecated aliases are fuzzed too

    api = load_schema()
    classes = {cls.name: getattr(importlib.import_module(module.name), cls.name)
               for module in api.modules for cls in module.classes}
    samples = make_samples(api, classes)
    cases = child_cases(api, module_name)

    def emit(**fields):
        print(json.dumps(fields), flush=True)

    for index, (target, param) in enumerate(cases):
        if index < start:
            continue
        call = resolve(target, classes, samples)
        record = {"case": index, "target": target.qualname, "impl": target.impl_module,
                  "param": param.name if param else "not_a_parameter"}
        if param is None:
            # Every callable, parameters or not, refuses a keyword it does not declare.
            emit(start=True, rule="unknown keyword", value="not_a_parameter=1", **record)
            emit(rule="unknown keyword", value="not_a_parameter=1",
                 problem=unknown_keyword_problem(call), **record)
            continue
        if param.type.name in ("Any", "object"):  # only those ANY_CANDIDATES lists
            for value, kind in any_candidates(target, param):
                make_attempt(target, param, call, record, classes, samples, emit, kind)(value)
            continue
        fixed, drawn = outside_param(param, samples)

        attempt = make_attempt(target, param, call, record, classes, samples, emit)
        test = given(st.sampled_from(fixed) if drawn.is_empty else drawn)(attempt)
        for value in reversed(fixed):
            test = example(value)(test)
        settings(max_examples=EXAMPLES_PER_PARAMETER, derandomize=True, database=None,
                 deadline=None, phases=(Phase.explicit, Phase.generate),
                 suppress_health_check=list(HealthCheck))(test)()
    emit(done=True, cases=len(cases))


def make_attempt(target, param, call, record, classes, samples, emit, known_kind=None):
    """One call with a drawn value, judged and printed before and after; known_kind: the kind
    of an untyped parameter's candidate (ANY_CANDIDATES), which classify() cannot tell."""
    def attempt(value):
        kind = known_kind or classify_param(param, value, classes)
        if kind == "member":
            return
        expected = "TypeError" if kind == "type" else "ValueError"
        rule = rule_of(param, kind)
        emit(start=True, rule=rule, value=shown(value), **record)
        args, kwargs = arguments(target.params, param, value, samples,
                                 positional=SPECIAL.fullmatch(target.name) is not None)
        message = None
        try:
            result = call(*args, **kwargs)
        except Exception as error:  # noqa: BLE001  (judged below)
            message = shown(str(error), 300)
            # A subclass of the expected error counts as it (the shape errors are ValueErrors
            # and RuntimeErrors, as PyTorch raises).
            name = expected if isinstance(error, getattr(builtins, expected)) else \
                type(error).__name__
            outcome = ("raised", (name, str(error)))
            problem = judge(target, param, expected, outcome)
            if problem is None and not names_argument(target.params, param, value, str(error)):
                problem = (f"{type(error).__name__} does not name {param.name}: "
                           f"{shown(str(error), 300)}")
        else:
            problem = judge(target, param, expected, ("returned", shown(result)))
        emit(rule=rule, value=shown(value), problem=problem, message=message, **record)

    return attempt


def unknown_keyword_problem(call):
    try:
        call(not_a_parameter=1)
    except TypeError as error:
        if "not_a_parameter" in str(error) or "takes no keyword arguments" in str(error):
            return None
        return f"TypeError does not name the keyword: {shown(str(error), 300)}"
    except Exception as error:  # noqa: BLE001
        return f"raised {type(error).__name__} instead of TypeError: {shown(str(error), 300)}"
    return "accepted an unknown keyword argument"


def takes_any_keyword(target):
    return any(p.kind == "var_keyword" for p in target.params)


def cases_of(target):
    """(target, parameter) pairs of one callable; None: the unknown keyword, which a callable
    with **kwargs takes (Module.__call__ passes it on to forward())."""
    return ([] if takes_any_keyword(target) else [(target, None)]) + [
        (target, p) for p in target.params
        if p.type.name not in ("Any", "object") or (target.name, p.name) in ANY_CANDIDATES]


def child_cases(api, module_name):
    """(target, parameter) pairs of one module, in a fixed order."""
    return [case for target in targets_of(api) if target.module == module_name
            for case in cases_of(target)]


# --------------------------------------------------------------------------------------------
# Rules: each test below checks one of them over every callable.


def rule_of(param, kind):
    """The argument rule a call exercises, from the parameter type and the value's kind."""
    if param.type.name in ("bool", "float") and kind == "type":
        return f"{param.type.name} parameter"
    members = param.type.args if param.type.name in ("|", "Optional") else (param.type,)
    if kind == "value" and any(member.name == "int" for member in members):
        return "int out of range"
    return "wrong type" if kind == "type" else "wrong value"


def run_module(module_name):
    """All outcomes of one module's calls; a crash or a hang becomes the outcome of its call."""
    outcomes, start = [], 0
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    while True:
        stdout, stderr, failure = run_child_process(
            [sys.executable, __file__, module_name, str(start)], env)
        lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
        outcomes += [line for line in lines if "problem" in line]
        if failure is None and lines and lines[-1].get("done"):
            return outcomes
        if not lines:
            raise AssertionError(f"the fuzz child for {module_name} failed before any call: "
                                 f"{failure or 'no output'}\n{stderr[-2000:]}")
        last, said = lines[-1], f": {stderr[-300:]}" if stderr.strip() else ""
        if last.get("done"):
            outcomes.append(dict(outcomes[-1], problem=f"{failure} at exit, after every call "
                                                       f"answered{said}"))
            return outcomes
        where = "" if last.get("start") else " after this call answered"
        outcomes.append(dict(last, problem=f"{failure}{where}{said}"))
        start = last["case"] + 1


def run_child_process(command, env):
    """(stdout, stderr, failure) of one child; failure is None, a crash, or a hang: nothing
    printed for CALL_TIMEOUT_S, when the child is killed."""
    with tempfile.TemporaryFile() as errors, \
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, env=env, cwd=ROOT,
                             preexec_fn=limit_memory) as child, \
            selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        chunks, hung = [], False
        while True:
            if not selector.select(timeout=CALL_TIMEOUT_S):
                hung = True
                child.kill()
                break
            chunk = os.read(child.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        returncode = child.wait()
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
    failure = f"hung (no answer within {CALL_TIMEOUT_S} s)" if hung else crash_of(returncode)
    return b"".join(chunks).decode(errors="replace"), stderr, failure


def limit_memory():
    """In the child, before it runs: cap its memory (CHILD_MEMORY_BYTES)."""
    resource.setrlimit(resource.RLIMIT_DATA, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))


def crash_of(returncode):
    if returncode == 0:
        return None
    if returncode < 0:
        return f"crashed (signal {signal.Signals(-returncode).name})"
    return f"crashed (exit status {returncode})"


@pytest.fixture(scope="module")
def outcomes():
    modules = sorted({t.module for t in targets_of(load_schema())})
    with ThreadPoolExecutor(max_workers=len(modules)) as pool:
        return [outcome for found in pool.map(run_module, modules) for outcome in found]


def problems(outcomes, keep):
    """The problems of the outcomes keep() selects: each (callable, parameter, rule) once,
    with its first bad value."""
    seen, lines = set(), []
    for outcome in outcomes:
        key = (outcome["target"], outcome["param"], outcome["rule"])
        if outcome["problem"] and keep(outcome) and key not in seen:
            seen.add(key)
            lines.append(f"{outcome['target']}({outcome['param']}={outcome['value']}): "
                         f"{outcome['problem']}")
    return lines


def report(lines):
    if lines:
        pytest.fail(f"{len(lines)} problems:\n" + "\n".join(lines), pytrace=False)


def test_the_fuzz_covers_every_public_callable(outcomes):
    targets = targets_of(load_schema())
    # Only a callable that takes any keyword and whose parameters take anything has no case.
    assert all(takes_any_keyword(t) for t in targets if not cases_of(t))
    expected = {t.qualname for t in targets if cases_of(t)}
    calls = sum(1 for outcome in outcomes if "problem" in outcome)
    print(f"fuzzed {len(expected)} public callables with {calls} calls")
    assert {outcome["target"] for outcome in outcomes} == expected
    assert len(expected) >= 100


def test_no_call_crashes_or_hangs(outcomes):
    report(problems(outcomes, lambda o: o["problem"].startswith(("crashed", "hung"))))


RULES = [
    pytest.param("unknown keyword", id="unknown-keyword-is-a-TypeError-naming-it"),
    pytest.param("wrong type", id="wrong-type-is-a-TypeError-naming-the-parameter"),
    pytest.param("wrong value", id="wrong-value-is-a-ValueError-naming-the-parameter"),
    pytest.param("int out of range", id="int-out-of-range-is-a-ValueError-naming-the-parameter"),
    pytest.param("bool parameter", id="bool-parameter-takes-only-a-bool"),
    pytest.param("float parameter", id="float-parameter-names-itself-on-a-wrong-type"),
]


@pytest.mark.parametrize("rule", RULES)
def test_every_callable_follows_the_argument_rule(outcomes, rule):
    report(problems(outcomes, lambda o: o["rule"] == rule))


NO_ACCELERATOR = "no accelerator is available"


def test_no_bad_argument_is_answered_with_no_accelerator(outcomes):
    """Arguments are checked before the device is needed, so without a GPU a bad argument gets
    the error a GPU machine gives, never "no accelerator is available" (on a GPU machine this
    holds trivially)."""
    seen, lines = set(), []
    for outcome in outcomes:
        message = outcome.get("message") or ""
        key = (outcome["target"], outcome["param"], outcome["rule"])
        if NO_ACCELERATOR in message and key not in seen:
            seen.add(key)
            lines.append(f"{outcome['target']}({outcome['param']}={outcome['value']}): "
                         f"answered {message}")
    report(lines)


def test_untyped_parameters_with_candidates_are_fuzzed(outcomes):
    """ANY_CANDIDATES names parameters that exist, and each is called."""
    api = load_schema()
    declared = {(t.name, p.name) for t in targets_of(api) for p in t.params}
    assert set(ANY_CANDIDATES) <= declared
    called = {(o["target"].rsplit(".", 1)[-1], o["param"]) for o in outcomes}
    assert set(ANY_CANDIDATES) <= called


if __name__ == "__main__":
    run_child(sys.argv[1], int(sys.argv[2]))
