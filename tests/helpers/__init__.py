"""Plain helpers shared by the test layers (no fixtures: those live in the
``conftest.py`` files). Imported by explicit names, e.g.
``from helpers.procs import CTX, recv, join_ok``; ``tests/`` is on the path
through ``pythonpath`` in pyproject.toml's pytest settings.

- :mod:`helpers.procs`: the checkout's paths, child processes (fork context,
  bounded joins and receives, waits), subprocess environments.
- :mod:`helpers.cli`: running the installed ``a0py`` script.
- :mod:`helpers.view`: recordings to view, ``a0py view`` and publisher processes.
- :mod:`helpers.mcap_data`: packets and MCAP segments with known contents.
- :mod:`helpers.cffi_core`: the C core compiled as a cffi extension.
- :mod:`helpers.broker_ops`: what the broker engine's random tests draw from.
- :mod:`helpers.spark_cluster`: a Spark standalone cluster on 127.0.0.1 (also used by
  ``bench/spark.py read``).
"""
