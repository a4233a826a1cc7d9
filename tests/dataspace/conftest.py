"""Fixtures of the dataspace tests."""

import pytest
from helpers.dataspace import compiled, interpreted


@pytest.fixture(params=["compiled", "interpreted"])
def mod(request):
    """Each build of the one skeleton-index source: compiled
    ``a0py.dataspace._compiled`` and interpreted ``a0py.dataspace._interpreted``. A missing compiled build
    fails the test (it is part of ``make test``), never skips it."""
    if request.param == "interpreted":
        return interpreted
    if compiled is None:
        pytest.fail("a0py.dataspace._compiled is not built")
    return compiled


