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

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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


@pytest.fixture(scope="session")
def spark():
    """One SparkSession for the whole run (``local[2]`` on loopback; see
    NOTES "PySpark 4.x"), with the JVM reader's jar on its classpath
    (``spark.jars``), so ``format("a0")`` reads recordings in the JVM; the
    Python ``a0`` source is found by PySpark's automatic lookup of
    ``pyspark_a0`` (the checkout is put on the workers' path), not registered
    by hand, and serves what the JVM reader hands over (arenas, live topics,
    JSON payloads, streams). A missing PySpark, Java or jar fails the tests
    that use it (``make test`` installs the spark extra and builds the jar),
    never skips them."""
    import importlib.util
    import shutil
    import sys

    if importlib.util.find_spec("pyspark") is None:
        pytest.fail("pyspark is not installed: pip install -e '.[spark]' (make test does)")
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        pytest.fail("no Java runtime for Spark (Java 17: apt-get install openjdk-17-jre-headless)")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (_REPO, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    from a0py.spark import jar_path

    try:
        jar = jar_path()
    except Exception as e:  # a RecordingOptionError saying to run make jvm
        pytest.fail(str(e))
    session = (
        SparkSession.builder.master("local[2]")
        .appName("a0py-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
        .config("spark.jars", jar)
        # Short queries on two shared cores: the quick JIT tier compiles less.
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
