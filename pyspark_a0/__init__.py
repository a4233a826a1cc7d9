"""The ``a0`` PySpark data source, found by PySpark's automatic registration
(it imports every ``pyspark_*`` module on the path and registers its
``DefaultSource``). See :mod:`a0py.spark.datasource`."""

from a0py.spark.datasource import A0DataSource as DefaultSource

__all__ = ["DefaultSource"]
