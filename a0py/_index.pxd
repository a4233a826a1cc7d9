# Declarations the compiled build of a0py/dataspace/_skeleton.py uses beyond
# what Cython declares for it.

cdef extern from "Python.h":
    # Take a container out of the cyclic GC's lists. Safe for the tuples the
    # index keeps as bag keys: they hold only values, which cannot reach back
    # to any container, so no reference cycle can pass through them.
    void PyObject_GC_UnTrack(object)
