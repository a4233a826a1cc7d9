"""The PySpark source tests share the session-scoped ``spark`` fixture of
tests/conftest.py (one SparkSession per run; the quick start's Spark snippet uses
it too)."""
