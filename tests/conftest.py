"""Suite-wide settings: Hypothesis profiles (bounded under CI); shared fixtures."""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=150, deadline=None)
settings.register_profile("thorough", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def system():
    """An actor system, shut down after the test."""
    from a0py.actor import ActorSystem

    s = ActorSystem()
    yield s
    s.shutdown()


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
