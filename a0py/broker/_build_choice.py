"""Which build of the broker's engine and framing the package uses.

The compiled ``a0py.broker._compiled`` when it is built (``engine_build`` and
``framing_build`` are both that module); otherwise the interpreted ``a0py.broker.engine``
and ``a0py.broker.framing`` (the same sources, run by CPython: several times slower), so a
source checkout that has not run the build still works. ``COMPILED`` says which one was
loaded; the tests require the compiled one.
"""

try:
    import a0py.broker._compiled as engine_build

    framing_build = engine_build
    COMPILED = True
except ImportError:  # pragma: no cover - only in an unbuilt checkout
    from a0py.broker import engine as engine_build
    from a0py.broker import framing as framing_build

    COMPILED = False

__all__ = ["COMPILED", "engine_build", "framing_build"]
