"""Recordings, replay and the ``a0`` Spark data source.

* :class:`Recorder` drains live topics into MCAP segments (``a0py record``);
* :func:`read_table` reads recordings (or arenas) into a ``pyarrow.Table``;
* :func:`register` registers the ``a0`` source with a SparkSession (it is
  also registered automatically through the ``pyspark_a0`` module);
* :class:`Player` publishes a recording back into live topics (``a0py play``);
* :func:`bag_info` describes recordings (``a0py bag info``).

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
}

__all__ = ["DataLossError", "Player", "Recorder", "RecordingError", "RecordingFormatError",
           "RecordingOptionError", "SegmentWriter", "bag_info", "read_table", "register"]


def register(spark):
    """Registers the ``a0`` data source with ``spark`` (a SparkSession), so
    ``spark.read.format("a0")`` and ``spark.readStream.format("a0")`` work
    even where ``pyspark_a0`` is not importable by PySpark's lookup."""
    from .datasource import A0DataSource

    spark.dataSource.register(A0DataSource)
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
