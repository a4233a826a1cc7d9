# cython: language_level=3, boundscheck=False, wraparound=False
"""Array topics, compiled. The read side: a read-only numpy view of a payload
whose header is that of an array layout read before, made without parsing
(ArrayViewer, PacketArrays). The write side: ArrayLayouts, the publisher's
layout hook, which matches an array of a layout published before by its own
fields, so the writer copies its memory after the remembered header.

:mod:`a0py.proto.arrays` parses and checks an ``a0py.NDArray`` header the first
time a layout (dtype, shape, strides) is seen; an :class:`ArrayViewer` keeps the
header's bytes, and every later payload whose bytes up to the data are the same
and whose size is the same is viewed with one ``memcmp`` and one array made
through numpy's C API: no Python parsing, no ``np.frombuffer`` argument
handling (≈ 0.3 µs a read on these machines, more than the rest of a 4 KiB
read).

Why by hand (bench/typed.py, ``small``, one process, 2026-11-26):
``pub(ndarray)`` + ``read_view`` + ``pkt.array()`` of a 4 KiB array took 4.6x a
raw ``pub(bytes)`` + ``read()``, ``pkt.array()`` alone (two Python calls, a slice
comparison, ``np.frombuffer``) more than the whole raw pair; compiled, and called
by ``Packet.array()`` with no Python call between (``array_hook``), it is ≈ 820
instructions and the pair 2.2x (docs/performance.md).

Invariants:

* **Nothing read is trusted**: a payload is viewed only if its header bytes
  are exactly those of a header parsed and checked before
  (:func:`a0py.proto.arrays.parse_array_prefix`) and its size is that
  header's: the same bytes say the same dtype, shape and strides, so the view
  stays inside the payload. Anything else goes back to the checking parser.
* **Read-only, memory-safe**: the array's base is the payload itself (bytes),
  or the object exporting a lent payload's memory (the binding's arena
  buffer, which holds the mapping while it lives, whatever happens to the
  packet's own memoryview); numpy refuses to make the array writable.
* Imported only where numpy is (``a0py.proto.arrays`` falls back to its
  Python viewer when this module or numpy is missing).
"""

cimport numpy as cnp
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.memoryview cimport PyMemoryView_Check, PyMemoryView_FromObject
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from libc.string cimport memcmp, memcpy

from .._core cimport ArrayHook, LayoutHook

cdef extern from "Python.h":
    # The object exporting a memoryview's memory (NULL for raw memory); borrowed.
    PyObject* memoryview_exporter "PyMemoryView_GET_BASE" (object mview)

cdef extern from "numpy/arrayobject.h":
    # Steals the reference to descr (so the caller gives it one).
    object PyArray_NewFromDescr(PyTypeObject* subtype, cnp.PyArray_Descr* descr, int nd, cnp.npy_intp* dims,
                                cnp.npy_intp* strides, void* data, int flags, PyObject* obj)

cnp.import_array()

cdef enum:
    _MAX_DIMS = 64  # numpy 2's NPY_MAXDIMS (numpy 1's is 32: the checking parser allows 32)


# The binding's arena buffer (a zero-copy packet's payload, handed to the hook
# before any memoryview of it is made): it holds the mapping while it lives.
from .._core import _LentBuffer as _lent_type


cdef object _base_of(object payload):
    """The object an array over `payload` keeps: the bytes; the binding's lent
    arena buffer itself; for a memoryview, the object exporting its memory (an
    arena's lent buffer holds the mapping while it lives: the packet's own
    memoryview is released when its block ends), as numpy does for arrays made
    over memoryviews; for anything else a new memoryview, which holds its
    buffer."""
    cdef PyObject* exporter
    if type(payload) is bytes or type(payload) is _lent_type:
        return payload
    if PyMemoryView_Check(payload):
        exporter = memoryview_exporter(payload)
        if exporter != NULL and type(<object>exporter) is not bytearray:
            return <object>exporter
    return PyMemoryView_FromObject(payload)


