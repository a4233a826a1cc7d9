# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, auto_pickle=False
# cython: initializedcheck=False
"""The compiled build of the dataspace skeleton index and byte codec:
``a0py.dataspace._compiled``.

The index is written once, in Cython's pure-Python mode, in four files, one
concept each, and the codec in a fifth; this module includes all five, in
the order they depend on each other, so Cython compiles them as one
extension module (their cdef classes and functions call each other
directly, as C). The interpreted build is the same files imported as
modules (``_interpreted.py``); each file imports its siblings only ``if not
cython.compiled``, since here they are one module already. See
docs/dataspace.md, "Two builds".
"""

include "_canonical.py"
include "_skeleton.py"
include "_trie.py"
include "_index.py"
include "_codec.py"
