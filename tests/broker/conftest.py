"""Fixtures of the broker tests."""

import os
import uuid

import pytest


@pytest.fixture
def name():
    """A broker name of this test's own; its request arena removed afterwards."""
    import a0py
    from a0py.broker import wire

    n = f"t{os.getpid()}-{uuid.uuid4().hex[:8]}"
    yield n
    a0py.Arena.unlink_shm(wire.request_arena_name(n))
