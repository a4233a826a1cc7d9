"""Fixtures of the actor tests."""

import pytest


@pytest.fixture
def system():
    """An actor system, shut down after the test."""
    from a0py.actor import ActorSystem

    s = ActorSystem()
    yield s
    s.shutdown()


