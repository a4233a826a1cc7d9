# cython: language_level=3, auto_pickle=False
"""The compiled build of the broker's engine: ``a0py.broker._compiled``.

The engine (``engine.py``) and the term helpers it calls on every item (``terms.py``)
are written once, in Cython's pure-Python mode; this module includes both, so Cython
compiles them into one extension module (the engine's classes become extension types
with C fields, and its calls to the term helpers C calls). Imported as they are, the
same files are the interpreted build (``a0py.broker.engine``), which the tests hold this
one to. ``a0py.broker._impl`` picks the build. See docs/broker.md, "The engine".

Bounds and wraparound checks stay on: the engine indexes items handed to
:meth:`Engine.apply` by its callers, which it must refuse cleanly, not read past.
"""

include "terms.py"
include "engine.py"
