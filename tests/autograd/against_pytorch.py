"""What the tests that hold tensorplay to PyTorch's behaviour share."""
import pytest


def same_error(ours, theirs, length=None):
    """ours() raises the type theirs() raises, with a message that starts with PyTorch's (its
    first length characters, where given): ours may go on to name the argument."""
    with pytest.raises(Exception) as expected:
        theirs()
    with pytest.raises(type(expected.value)) as got:
        ours()
    assert str(got.value).startswith(str(expected.value)[:length]), (got.value, expected.value)
