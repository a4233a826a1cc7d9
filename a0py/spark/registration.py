"""Registering the ``a0`` Python data source with a SparkSession by hand (PySpark
also finds it on its own through ``pyspark_a0``). Its own module so that the
package and the JVM session helpers share it without importing each other."""


def register(spark):
    """Registers the ``a0`` data source with ``spark`` (a SparkSession), so
    ``spark.read.format("a0")`` and ``spark.readStream.format("a0")`` work
    even where ``pyspark_a0`` is not importable by PySpark's lookup; and the
    same Python source as ``a0.python``, which names it even where the JVM
    reader's jar has the name ``a0`` (see :func:`session`)."""
    from .datasource import A0DataSource, A0PythonDataSource

    for source in (A0DataSource, A0PythonDataSource):
        _register_once(spark, source)
    return A0DataSource


def _register_once(spark, source):
    """Registers ``source`` unless a Python source of its name already is:
    PySpark's own lookup registers ``pyspark_a0``'s at the session's start
    where that module is importable, and a second registration of a name is
    an error in PySpark 4."""
    try:
        spark.dataSource.register(source)
    except Exception as e:  # pyspark's AnalysisException; other errors are raised again
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
            raise


__all__ = ["register"]
