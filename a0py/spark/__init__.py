"""The ``a0`` Spark data source: recordings and arenas as Spark rows.

* :func:`register` registers the ``a0`` source with a SparkSession (it is
  also registered automatically through the ``pyspark_a0`` module), so
  ``spark.read.format("a0")`` and ``spark.readStream.format("a0")`` work;
* :func:`read_table` reads recordings (or arenas) into a ``pyarrow.Table``,
  the same rows without Spark.
* :func:`session` gives a SparkSession with the JVM reader's jar
  (:func:`jar_path`) on its classpath, and :func:`reader_in_use` says which
  reader ``spark.read.format("a0")`` uses (docs/spark.md "Two readers").

The source is built of small modules: :mod:`.options` (read options),
:mod:`.predicate` (pushdown), :mod:`.planning` (partitions),
:mod:`.batches` (Arrow batches), :mod:`.arenas` (arenas and live topics),
:mod:`.part_reader` (one partition), :mod:`.datasource`, :mod:`.topic_stream`
and :mod:`.file_stream` (PySpark's batch source, and its streams of live
topics and of recordings). Recordings themselves (recorder,
player, MCAP reading and writing) are :mod:`a0py.recording`'s, which needs
no Spark; PySpark is imported only by :func:`register` and the source.
"""

from ..recording.errors import RecordingError, RecordingFormatError, RecordingOptionError
from .errors import DataLossError
from .registration import register

# Moved to a0py.recording; still importable from here.
_MOVED = ("Recorder", "Player", "bag_info", "SegmentWriter")
_JVM = ("jar_path", "session", "reader_in_use", "JarMissingWarning")

__all__ = ["DataLossError", "RecordingError", "RecordingFormatError", "RecordingOptionError", "read_table",
           "JarMissingWarning", "jar_path", "reader_in_use", "register", "session"]


def __getattr__(name):
    if name == "read_table":  # loaded on first use: it needs pyarrow
        from .part_reader import read_table

        return read_table
    if name in _JVM:  # the JVM reader's jar and session helpers
        from . import _jvm

        return getattr(_jvm, name)
    if name in _MOVED:
        from .. import recording

        return getattr(recording, name)
    raise AttributeError(f"module 'a0py.spark' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), "read_table", *_MOVED, *_JVM})
