"""a0py's benchmarks. Scripts run from the repository root
(`python bench/transport.py`, ...); the comparison with other libraries is
the package `bench.peers`, run as `python -m bench.peers`. Nothing here is
installed with a0py, and nothing here asserts anything about speed."""
