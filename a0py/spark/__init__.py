"""Recordings, replay and the ``a0`` Spark data source.

* :class:`Recorder` drains live topics into MCAP segments (``a0py record``);
* :func:`read_table` reads recordings (or arenas) into a ``pyarrow.Table``;
* :func:`register` registers the ``a0`` source with a SparkSession (it is
  also registered automatically through the ``pyspark_a0`` module);
* :class:`Player` publishes a recording back into live topics (``a0py play``);
* :func:`bag_info` describes recordings (``a0py bag info``);
* :func:`session` gives a SparkSession with the JVM reader's jar
  (:func:`jar_path`) on its classpath, and :func:`reader_in_use` says which
  reader ``spark.read.format("a0")`` uses (docs/spark.md "Two readers").

PySpark is imported only by :func:`register` and the source itself, so
recording and replay need neither Spark nor Java.
"""

from .errors import DataLossError, RecordingError, RecordingFormatError, RecordingOptionError

_LAZY = {
    "Recorder": ("._recorder", "Recorder"),
    "Player": ("._player", "Player"),
    "bag_info": ("._baginfo", "bag_info"),
    "read_table": ("._parts", "read_table"),
    "SegmentWriter": ("._writer", "SegmentWriter"),
    "jar_path": ("._jvm", "jar_path"),
    "session": ("._jvm", "session"),
    "reader_in_use": ("._jvm", "reader_in_use"),
}

__all__ = ["DataLossError", "Player", "Recorder", "RecordingError", "RecordingFormatError",
           "RecordingOptionError", "SegmentWriter", "bag_info", "jar_path", "read_table", "reader_in_use",
           "register", "session"]


def register(spark):
    """Registers the ``a0`` data source with ``spark`` (a SparkSession), so
    ``spark.read.format("a0")`` and ``spark.readStream.format("a0")`` work
    even where ``pyspark_a0`` is not importable by PySpark's lookup; and the
    same Python source as ``a0.python``, which names it even where the JVM
    reader's jar has the name ``a0`` (see :func:`session`)."""
    from .datasource import A0DataSource, A0PythonDataSource

    spark.dataSource.register(A0DataSource)
    spark.dataSource.register(A0PythonDataSource)
    return A0DataSource


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module, __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'a0py.spark' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
