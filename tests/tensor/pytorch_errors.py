"""A check shared by the tests of errors that PyTorch words too."""
import pytest

import tensorplay as tp

from tests.peers import import_or_skip


def raises_as_pytorch(call, error, message, theirs=None):
    """call(tp) raises error with message in its text; so does call(torch), with theirs (or
    message) in its text, where PyTorch is installed. call takes the library as its argument."""
    with pytest.raises(error) as raised:
        call(tp)
    assert message in str(raised.value)
    torch = import_or_skip("torch")
    with pytest.raises(error) as expected:
        call(torch)
    assert (message if theirs is None else theirs) in str(expected.value)
