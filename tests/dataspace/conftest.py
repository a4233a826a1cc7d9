"""Fixtures of the dataspace tests."""

import pytest


@pytest.fixture(params=["compiled", "interpreted"])
def mod(request):
    """Each build of the one skeleton-index source: compiled
    ``a0py.dataspace._compiled`` and interpreted ``a0py.dataspace._interpreted``. A missing compiled build
    fails the test (it is part of ``make test``), never skips it."""
    if request.param == "interpreted":
        from a0py.dataspace import _interpreted

        return _interpreted
    try:
        from a0py.dataspace import _compiled
    except ImportError:
        pytest.fail("a0py.dataspace._compiled is not built")
    return _compiled


