"""TENSORPLAY_CUDA_ALLOC_CONF, parsed strictly, without a GPU (runtime/memory/alloc_conf.pyx;
docs/design.md, "Expandable segments")."""
import pytest

from tensorplay._runtime.memory import alloc_conf

DEFAULTS = {"expandable_segments": False, "graph_expandable_segments": True}


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_means_the_defaults(text):
    assert alloc_conf.parse(text) == DEFAULTS


def test_pairs_set_their_keys_and_leave_the_others_at_their_defaults():
    assert alloc_conf.parse("expandable_segments:True") == {
        "expandable_segments": True, "graph_expandable_segments": True}
    assert alloc_conf.parse(" graph_expandable_segments : False , expandable_segments:True") == {
        "expandable_segments": True, "graph_expandable_segments": False}


def test_an_unknown_key_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match="TENSORPLAY_CUDA_ALLOC_CONF: unknown key "
                                         "'max_split_size_mb'; the keys are expandable_segments, "
                                         "graph_expandable_segments"):
        alloc_conf.parse("max_split_size_mb:128")


@pytest.mark.parametrize("value", ["true", "1", "yes", "", "True2"])
def test_values_are_exactly_true_or_false(value):
    with pytest.raises(ValueError, match=f"expandable_segments must be True or False, got "
                                         f"'{value}'"):
        alloc_conf.parse(f"expandable_segments:{value}")


def test_a_key_without_value_a_key_twice_and_an_empty_entry_are_refused():
    with pytest.raises(ValueError, match="expandable_segments has no value; write "
                                         "expandable_segments:True or expandable_segments:False"):
        alloc_conf.parse("expandable_segments")
    with pytest.raises(ValueError, match="key 'expandable_segments' is given twice"):
        alloc_conf.parse("expandable_segments:True,expandable_segments:False")
    with pytest.raises(ValueError, match=r"entry 1 \(''\) is empty"):
        alloc_conf.parse("expandable_segments:True,")


def test_the_environment_variable_is_the_documented_one():
    assert alloc_conf.ENVIRONMENT_VARIABLE == "TENSORPLAY_CUDA_ALLOC_CONF"
    assert alloc_conf.DEFAULTS == DEFAULTS
