"""Fixtures of the PySpark source tests."""

import os

import pytest
from helpers.procs import REPO


@pytest.fixture(scope="session")
def spark():
    """One SparkSession for the whole run (``local[2]`` on loopback; see
    NOTES "PySpark 4.x"). The ``a0`` source is found by PySpark's automatic
    lookup of ``pyspark_a0`` (the checkout is put on the workers' path), not
    registered by hand. A missing PySpark or Java fails the tests that use
    it (``make test`` installs the spark extra), never skips them."""
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
        # Short queries on two shared cores: the quick JIT tier compiles less.
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
