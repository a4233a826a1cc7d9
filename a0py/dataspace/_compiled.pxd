# Declarations the compiled build (_compiled.pyx, which includes the index's
# four files and the codec) uses beyond what Cython declares for it.

from cpython.ref cimport PyObject, Py_XDECREF
from libc.string cimport memcpy

cdef extern from "Python.h":
    # Take a container out of the cyclic GC's lists. Safe for the tuples the
    # index keeps as bag keys: they hold only values, which cannot reach back
    # to any container, so no reference cycle can pass through them.
    void PyObject_GC_UnTrack(object)
    PyObject** PySequence_Fast_ITEMS(object)
    void Py_SET_SIZE(object, Py_ssize_t)


cdef inline void _truncate_list(list l):
    # Empty ``l`` in place but keep its storage (list.clear() frees it). The
    # size is set to 0 before the items are released, so the list is
    # consistent whatever their release runs.
    cdef Py_ssize_t n = len(l)
    cdef Py_ssize_t i
    cdef PyObject** items = PySequence_Fast_ITEMS(l)
    Py_SET_SIZE(l, 0)
    for i in range(n):
        Py_XDECREF(items[i])


cdef inline long long _double_bits(double x):
    # The IEEE-754 bit pattern of ``x``: what packing it with struct's "<d"
    # and unpacking that with "<q" gives.
    cdef long long bits
    memcpy(&bits, &x, sizeof(bits))
    return bits


cdef inline double _bits_double(unsigned long long bits) noexcept:
    # The double whose IEEE-754 bit pattern is ``bits``: what unpacking the
    # 8 bytes with struct's ">d" gives.
    cdef double x
    memcpy(&x, &bits, sizeof(x))
    return x


cdef extern from "Python.h":
    # ``v`` (an int) as a C long long; sets ``*overflow`` instead of raising
    # when it does not fit (the codec then takes the general path).
    long long _as_longlong "PyLong_AsLongLongAndOverflow" (object v, int* overflow) except? -1


cdef extern from "Python.h":
    # The codec's growable buffer (_codec.py, _Buffer) and its bytes.
    void* _mem_alloc "PyMem_Malloc" (size_t n)
    void* _mem_realloc "PyMem_Realloc" (void* p, size_t n)
    void _mem_free "PyMem_Free" (void* p)
    bytes _bytes_of "PyBytes_FromStringAndSize" (const char* s, Py_ssize_t n)
