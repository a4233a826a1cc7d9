"""Which build of the skeleton code the package uses.

The compiled ``a0py.dataspace._compiled`` when it is built; otherwise the interpreted
``a0py.dataspace._interpreted`` (same algorithm, about an order of magnitude
slower), so a source checkout that has not run the build still works.
``COMPILED`` says which one was loaded; the tests require the compiled one.
"""

try:
    import a0py.dataspace._compiled as build

    COMPILED = True
except ImportError:  # pragma: no cover - only in an unbuilt checkout
    from a0py.dataspace import _interpreted as build

    COMPILED = False

__all__ = ["COMPILED", "build"]
