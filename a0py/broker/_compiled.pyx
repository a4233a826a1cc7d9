# cython: language_level=3, auto_pickle=False
"""The compiled build of the broker's engine and framing: ``a0py.broker._compiled``.

The engine (``engine.py``), the term helpers it calls on every item (``terms.py``) and
the frame codec (``framing.py``) are written once, in Cython's pure-Python mode; this
module includes all three, so Cython compiles them into one extension module (the
engine's classes become extension types with C fields, and its calls to the term helpers
C calls; the framing reads and writes bytes with C integers). Imported as they are, the
same files are the interpreted builds (``a0py.broker.engine``, ``a0py.broker.framing``),
which the tests hold this one to. ``a0py.broker._build_choice`` picks the build. See
docs/broker.md, "The engine".

Bounds and wraparound checks stay on: the engine indexes items handed to
:meth:`Engine.apply` by its callers, and the framing reads frames from shared memory;
both must refuse bad input cleanly, not read past it.
"""

include "terms.py"
include "engine.py"
include "framing.py"
