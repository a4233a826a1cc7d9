"""The JVM reader of the ``a0`` source: where its jar is, a SparkSession that
has it, and which reader a read used.

The jar (``a0py/spark/jars/a0py-spark.jar``, built by ``make jvm`` from
``jvm/``) holds a Spark DataSource V2 registered under the same short name
``a0``. Spark resolves a short name to a JVM ``DataSourceRegister`` before
a Python data source, so where the jar is on the classpath
``spark.read.format("a0")`` reads recordings in the JVM; the reads only the
Python source knows (live topics, file arenas, JSON payloads, streams) are
handed by the JVM source to the Python one. Without the jar the Python
source reads everything.
"""

from __future__ import annotations

import os
import sys
import warnings

from ..recording.errors import RecordingOptionError

JAR_NAME = "a0py-spark.jar"
JVM_CLASS = "a0py.spark.jvm.A0Source"


def jar_path():
    """The path of the bundled jar of the JVM reader.

    Raises :class:`RecordingOptionError` when the package has no jar (a
    checkout where ``make jvm`` has not run)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jars", JAR_NAME)
    if not os.path.isfile(path):
        raise RecordingOptionError(f"{path}: the a0py JVM reader is not built (run `make jvm` in the checkout; "
                                   "a wheel carries it)")
    return path


class JarMissingWarning(UserWarning):
    """The JVM reader's jar is not built: the Python reader serves ``format("a0")``."""


def session_jars(conf):
    """``(the jar or None, the spark.jars list)`` for :func:`session`: the
    jars named in ``conf["spark.jars"]`` (popped) and the JVM reader's; None
    and a :class:`JarMissingWarning` when it is not built."""
    jars = [j for j in str(conf.pop("spark.jars", "")).split(",") if j]
    try:
        jar = jar_path()
    except RecordingOptionError as e:
        warnings.warn(f"{e}; the Python reader serves format('a0') meanwhile (same rows, slower)",
                      JarMissingWarning, stacklevel=3)
        return None, jars
    if jar not in jars:
        jars.append(jar)
    return jar, jars


def session(master="local[2]", app_name="a0py", **conf):
    """A SparkSession (``getOrCreate``) with the JVM reader's jar on the driver
    and executor classpaths (``spark.jars``, appended to any given in
    ``conf``) and the Python ``a0`` source registered; ``conf`` holds Spark
    settings by their names, e.g. ``session(**{"spark.executor.memory":
    "2g"})``. A standalone ``master`` (``spark://HOST:PORT``) ships the jar
    to the executors; they need no a0py install for batch reads of
    recordings. A ``local`` master runs its Python workers with this
    interpreter (``PYSPARK_PYTHON`` is set to it) unless ``PYSPARK_PYTHON``
    or ``spark.pyspark.python`` names another.

    Without the jar (an install built where no ``javac`` or pyspark was at
    hand, e.g. a plain ``pip install 'a0py[spark]'`` from a checkout), warns
    once (:class:`JarMissingWarning`, naming how to build it) and returns a
    session where the Python reader serves ``format("a0")``: the same rows
    and columns, slower.

    Raises :class:`RecordingOptionError` when a SparkContext already runs in
    this process without the jar that is there (the classpath of a running
    JVM cannot change: stop it first)."""
    from pyspark.sql import SparkSession

    from .registration import register

    jar, jars = session_jars(conf)
    if master.startswith("local") and "spark.pyspark.python" not in conf and not os.environ.get("PYSPARK_PYTHON"):
        # The Python workers run this interpreter (its venv has a0py), not the
        # first python3 on PATH, which a script run as .venv/bin/python would
        # get: PySpark takes the workers' interpreter from PYSPARK_PYTHON.
        os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder.master(master).appName(app_name)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    if jar is not None and reader_in_use(spark) != "jvm":
        raise RecordingOptionError("a SparkContext already runs in this process without the a0py jar; stop it "
                                   "(spark.stop()) before a0py.spark.session(), or start it with spark.jars="
                                   f"{jar}")
    register(spark)
    return spark


def reader_in_use(spark_or_df):
    """``"jvm"`` or ``"python"``: for a DataFrame, the reader its plan scans
    with (a Python data source's scan is marked ``(Python)`` in the physical
    plan, the JVM reader's is a ``BatchScan a0``); for a SparkSession, the
    reader ``spark.read.format("a0")`` resolves to for recordings."""
    from pyspark.sql import DataFrame

    if isinstance(spark_or_df, DataFrame):
        plan = spark_or_df._jdf.queryExecution().executedPlan().toString()
        if "(Python)" in plan:
            return "python"
        if "a0 (JVM)" in plan:
            return "jvm"
        raise RecordingOptionError("the DataFrame's plan scans no a0 source")
    spark = spark_or_df
    jvm = spark._jvm
    try:
        cls = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            "a0", spark._jsparkSession.sessionState().conf())
    except Exception:  # noqa: BLE001 - py4j raises its own classes; nothing found means Python
        return "python"
    return "jvm" if cls.getName() == JVM_CLASS else "python"


def read_metrics(df):
    """Runs ``df``'s plan in the JVM (no row goes to Python) and returns what
    its JVM reader scans read from disk, summed: ``{"chunkBytesRead": bytes
    of MCAP chunk records, "chunksRead": chunks}`` (empty for a plan without
    one), as Spark shows them with the scan in its UI."""
    plan = df._jdf.queryExecution().executedPlan()
    plan.execute().count()
    out = {}
    todo = [plan]
    while todo:
        node = todo.pop()
        if node.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
            todo.append(node.executedPlan())
            continue
        metrics = node.metrics()
        for name in ("chunkBytesRead", "chunksRead"):
            found = metrics.get(name)
            if found.isDefined():
                out[name] = out.get(name, 0) + found.get().value()
        children = node.children().iterator()
        while children.hasNext():
            todo.append(children.next())
    return out
