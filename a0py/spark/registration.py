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

    spark.dataSource.register(A0DataSource)
    spark.dataSource.register(A0PythonDataSource)
    return A0DataSource


__all__ = ["register"]
