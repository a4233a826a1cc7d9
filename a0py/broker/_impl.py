"""Which build of the broker's engine the package uses.

The compiled ``a0py.broker._compiled`` when it is built; otherwise the interpreted
``a0py.broker.engine`` (the same source, run by CPython: several times slower), so a
source checkout that has not run the build still works. ``COMPILED`` says which one was
loaded; the tests require the compiled one.
"""

try:
    import a0py.broker._compiled as impl

    COMPILED = True
except ImportError:  # pragma: no cover - only in an unbuilt checkout
    from a0py.broker import engine as impl

    COMPILED = False

__all__ = ["COMPILED", "impl"]