cdef class ArrayViewer:
    """Views payloads laid out as one array header: ``ArrayViewer(header, size,
    dtype, shape, strides)`` for the header bytes (everything before the array's
    data), the payload size, and what the header says (checked by the caller).
    ``view(payload)``: the read-only array over `payload`, or None if its bytes
    before the data or its size differ."""

    cdef bytes header
    cdef Py_ssize_t size
    cdef cnp.dtype descr
    cdef int ndim
    cdef cnp.npy_intp dims[_MAX_DIMS]
    cdef cnp.npy_intp strides[_MAX_DIMS]

    def __init__(self, bytes header not None, Py_ssize_t size, cnp.dtype dtype not None,
                 tuple shape not None, tuple strides not None):
        cdef Py_ssize_t i
        if len(shape) > _MAX_DIMS or len(strides) != len(shape):
            raise ValueError(f"shape {shape} and strides {strides} are not an array's")
        if PyBytes_GET_SIZE(header) > size:
            raise ValueError("the header is longer than the payload")
        self.header = header
        self.size = size
        self.descr = dtype
        self.ndim = len(shape)
        for i in range(self.ndim):
            self.dims[i] = shape[i]
            self.strides[i] = strides[i]

    cpdef object view(self, object payload):
        """The read-only array over `payload` (bytes, or a memoryview), or None
        if it is not laid out as this viewer's header says."""
        cdef Py_buffer buf
        PyObject_GetBuffer(payload, &buf, PyBUF_SIMPLE)
        try:
            return self.view_at(_base_of(payload), <const char*>buf.buf, buf.len)
        finally:
            PyBuffer_Release(&buf)

    cdef object view_at(self, object owner, const char* data, Py_ssize_t size):
        """The read-only array over the `size` bytes at `data`, which `owner`
        keeps alive (it becomes the array's base), or None if they are not
        laid out as this viewer's header says."""
        cdef Py_ssize_t hlen = PyBytes_GET_SIZE(self.header)
        if size != self.size or memcmp(data, PyBytes_AS_STRING(self.header), hlen) != 0:
            return None
        Py_INCREF(self.descr)  # PyArray_NewFromDescr takes a reference to it
        arr = PyArray_NewFromDescr(
            <PyTypeObject*>cnp.ndarray, <cnp.PyArray_Descr*>self.descr, self.ndim, self.dims,
            self.strides, <char*>data + hlen, 0, NULL)  # flags 0: not writeable
        cnp.set_array_base(<cnp.ndarray>arr, owner)
        return arr


cdef class PacketArrays(ArrayHook):
    """The compiled ``pkt.array()`` of one array topic (its typing's
    ``array_hook``, which ``Packet.array()`` tries first): ``viewer``'s view of
    the payload when it has the layout of the last one parsed, else None (the
    packet then goes to the checking parser, which sets ``viewer`` to the new
    layout's)."""

    cdef public ArrayViewer viewer

    def __init__(self):
        self.viewer = None

    cdef object view(self, object owner, const char* data, Py_ssize_t size):
        cdef ArrayViewer viewer = self.viewer
        if viewer is None:
            return None
        return viewer.view_at(owner, data, size)


cdef enum:
    _MAX_LAYOUTS = 8        # layouts an ArrayLayouts remembers (as the writer's own cache)
    _LAYOUT_MAX_DIMS = 32   # numpy 1's NPY_MAXDIMS: deeper arrays go to the encoder every time


cdef struct _Layout:
    cnp.PyArray_Descr* descr  # compared by identity (a reference held in ArrayLayouts.owned)
    int ndim
    cnp.npy_intp dims[_LAYOUT_MAX_DIMS]
    cnp.npy_intp strides[_LAYOUT_MAX_DIMS]
    Py_ssize_t nbytes
    PyObject* prefix          # bytes (a reference held in ArrayLayouts.owned)


