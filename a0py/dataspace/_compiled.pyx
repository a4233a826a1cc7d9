# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, auto_pickle=False
# cython: initializedcheck=False
"""The compiled build of the dataspace skeleton index: ``a0py.dataspace._compiled``.

The algorithm is written once, in Cython's pure-Python mode, in
``a0py/dataspace/_skeleton.py``; this module compiles that same source (the
interpreted build is that file imported as a module under CPython). See
docs/dataspace.md, "Two builds".
"""

include "_skeleton.py"
