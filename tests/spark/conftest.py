"""Fixtures of the PySpark source tests."""

import os

import pytest
from helpers.procs import REPO


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
        p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
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