cdef class ArrayLayouts(LayoutHook):
    """The array layouts one publisher has encoded (its writer's
    ``layout_hook``): ``remember(array, prefix)``, called by the encoder once
    it has checked `array` and made its header `prefix`, lets the writer
    publish every later array of the same type, dtype object, shape and
    strides as `prefix` + the array's memory, matched here by reading the
    array's own fields: no encoder call, no buffer export (whose format
    string numpy builds anew each time), no attribute lookup.

    Why (bench/typed.py ``--loop view``, callgrind, 2026-12-07): the writer's
    generic cache (``PacketWriter._remember_layout`` with the dtype as its
    token) cost ≈ 760 instructions a ``pub(ndarray)``: the ``dtype``
    attribute, numpy's buffer export of shape and strides, the key made of
    them and the export's release; here it is ≈ 110, and ``pub(ndarray)``
    costs what ``pub(bytes)`` does (≈ 2,100 instructions against 2,050).

    The dtype is matched by identity, as the writer's token was: an equal
    dtype made anew is another object, and goes to the encoder, which
    remembers it too (at most _MAX_LAYOUTS layouts; later ones are encoded
    every time). The array's memory is one block (C or Fortran order) of the
    layout's size: the same fields say the same."""

    cdef object array_type  # the array class remembered (a new one forgets the others)
    cdef list owned         # the dtypes and prefixes the layouts point to
    cdef int count
    cdef _Layout layouts[_MAX_LAYOUTS]

    def __init__(self):
        self.array_type = None
        self.owned = []
        self.count = 0

    def remember(self, cnp.ndarray array not None, bytes prefix not None):
        """Remembers `array`'s layout (its type, dtype object, shape and
        strides) as published with `prefix`; for an encoder that has checked
        `array`, and whose payload for it depends on nothing else. Returns
        whether it was kept (False: not one block of memory, more than
        _LAYOUT_MAX_DIMS dimensions, or _MAX_LAYOUTS already kept)."""
        cdef _Layout* row
        cdef int ndim = cnp.PyArray_NDIM(array)
        if ndim > _LAYOUT_MAX_DIMS or not (cnp.PyArray_IS_C_CONTIGUOUS(array)
                                           or cnp.PyArray_IS_F_CONTIGUOUS(array)):
            return False
        if type(array) is not self.array_type:
            self.array_type = type(array)
            self.owned = []
            self.count = 0
        if self.count >= _MAX_LAYOUTS:
            return False
        row = &self.layouts[self.count]
        dtype = <object>cnp.PyArray_DESCR(array)
        self.owned.append((dtype, prefix))
        row.descr = cnp.PyArray_DESCR(array)
        row.ndim = ndim
        if ndim:
            memcpy(row.dims, cnp.PyArray_DIMS(array), ndim * sizeof(cnp.npy_intp))
            memcpy(row.strides, cnp.PyArray_STRIDES(array), ndim * sizeof(cnp.npy_intp))
        row.nbytes = cnp.PyArray_NBYTES(array)
        row.prefix = <PyObject*>prefix
        self.count += 1
        return True

    def __len__(self):
        return self.count

    cdef object known(self, object value, const char** data, Py_ssize_t* size):
        cdef _Layout* row
        cdef int i, ndim
        cdef cnp.PyArray_Descr* descr
        cdef size_t span
        if type(value) is not self.array_type or self.count == 0:
            return None
        descr = cnp.PyArray_DESCR(<cnp.ndarray>value)
        ndim = cnp.PyArray_NDIM(<cnp.ndarray>value)
        span = ndim * sizeof(cnp.npy_intp)
        for i in range(self.count):
            row = &self.layouts[i]
            if (row.descr == descr and row.ndim == ndim
                    and (span == 0
                         or (memcmp(row.dims, cnp.PyArray_DIMS(<cnp.ndarray>value), span) == 0
                             and memcmp(row.strides, cnp.PyArray_STRIDES(<cnp.ndarray>value), span) == 0))):
                data[0] = cnp.PyArray_BYTES(<cnp.ndarray>value)
                size[0] = row.nbytes
                return <object>row.prefix
        return None
