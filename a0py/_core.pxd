# The binding's classes, for other Cython modules that cimport them.
from libc.stdint cimport uint8_t, uint64_t

from .includes.a0_err cimport a0_err_t
from posix.time cimport timespec

from .includes.a0_transport cimport a0_locked_t, a0_read_t, a0_transport_t


cdef class Arena:
    cdef uint8_t* base
    cdef uint64_t size
    cdef int fd
    cdef object _kind
    cdef object _name
    cdef Py_ssize_t exports
    cdef Py_ssize_t locks_held
    cdef Py_ssize_t busy
    cdef bint deadman_held
    cdef bint closing
    cdef object __weakref__
    cdef int _check_open(self) except -1
    cdef _unmap(self)
    cdef _maybe_unmap(self)


cdef class Transport:
    cdef a0_transport_t t
    cdef readonly Arena arena
    cdef LockedTransport _locked
    cdef bint _view_open
    cdef int _raise_read(self, a0_err_t err) except -1
    cdef int _wait_readable(self, timespec* deadline) except -1
    cdef object _read_one(self)
    cdef object _read_one_open(self)
    cdef list _read_many_open(self, Py_ssize_t limit)
    cdef int _acquire(self, a0_locked_t* lk) except -1
    cdef a0_err_t _release(self, a0_locked_t lk, bint commit=*) except *
    # For compiled modules that write frames in place (a0py.bridge._ingest):
    # between _acquire and _release, a frame of `size` bytes after the newest
    # (evicting the oldest as needed), and the largest frame this arena takes.
    cdef a0_err_t _alloc(self, a0_locked_t lk, uint64_t size, uint8_t** data) noexcept nogil
    cdef uint64_t _max_frame_data(self) noexcept nogil
    # Raises the A0Error of a core error code, naming `what` and the arena.
    cdef int _raise_for(self, a0_err_t err, str what) except -1


cdef class ReadView:
    cdef Transport tr
    cdef a0_read_t r
    cdef object _view
    cdef timespec deadline
    cdef int has_deadline  # 1 deadline, 0 none (wait forever), -1 don't wait
    cdef object timeout
    cdef int state  # 0 new, 1 entered, 2 done


cdef class LockedTransport:
    cdef Transport tr
    cdef a0_locked_t lk
    cdef list views
    cdef bint active
    cdef uint64_t generation
    cdef object _wrap(self, uint8_t* data, uint64_t size, bint writable, uint64_t seq)
    cdef _release_evicted(self)
    cdef _drop_views(self)
    cdef int _check(self) except -1


cdef class Frame:
    cdef LockedTransport owner
    cdef uint64_t generation
    cdef readonly uint64_t seq
    cdef uint8_t* ptr
    cdef readonly uint64_t size
    cdef object _view


cdef class Deadman:
    cdef readonly Arena arena


cdef class LayoutHook:
    # A compiled layout cache pub() asks first (a0py.proto._ndarray.ArrayLayouts):
    # the prefix to write before `size` bytes at `data` (the value's own memory),
    # or None for a value whose layout it does not know.
    cdef object known(self, object value, const char** data, Py_ssize_t* size)


cdef class ArrayHook:
    # A compiled pkt.array() tried first (a0py.proto._ndarray.PacketArrays):
    # the array of the payload of `size` bytes at `data`, kept alive by `owner`
    # (its base), or None to leave it to the typing's array(pkt).
    cdef object view(self, object owner, const char* data, Py_ssize_t size)


cdef class PacketTyping:
    cdef public ArrayHook array_hook
