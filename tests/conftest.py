"""Suite-wide settings and the fixtures every layer uses.

- Hypothesis profiles (bounded under CI).
- ``root``: a shared-memory root of the test's own (``shm:PREFIX``, in
  ``A0PY_ROOT`` for the test and its children), every topic in it removed
  afterwards; the arena size it sets comes from the ``arena_size`` fixture,
  which a layer's conftest.py (or a module) overrides.
- ``shm_name``: a shared-memory object name of the test's own, removed after.
- ``spawn``: starts forked children; any still alive at teardown is SIGKILLed.
- ``bounded`` (autouse): fails a test that runs past ``time_limit_s`` seconds
  (SIGALRM) instead of hanging the suite; off where ``time_limit_s`` is None
  (the default), on in the layers whose conftest.py sets it.

A layer's own fixtures live in its conftest.py; plain helpers in tests/helpers/.
"""

import os
import signal
import uuid

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=150, deadline=None)
settings.register_profile("thorough", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def arena_size():
    """The ``A0PY_ARENA_SIZE`` that ``root`` sets (None: unset, the defaults apply)."""
    return "256k"


@pytest.fixture
def root(monkeypatch, arena_size):
    """A shared-memory root of this test's own, ``shm:PREFIX`` (children inherit it
    through ``A0PY_ROOT``); the size settings of the environment cleared; every
    topic in it removed afterwards."""
    from a0py.proto import topic as tp

    spec = f"shm:a0pyt-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("A0PY_ROOT", spec)
    for var in ("A0PY_TOPIC_SIZES", "A0PY_ARENA_SIZE_PUBSUB", "A0PY_ARENA_SIZE_LOG",
                "A0PY_MULTIWAIT"):
        monkeypatch.delenv(var, raising=False)
    if arena_size is None:
        monkeypatch.delenv("A0PY_ARENA_SIZE", raising=False)
    else:
        monkeypatch.setenv("A0PY_ARENA_SIZE", arena_size)
    yield spec
    for name in tp.list_topics(spec):
        tp.unlink_topic(tp.Topic(name, root=spec))
    tp.close_arenas()


@pytest.fixture
def shm_name():
    """A shared-memory object name of this test's own (no leading slash), removed
    afterwards whatever the test left there."""
    from a0py import Arena

    name = f"a0pyt-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    yield name
    Arena.unlink_shm(name)


@pytest.fixture
def spawn():
    """Starts forked children (``spawn(target, *args)``); any still alive at
    teardown is SIGKILLed."""
    from helpers.procs import CTX, JOIN_S

    started = []

    def start(target, *args):
        p = CTX.Process(target=target, args=args, daemon=True)
        p.start()
        started.append(p)
        return p

    yield start
    for p in started:
        if p.is_alive():
            os.kill(p.pid, signal.SIGKILL)
        p.join(JOIN_S)


@pytest.fixture
def time_limit_s():
    """Seconds a test may run before ``bounded`` fails it (None: no bound)."""
    return None


class TestTookTooLong(Exception):
    pass


@pytest.fixture(autouse=True)
def bounded(time_limit_s):
    """Fails the test (instead of hanging the suite) past ``time_limit_s`` seconds."""
    if time_limit_s is None:
        yield
        return

    def expired(signum, frame):
        raise TestTookTooLong(f"test still running after {time_limit_s} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(time_limit_s)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
