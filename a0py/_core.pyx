# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Binding of the a0py C core: arenas, the frame transport, the deadman.

A thin layer over csrc/: every blocking call releases the GIL; frame bytes
are handed out as zero-copy memoryviews that are released when the lock is;
C error codes become the exceptions of :mod:`a0py.errors`.
"""

from cpython.buffer cimport (
    PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_FillInfo, PyBuffer_Release, PyObject_GetBuffer,
)
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.exc cimport PyErr_CheckSignals
from libc.errno cimport errno
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcpy, memset
from posix.mman cimport MAP_FAILED, MAP_SHARED, PROT_READ, PROT_WRITE, mmap, munmap
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.unistd cimport close as c_close

from ._a0 cimport *

import errno as _errno
import fcntl
import numbers
import os
import time

import posix_ipc

from .errors import (
    A0OSError,
    A0TimeoutError,
    ArenaCorruptError,
    ArenaFormatError,
    ArenaNotFoundError,
    ArgumentError,
    ClosedError,
    EmptyError,
    FrameTooLargeError,
    LockError,
    NoFrameError,
    SeqNotFoundError,
)

cdef extern from "<stdlib.h>" nogil:
    int posix_memalign(void** memptr, size_t alignment, size_t size)

FORMAT_VERSION = A0_FORMAT_VERSION
HEADER_SIZE = A0_HEADER_SIZE
FRAME_HEADER_SIZE = A0_FRAME_HDR_SIZE
MIN_ARENA_SIZE = A0_MIN_ARENA_SIZE
MAGIC = A0_ARENA_MAGIC

# How long an opener waits for another process to finish creating an arena.
_INIT_WAIT_S = 0.5

_ERR_CLASS = {
    A0_ERR_BAD_MAGIC: ArenaFormatError,
    A0_ERR_BAD_VERSION: ArenaFormatError,
    A0_ERR_BAD_HEADER_SIZE: ArenaFormatError,
    A0_ERR_SIZE_MISMATCH: ArenaFormatError,
    A0_ERR_TOO_SMALL: ArenaFormatError,
    A0_ERR_CORRUPT: ArenaCorruptError,
    A0_ERR_FRAME_TOO_LARGE: FrameTooLargeError,
    A0_ERR_EMPTY: EmptyError,
    A0_ERR_NO_FRAME: NoFrameError,
    A0_ERR_SEQ_NOT_FOUND: SeqNotFoundError,
    A0_ERR_TIMEOUT: A0TimeoutError,
    A0_ERR_BUSY: LockError,
    A0_ERR_DEADLOCK: LockError,
    A0_ERR_NOT_RECOVERABLE: LockError,
    A0_ERR_NOT_LOCKED: LockError,
    A0_ERR_PENDING: LockError,
    A0_ERR_NOT_OWNER: LockError,
}


cdef int _raise(a0_err_t err, str what, const a0_check_info_t* info=NULL) except -1:
    """Raises the exception for a C error code, saying what was being done."""
    cdef int saved_errno = errno
    reason = a0_strerror(err).decode()
    if err == A0_ERR_SYS:
        raise A0OSError(saved_errno, f"{what}: {os.strerror(saved_errno)}")
    msg = f"{what}: {reason}"
    if info != NULL and info.field != NULL:
        field = info.field.decode()
        if field == "magic":
            msg += f" (field magic: expected {info.expected:#018x}, found {info.found:#018x})"
        else:
            msg += f" (field {field}: expected {info.expected}, found {info.found})"
    raise _ERR_CLASS.get(err, ArenaCorruptError)(msg)


cdef inline int _check_err(a0_err_t err, str what) except -1:
    if err:
        _raise(err, what)
    return 0


cdef int _make_deadline(object timeout, timespec* ts) except -1:
    """Fills ts with now + timeout on CLOCK_MONOTONIC; 0 if timeout is None."""
    if timeout is None:
        return 0
    cdef double secs
    if isinstance(timeout, (str, bytes, bool)) or not isinstance(timeout, numbers.Real):
        raise ArgumentError(f"timeout must be a number of seconds or None, not {timeout!r}")
    secs = float(timeout)
    if not secs >= 0:  # also rejects NaN
        raise ArgumentError(f"timeout must be >= 0 seconds, got {timeout!r}")
    if secs > 1e9:
        return 0
    clock_gettime(CLOCK_MONOTONIC, ts)
    cdef long whole = <long>secs
    cdef long nanos = <long>((secs - whole) * 1e9)
    ts.tv_sec += whole
    ts.tv_nsec += nanos
    if ts.tv_nsec >= 1000000000:
        ts.tv_sec += 1
        ts.tv_nsec -= 1000000000
    return 1


cdef uint64_t _as_size(object n, str what) except? 0:
    try:
        value = int(n.__index__())
    except AttributeError:
        raise ArgumentError(f"{what} must be an integer, not {type(n).__name__}") from None
    if value < 0:
        raise ArgumentError(f"{what} must be >= 0, got {value}")
    if value >= 2**63:
        raise ArgumentError(f"{what} is too large: {value}")
    return <uint64_t>value


def _shm_name(name):
    if not isinstance(name, str) or not name.strip("/"):
        raise ArgumentError(f"shared memory name must be a non-empty str, not {name!r}")
    if "\0" in name:
        raise ArgumentError(f"shared memory name may not contain a NUL byte: {name!r}")
    name = "/" + name.lstrip("/")
    if "/" in name[1:]:
        raise ArgumentError(f"shared memory name may not contain '/' after the first: {name!r}")
    if len(name) > 255:
        raise ArgumentError(f"shared memory name too long ({len(name)} > 255)")
    return name


def _check_create_size(size):
    if size is None:
        return None
    value = _as_size(size, "arena size")
    if value < A0_MIN_ARENA_SIZE:
        raise ArgumentError(
            f"arena size must be at least {A0_MIN_ARENA_SIZE} bytes "
            f"({A0_HEADER_SIZE}-byte header + room for a frame), got {value}")
    return value


cdef int _get_buffer(object data, Py_buffer* buf) except -1:
    # Cython declares PyObject_GetBuffer `except -1`: it raises TypeError
    # itself, so a `< 0` test after it never ran and callers got TypeError
    # instead of the documented ArgumentError.
    try:
        PyObject_GetBuffer(data, buf, PyBUF_SIMPLE)
    except TypeError:
        raise ArgumentError(f"frame data must be bytes-like, not {type(data).__name__}") from None
    except BufferError as e:
        raise ArgumentError(f"frame data must be one contiguous buffer ({e})") from None
    return 0


def _check_mode(mode):
    if not isinstance(mode, int) or isinstance(mode, bool) or mode < 0 or mode > 0o7777:
        raise ArgumentError(f"mode must be an int permission like 0o600, not {mode!r}")
    return mode


def _reserve(int fd, uint64_t size, str label):
    """Sizes a new arena and reserves its storage now. ftruncate alone makes
    a sparse object: touching a page that tmpfs (or the disk) cannot supply
    later kills the process with SIGBUS. posix_fallocate turns that into a
    clear error at creation."""
    try:
        os.ftruncate(fd, size)
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno in (_errno.ENOSPC, _errno.EFBIG, _errno.ENOMEM):
            raise A0OSError(e.errno, f"{label}: cannot reserve {size} bytes ({e.strerror}); "
                            "free space (e.g. /dev/shm is a size-limited tmpfs) or ask for less") from None
        if e.errno not in (_errno.EOPNOTSUPP, _errno.EINVAL):  # no fallocate here: sparse is all we get
            raise A0OSError(e.errno, f"{label}: {e.strerror}") from None


cdef class _Buffer:
    """Exports [ptr, ptr+size) of an arena's mapping to the buffer protocol.

    Keeps the Arena alive and counted as exported while any consumer holds
    the buffer, so the mapping is never unmapped under a view."""
    cdef Arena arena
    cdef uint8_t* ptr
    cdef Py_ssize_t size
    cdef bint writable

    def __getbuffer__(self, Py_buffer* view, int flags):
        if flags & PyBUF_WRITABLE and not self.writable:
            raise BufferError("frame data is read-only")
        PyBuffer_FillInfo(view, self, self.ptr, self.size, not self.writable, flags)
        self.arena.exports += 1

    def __releasebuffer__(self, Py_buffer* view):
        self.arena.exports -= 1
        self.arena._maybe_unmap()


cdef class Arena:
    """A mapped arena: POSIX shared memory, a file, or heap memory.

    Create or attach with :meth:`shm`, :meth:`file`, :meth:`heap` or
    :meth:`open`; hand it to :class:`Transport`. Closing unmaps it (deferred
    while zero-copy views are still held). Usable as a context manager.
    """

    def __cinit__(self):
        self.base = NULL
        self.fd = -1
        self._kind = None
        self._name = None

    def __init__(self):
        raise TypeError("use Arena.shm(), Arena.file(), Arena.heap() or Arena.open()")

    @staticmethod
    def shm(name, size=None, mode=0o600):
        """Creates, or attaches to, the POSIX shared-memory arena `name`.

        With `size`, creates it (exclusive create, so exactly one process
        initializes it; the object gets exactly `mode`, default 0600) or, if
        it exists, attaches to it with the size it already has. Without
        `size`, it must exist. Race-free: processes creating the same name at
        once end up with one initialized arena.

        Raises ArgumentError (bad name, size or mode), ArenaNotFoundError (no
        such arena and no size), ArenaFormatError (not an a0py arena of this
        version, or recorded size differs from the object's), A0OSError.
        """
        cdef Arena arena
        name = _shm_name(name)
        size = _check_create_size(size)
        mode = _check_mode(mode)
        created = False
        while True:
            try:
                if size is None:
                    shm = posix_ipc.SharedMemory(name)
                else:
                    try:
                        shm = posix_ipc.SharedMemory(name, posix_ipc.O_CREX, mode=mode)
                        created = True
                    except posix_ipc.ExistentialError:
                        shm = posix_ipc.SharedMemory(name)
                break
            except posix_ipc.ExistentialError:
                if size is None:
                    raise ArenaNotFoundError(f"shared memory arena {name!r} does not exist") from None
                # It vanished between our create and open attempts: retry.
            except posix_ipc.PermissionsError as e:
                raise A0OSError(13, f"shared memory arena {name!r}: {e}") from None
        fd = os.dup(shm.fd)
        shm.close_fd()
        if created:
            os.fchmod(fd, mode)  # exactly `mode`, whatever the umask
        arena = Arena.__new__(Arena)
        arena._kind = "shm"
        arena._name = name
        try:
            arena._attach(fd, size, f"shared memory arena {name!r}")
        except BaseException:
            if created:  # don't leave a half-made object that poisons the name
                Arena.unlink_shm(name)
            raise
        return arena

    @staticmethod
    def file(path, size=None, mode=0o600):
        """Creates, or attaches to, a file-backed arena at `path`.

        Same rules as :meth:`shm`: with `size` it is created (mode 0600 by
        default) or attached at its existing size; without, it must exist.

        Raises ArgumentError, ArenaNotFoundError, ArenaFormatError (wrong
        magic/version/header size, truncated, or size mismatch), A0OSError.
        """
        cdef Arena arena
        try:
            path = os.fspath(path)
        except TypeError:
            raise ArgumentError(
                f"file arena path must be str or os.PathLike, not {type(path).__name__}") from None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if "\0" in path:
            raise ArgumentError(f"file arena path may not contain a NUL byte: {path!r}")
        size = _check_create_size(size)
        mode = _check_mode(mode)
        flags = os.O_RDWR | os.O_CLOEXEC
        created = False
        try:
            if size is None:
                fd = os.open(path, flags)
            else:
                try:
                    fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, mode)
                    created = True
                    os.fchmod(fd, mode)
                except FileExistsError:
                    fd = os.open(path, flags)
        except FileNotFoundError:
            raise ArenaNotFoundError(f"file arena {path!r} does not exist") from None
        except IsADirectoryError:
            raise ArgumentError(f"file arena path {path!r} is a directory") from None
        except OSError as e:
            raise A0OSError(e.errno, f"file arena {path!r}: {e.strerror}") from None
        arena = Arena.__new__(Arena)
        arena._kind = "file"
        arena._name = path
        try:
            arena._attach(fd, size, f"file arena {path!r}")
        except BaseException:
            if created:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
            raise
        return arena

    @staticmethod
    def heap(size):
        """An arena in this process's memory (threads share it; nothing else).

        Raises ArgumentError for a size below the minimum."""
        cdef Arena arena
        cdef void* mem = NULL
        size = _check_create_size(size)
        if size is None:
            raise ArgumentError("a heap arena needs a size")
        if posix_memalign(&mem, 64, <size_t>size) != 0:
            raise MemoryError(f"cannot allocate a heap arena of {size} bytes")
        memset(mem, 0, <size_t>size)
        cdef a0_err_t err = a0_arena_init(mem, size)
        if err:
            free(mem)
            _raise(err, "heap arena")
        arena = Arena.__new__(Arena)
        arena._kind = "heap"
        arena._name = None
        arena.base = <uint8_t*>mem
        arena.size = size
        return arena

    @staticmethod
    def open(path=None, *, shm=None):
        """Attaches to an existing arena: a file at `path`, or the shared
        memory object named `shm`. Runs every open check.

        Raises ArgumentError (neither or both given), ArenaNotFoundError,
        ArenaFormatError, A0OSError."""
        if (path is None) == (shm is None):
            raise ArgumentError("Arena.open() takes exactly one of path=... or shm=...")
        if shm is not None:
            return Arena.shm(shm)
        return Arena.file(path)

    @staticmethod
    def unlink_shm(name):
        """Removes the shared memory object `name`; True if it existed.
        Processes that have it mapped keep using it until they close it."""
        try:
            posix_ipc.unlink_shared_memory(_shm_name(name))
            return True
        except posix_ipc.ExistentialError:
            return False

    def _attach(self, int fd, size, str label):
        """The open protocol (the caller has fd open read-write).

        Exclusive flock without blocking: if granted, no other process has
        the arena open, so we may initialize it (if empty) or repair its locks
        (a lock held by a process from before a reboot, a leaked waiter
        count). Otherwise a shared flock, which waits for an initializer to
        finish. Every process keeps a shared flock for as long as it has the
        arena open; that is what makes "sole user" knowable."""
        cdef a0_err_t err
        cdef a0_check_info_t info
        deadline = time.monotonic() + _INIT_WAIT_S
        try:
            while True:
                exclusive = True
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    exclusive = False
                    fcntl.flock(fd, fcntl.LOCK_SH)
                actual = os.fstat(fd).st_size
                if actual == 0:
                    if exclusive and size is not None:
                        _reserve(fd, size, label)
                        self._map(fd, size, label)
                        err = a0_arena_init(self.base, self.size)
                        if err:
                            _raise(err, label)
                        break
                    # Being created by someone who has not initialized it yet.
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    if time.monotonic() > deadline:
                        raise ArenaFormatError(
                            f"{label} is empty (0 bytes): never initialized"
                            + ("" if size is not None else "; pass a size to create it"))
                    time.sleep(0.001)
                    continue
                self._map(fd, actual, label)
                err = a0_arena_check(self.base, self.size, &info)
                if err:
                    _raise(err, label, &info)
                if exclusive:
                    a0_arena_reset_locks(self.base)
                break
            if exclusive:
                fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError as e:
            self._unmap()
            os.close(fd)
            if isinstance(e, A0OSError):
                raise
            raise A0OSError(e.errno, f"{label}: {e.strerror}") from None
        except BaseException:
            self._unmap()
            os.close(fd)
            raise
        self.fd = fd

    def _map(self, int fd, uint64_t size, str label):
        cdef void* p
        with nogil:
            p = mmap(NULL, <size_t>size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        if p == MAP_FAILED:
            raise A0OSError(errno, f"{label}: mmap of {size} bytes failed: {os.strerror(errno)}")
        self.base = <uint8_t*>p
        self.size = size

    cdef _unmap(self):
        if self.base == NULL:
            return
        if self._kind == "heap":
            free(self.base)
        else:
            munmap(self.base, <size_t>self.size)
        self.base = NULL
        self.closing = False
        if self.fd >= 0:
            os.close(self.fd)  # also drops our flock
            self.fd = -1

    cdef _maybe_unmap(self):
        # The mapping goes only when nothing of this process can touch it:
        # no exported view, no held lock, no thread blocked inside a call.
        if self.closing and self.exports == 0 and self.locks_held == 0 and self.busy == 0:
            self._unmap()

    cdef int _check_open(self) except -1:
        if self.base == NULL or self.closing:
            raise ClosedError(f"{self._describe()} is closed")
        return 0

    def _describe(self):
        if self._kind == "heap":
            return "heap arena"
        return f"{self._kind} arena {self._name!r}"

    def close(self):
        """Unmaps the arena (idempotent). Releases the deadman if this process
        holds it through this arena. While zero-copy views into it are alive
        the unmap is deferred until the last is released, and while another
        thread is blocked in a call on it (a deadman wait, a lock) until that
        call returns; new calls raise ClosedError at once.

        Raises LockError if a Transport of this process holds its lock, or if
        another thread of this process holds the deadman."""
        if self.base == NULL or self.closing:
            return
        if self.locks_held:
            raise LockError(f"cannot close {self._describe()}: a transport of this process holds its lock")
        if self.deadman_held:
            if a0_deadman_release(self.base) != A0_OK:
                raise LockError(f"cannot close {self._describe()}: another thread of this process "
                                "holds its deadman; release it in that thread first")
            self.deadman_held = False
        self.closing = True
        self._maybe_unmap()

    def unlink(self):
        """Removes the arena's name (shm object or file); mappings stay valid.
        Returns True if it existed. A heap arena has no name: ArgumentError."""
        if self._kind == "shm":
            return Arena.unlink_shm(self._name)
        if self._kind == "file":
            try:
                os.unlink(self._name)
                return True
            except FileNotFoundError:
                return False
        raise ArgumentError("a heap arena has no name to unlink")

    @property
    def size(self):
        """Total size in bytes, header included."""
        return self.size

    @property
    def kind(self):
        """'shm', 'file' or 'heap'."""
        return self._kind

    @property
    def name(self):
        """The shm name (with its leading '/'), the file path, or None."""
        return self._name

    @property
    def closed(self):
        return self.base == NULL or self.closing

    @property
    def mode(self):
        """Permission bits of the shm object or file (None for heap)."""
        if self.fd < 0:
            return None
        return os.fstat(self.fd).st_mode & 0o7777

    def header(self):
        """The arena header as a dict (a snapshot, read without the lock)."""
        self._check_open()
        import struct
        raw = bytes((<char*>self.base)[:A0_HEADER_SIZE])
        magic, version, header_size, arena_size, flags = struct.unpack_from("<QIIQQ", raw, 0)
        notify, waiters, page, recoveries = struct.unpack_from("<IIII", raw, 128)
        dm_notify, dm_pid = struct.unpack_from("<II", raw, 256)
        pages = [dict(zip(("seq_low", "seq_high", "off_head", "off_tail", "high_water_mark"),
                          struct.unpack_from("<5Q", raw, 320 + 64 * i))) for i in range(2)]
        return {"magic": magic, "version": version, "header_size": header_size,
                "arena_size": arena_size, "flags": flags, "notify": notify, "waiters": waiters,
                "committed_page": page, "recoveries": recoveries, "deadman_notify": dm_notify,
                "deadman_pid": dm_pid, "pages": pages}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self.closed else f"{self.size} bytes"
        return f"<a0py.Arena {self._describe()} {state}>"

    def __dealloc__(self):
        # Exporters and transports keep us alive, so nothing uses the mapping now.
        if self.base != NULL:
            if self._kind == "heap":
                free(self.base)
            else:
                munmap(self.base, <size_t>self.size)
            self.base = NULL
        if self.fd >= 0:
            # C close(): at interpreter exit the os module may be gone already.
            c_close(self.fd)
            self.fd = -1


cdef class Transport:
    """A circular list of frames in an arena, with this process's cursor.

    Frame operations happen under the arena's lock::

        with transport.lock() as t:
            t.alloc(5)[:] = b"hello"
            t.commit()

    One Transport per thread; each has its own cursor. `write`, `write_many`,
    `read_next` and `read_many` are one-call fast paths.
    """

    def __cinit__(self, arena):
        if not isinstance(arena, Arena):
            raise ArgumentError(f"Transport needs an a0py.Arena, not {type(arena).__name__}")
        (<Arena>arena)._check_open()
        cdef a0_err_t err = a0_transport_init(&self.t, (<Arena>arena).base, (<Arena>arena).size)
        if err:
            _raise(err, arena._describe())
        self.arena = arena
        self._locked = LockedTransport.__new__(LockedTransport)
        self._locked.tr = self
        self._locked.views = []

    cdef int _acquire(self, a0_locked_t* lk) except -1:
        cdef a0_err_t err
        self.arena._check_open()
        err = a0_transport_trylock(&self.t, lk)  # uncontended: no GIL round trip
        if err == A0_ERR_BUSY:
            self.arena.busy += 1
            with nogil:
                err = a0_transport_lock(&self.t, lk)
            self.arena.busy -= 1
            if not err and self.arena.closing:
                a0_transport_unlock(lk[0])
                err = A0_ERR_NOT_LOCKED
            if err:
                self.arena._maybe_unmap()
                self.arena._check_open()
        if err:
            if err == A0_ERR_DEADLOCK:
                raise LockError(f"{self.arena._describe()}: the lock is already held by this thread "
                                "or through this Transport (nested lock(), two Transports of one "
                                "arena in one thread, or one Transport shared by threads: use one "
                                "Transport per thread)")
            _raise(err, f"locking {self.arena._describe()}")
        self.arena.locks_held += 1
        return 0

    cdef int _release(self, a0_locked_t lk) except -1:
        cdef a0_err_t err = a0_transport_unlock(lk)
        self.arena.locks_held -= 1
        self.arena._maybe_unmap()
        if err:
            _raise(err, f"unlocking {self.arena._describe()}")
        return 0

    def lock(self):
        """The lock as a context manager; `with transport.lock() as t:` gives
        the :class:`LockedTransport` whose methods operate on frames."""
        return self._locked

    @property
    def spin(self):
        """Busy-poll iterations a waiter spends before sleeping on the futex."""
        return self.t.spin

    @spin.setter
    def spin(self, value):
        cdef uint64_t spin = _as_size(value, "spin")
        if spin > 0xFFFFFFFF:
            raise ArgumentError(f"spin must be at most {0xFFFFFFFF} iterations, got {spin}")
        self.t.spin = <uint32_t>spin

    @property
    def cursor_seq(self):
        """Seq the cursor stands on (0 before the first frame)."""
        return self.t.cur_seq

    @property
    def notify_count(self):
        """The arena's notify word (bumped on every commit, eviction, clear)."""
        self.arena._check_open()
        return a0_transport_notify_count(&self.t)

    @property
    def waiter_count(self):
        """Processes asleep (or about to sleep) waiting on this arena."""
        self.arena._check_open()
        return a0_transport_waiter_count(&self.t)

    @property
    def max_frame_size(self):
        """Largest data size one frame may have in this arena."""
        return a0_transport_max_frame_data(&self.t)

    def write(self, data):
        """Appends one frame holding a copy of `data` (any bytes-like object)
        and commits it; returns its seq. One lock round trip.

        Raises FrameTooLargeError, ArgumentError (not bytes-like), and the
        lock errors of :meth:`lock`."""
        cdef Py_buffer buf
        cdef a0_locked_t lk
        cdef uint8_t* dst
        cdef a0_err_t err
        _get_buffer(data, &buf)
        try:
            self._acquire(&lk)
            err = a0_transport_alloc(lk, <uint64_t>buf.len, &dst)
            seq = a0_transport_seq_high(lk)
            if err:
                self._release(lk)
            else:
                memcpy(dst, buf.buf, buf.len)
                # Wakes sleepers after unlocking, so they find the lock free.
                err = a0_transport_commit_unlock(lk)
                self.arena.locks_held -= 1
            if err:
                _raise(err, f"writing {buf.len} bytes to {self.arena._describe()}")
            return seq
        finally:
            PyBuffer_Release(&buf)

    def write_many(self, frames):
        """Appends every bytes-like item of `frames` under one lock and one
        commit; returns the seq of the last (or None if there were none).
        On error nothing is committed."""
        cdef Py_buffer buf
        cdef a0_locked_t lk
        cdef uint8_t* dst
        cdef a0_err_t err = A0_OK
        cdef uint64_t count = 0
        try:
            items = list(frames)
        except TypeError:
            raise ArgumentError(f"write_many needs an iterable of bytes-like frames, "
                                f"not {type(frames).__name__}") from None
        self._acquire(&lk)
        try:
            for item in items:
                _get_buffer(item, &buf)
                err = a0_transport_alloc(lk, <uint64_t>buf.len, &dst)
                if not err:
                    memcpy(dst, buf.buf, buf.len)
                PyBuffer_Release(&buf)
                if err:
                    _raise(err, f"writing frame {count} to {self.arena._describe()}")
                count += 1
            seq = a0_transport_seq_high(lk) if count else None
        except BaseException:
            self._release(lk)
            raise
        # Wakes sleepers after unlocking, so they find the lock free.
        err = a0_transport_commit_unlock(lk)
        self.arena.locks_held -= 1
        if err:
            _raise(err, f"committing to {self.arena._describe()}")
        return seq

    def read_next(self, timeout=0):
        """Moves the cursor to the next frame and returns ``(seq, bytes)``.

        timeout=0 (default) does not wait: None if there is no next frame.
        timeout=None waits as long as it takes; a number waits up to that
        many seconds and then returns None. From an evicted cursor, "next" is
        the oldest surviving frame (compare seqs to detect the gap)."""
        cdef a0_locked_t lk
        cdef a0_frame_t fr
        cdef a0_err_t err
        cdef timespec ts
        cdef int has_deadline = 0
        if timeout is not None and timeout == 0:
            has_deadline = -1
        else:
            has_deadline = _make_deadline(timeout, &ts)
        self._acquire(&lk)
        try:
            if not a0_transport_has_next(lk):
                if has_deadline < 0:
                    return None
                while True:
                    with nogil:
                        err = a0_transport_wait(lk, a0_pred_has_next, NULL, &ts if has_deadline else NULL)
                    if err != A0_ERR_INTERRUPTED:
                        break
                    PyErr_CheckSignals()  # Ctrl-C raises here; otherwise keep waiting
                if err == A0_ERR_TIMEOUT:
                    return None
                if err:
                    _raise(err, f"waiting on {self.arena._describe()}")
            err = a0_transport_next(lk)
            if not err:
                err = a0_transport_frame(lk, &fr)
            if err:
                _raise(err, f"reading {self.arena._describe()}")
            return fr.seq, PyBytes_FromStringAndSize(<char*>fr.data, <Py_ssize_t>fr.size)
        finally:
            if self.t.locked:
                self._release(lk)
            else:
                self.arena.locks_held -= 1

    def read_many(self, max_frames=None):
        """Returns every frame after the cursor (up to `max_frames`) as a list
        of ``(seq, bytes)``, under one lock, without waiting."""
        cdef a0_locked_t lk
        cdef a0_frame_t fr
        cdef a0_err_t err
        cdef Py_ssize_t limit = -1 if max_frames is None else <Py_ssize_t>_as_size(max_frames, "max_frames")
        out = []
        self._acquire(&lk)
        try:
            while limit != 0 and a0_transport_has_next(lk):
                err = a0_transport_next(lk)
                if not err:
                    err = a0_transport_frame(lk, &fr)
                if err:
                    _raise(err, f"reading {self.arena._describe()}")
                out.append((fr.seq, PyBytes_FromStringAndSize(<char*>fr.data, <Py_ssize_t>fr.size)))
                limit -= 1
        finally:
            self._release(lk)
        return out

    def __repr__(self):
        return f"<a0py.Transport on {self.arena._describe()}>"


cdef class LockedTransport:
    """The transport while its lock is held (what `with transport.lock()` gives).

    Every method raises LockError outside its `with` block. Memoryviews it
    hands out (`alloc`, `Frame.data`) are released when the lock is, and
    before each sleep of `wait`: keep a copy (`bytes(view)`) of what you need
    later. A view derived from one (e.g. `memoryview(v)` or a numpy array)
    cannot be revoked; it stays memory-safe but reads without the lock.
    """

    def __init__(self):
        raise TypeError("obtain it with `with transport.lock() as t`")

    def __enter__(self):
        if self.active:
            raise LockError("lock() is already held by this transport (nested with-block)")
        self.tr._acquire(&self.lk)
        self.active = True
        self.generation += 1
        return self

    def __exit__(self, *exc):
        # A wait whose relock failed (e.g. the committed state turned out
        # corrupt) has already given the lock up and uncounted it
        # (_after_wait): unlocking again would raise LockError over the real
        # error and drive arena.locks_held negative, so close() would refuse.
        held = self.active
        self._drop_views()
        self.active = False
        self.generation += 1
        if held:
            self.tr._release(self.lk)
        return False

    cdef int _check(self) except -1:
        if not self.active:
            raise LockError("the transport's lock is not held: use it inside `with transport.lock() as t:`")
        return 0

    cdef object _wrap(self, uint8_t* data, uint64_t size, bint writable, uint64_t seq):
        cdef _Buffer buf = _Buffer.__new__(_Buffer)
        buf.arena = self.tr.arena
        buf.ptr = data
        buf.size = <Py_ssize_t>size
        buf.writable = writable
        view = memoryview(buf)
        self.views.append((seq, view))
        return view

    cdef _drop_views(self):
        for _, view in self.views:
            try:
                view.release()
            except BufferError:
                pass  # derived views stay alive; the mapping outlives them
        self.views.clear()

    cdef _release_evicted(self):
        # An alloc under this lock may evict frames we handed out views of
        # (even frames allocated earlier under it): revoke those views, so a
        # stale alloc view cannot scribble over the frame now in its place.
        cdef uint64_t low = a0_transport_seq_low(self.lk)
        keep = []
        for entry in self.views:
            if <uint64_t>entry[0] >= low:
                keep.append(entry)
                continue
            try:
                entry[1].release()
            except BufferError:
                pass
        self.views = keep

    def alloc(self, n):
        """Appends a frame of `n` bytes (evicting the oldest as needed) and
        returns a writable memoryview of its data to fill in place. Nothing
        is visible to others until :meth:`commit`; unlocking without commit
        discards it (frames an alloc evicted stay evicted).

        Raises FrameTooLargeError if `n` exceeds the workspace,
        ArgumentError for a negative or non-integer n."""
        cdef uint8_t* data
        cdef uint64_t size = _as_size(n, "frame size")
        self._check()
        cdef a0_err_t err = a0_transport_alloc(self.lk, size, &data)
        if err:
            if err == A0_ERR_FRAME_TOO_LARGE:
                raise FrameTooLargeError(
                    f"frame of {size} bytes does not fit {self.tr.arena._describe()}: "
                    f"at most {a0_transport_max_frame_data(&self.tr.t)} bytes per frame")
            _raise(err, f"alloc({size})")
        if self.views:
            self._release_evicted()
        return self._wrap(data, size, True, a0_transport_seq_high(self.lk))

    def alloc_evicts(self, n):
        """Whether alloc(n) would evict at least one frame; changes nothing."""
        cdef c_bool evicts = 0
        cdef uint64_t size = _as_size(n, "frame size")
        self._check()
        cdef a0_err_t err = a0_transport_alloc_evicts(self.lk, size, &evicts)
        if err:
            _raise(err, f"alloc_evicts({size})")
        return bool(evicts)

    def commit(self):
        """Publishes every frame allocated under this lock and wakes waiters."""
        self._check()
        _check_err(a0_transport_commit(self.lk), "commit")

    def clear(self):
        """Removes every frame at once (seqs keep counting up)."""
        self._check()
        _check_err(a0_transport_clear(self.lk), "clear")

    def jump_head(self):
        """Cursor to the oldest frame. EmptyError if there is none."""
        self._check()
        _check_err(a0_transport_jump_head(self.lk), "jump_head")

    def jump_tail(self):
        """Cursor to the newest frame. EmptyError if there is none."""
        self._check()
        _check_err(a0_transport_jump_tail(self.lk), "jump_tail")

    def jump(self, seq):
        """Cursor to frame `seq`, or to the oldest surviving frame if `seq`
        was evicted. SeqNotFoundError if `seq` is newer than the newest frame,
        EmptyError if there is no frame."""
        cdef uint64_t s = _as_size(seq, "seq")
        self._check()
        cdef a0_err_t err = a0_transport_jump(self.lk, s)
        if err:
            if err == A0_ERR_SEQ_NOT_FOUND:
                raise SeqNotFoundError(f"jump({s}): newest frame is seq {a0_transport_seq_high(self.lk)}")
            _raise(err, f"jump({s})")

    def has_next(self):
        """Whether a newer frame exists than the cursor's (from an unplaced or
        evicted cursor: whether any frame exists). Once true it stays true
        until clear()."""
        self._check()
        return a0_transport_has_next(self.lk)

    def has_prev(self):
        """Whether an older live frame exists than the cursor's."""
        self._check()
        return a0_transport_has_prev(self.lk)

    def next(self):
        """Cursor to the next frame (the oldest surviving one if the cursor's
        frame was evicted). NoFrameError if there is none."""
        self._check()
        _check_err(a0_transport_next(self.lk), "next")

    def prev(self):
        """Cursor to the previous frame. NoFrameError if there is none."""
        self._check()
        _check_err(a0_transport_prev(self.lk), "prev")

    def iter_valid(self):
        """Whether the cursor stands on a live frame."""
        self._check()
        return a0_transport_iter_valid(self.lk)

    def frame(self):
        """The frame at the cursor. NoFrameError if the cursor is not on a
        live frame."""
        cdef a0_frame_t fr
        self._check()
        cdef a0_err_t err = a0_transport_frame(self.lk, &fr)
        if err:
            if err == A0_ERR_NO_FRAME:
                raise NoFrameError(
                    f"no frame at the cursor (cursor seq {self.tr.t.cur_seq}, live "
                    f"{a0_transport_seq_low(self.lk)}..{a0_transport_seq_high(self.lk)})")
            _raise(err, "frame")
        cdef Frame frame = Frame.__new__(Frame)
        frame.owner = self
        frame.generation = self.generation
        frame.seq = fr.seq
        frame.ptr = fr.data
        frame.size = fr.size
        return frame

    @property
    def seq_low(self):
        """Seq of the oldest live frame (seq_high + 1 when empty)."""
        self._check()
        return a0_transport_seq_low(self.lk)

    @property
    def seq_high(self):
        """Seq of the newest frame, uncommitted ones of this lock included
        (0 before the first write)."""
        self._check()
        return a0_transport_seq_high(self.lk)

    @property
    def empty(self):
        self._check()
        return a0_transport_empty(self.lk)

    @property
    def used_space(self):
        """Bytes of the workspace between the oldest frame and the end of the
        newest, frame headers, alignment and the gap before a wrap included."""
        cdef uint64_t used
        self._check()
        cdef a0_err_t err = a0_transport_used_space(self.lk, &used)
        if err:
            _raise(err, "used_space")
        return used

    @property
    def high_water_mark(self):
        """Largest used_space any commit has left."""
        self._check()
        return a0_transport_high_water_mark(self.lk)

    @property
    def recovered(self):
        """True if this lock was taken over from a process that died holding it."""
        self._check()
        return bool(self.tr.t.recovered)

    def wait(self, predicate=None, timeout=None):
        """Sleeps, lock released, until `predicate(t)` is true; returns with
        the lock held. The predicate runs under the lock after every change to
        the arena. `predicate=None` or `t.has_next` use the C fast path.

        Zero-copy views are released before each sleep. Raises
        A0TimeoutError at the deadline (lock still held), ArgumentError for a
        bad timeout, LockError if uncommitted frames would be lost."""
        cdef timespec ts
        cdef a0_err_t err
        self._check()
        cdef int has_deadline = _make_deadline(timeout, &ts)
        if predicate is None or predicate == self.has_next:
            if a0_transport_has_next(self.lk):
                return True
            self._invalidate()
            while True:
                with nogil:
                    err = a0_transport_wait(self.lk, a0_pred_has_next, NULL, &ts if has_deadline else NULL)
                if err != A0_ERR_INTERRUPTED:
                    return self._after_wait(err, timeout)
                PyErr_CheckSignals()
        if not callable(predicate):
            raise ArgumentError(f"predicate must be callable, not {type(predicate).__name__}")
        timed_out = False
        while True:
            if predicate(self):
                return True
            if timed_out:
                return self._after_wait(A0_ERR_TIMEOUT, timeout)
            self._invalidate()
            with nogil:
                err = a0_transport_wait_step(self.lk, &ts if has_deadline else NULL)
            if err == A0_ERR_TIMEOUT:
                timed_out = True
            elif err == A0_ERR_INTERRUPTED:
                PyErr_CheckSignals()
            elif err:
                return self._after_wait(err, timeout)

    def wait_seq_above(self, seq, timeout=None):
        """Waits (C predicate) until the newest seq exceeds `seq`."""
        cdef timespec ts
        cdef a0_err_t err
        cdef uint64_t target = _as_size(seq, "seq")
        self._check()
        cdef int has_deadline = _make_deadline(timeout, &ts)
        if a0_transport_seq_high(self.lk) > target:
            return True
        self._invalidate()
        while True:
            with nogil:
                err = a0_transport_wait(self.lk, a0_pred_seq_above, &target, &ts if has_deadline else NULL)
            if err != A0_ERR_INTERRUPTED:
                return self._after_wait(err, timeout)
            PyErr_CheckSignals()

    def _invalidate(self):
        if self.tr.t.pending:
            raise LockError("commit (or discard) allocated frames before waiting: "
                            "the lock is released while sleeping")
        self._drop_views()
        self.generation += 1

    def _after_wait(self, a0_err_t err, timeout):
        if err == A0_OK:
            return True
        if not self.tr.t.locked:
            # Relocking failed: the lock is no longer held.
            self.active = False
            self.tr.arena.locks_held -= 1
        if err == A0_ERR_TIMEOUT:
            raise A0TimeoutError(f"wait timed out after {timeout} s")
        _raise(err, "wait")

    def __repr__(self):
        return f"<a0py.LockedTransport {'held' if self.active else 'released'}>"


cdef class Frame:
    """A frame seen under the lock: `seq`, `size`, and `data`, a read-only
    zero-copy memoryview valid until the lock is released (LockError after)."""

    def __init__(self):
        raise TypeError("frames come from LockedTransport.frame()")

    @property
    def data(self):
        if not self.owner.active or self.owner.generation != self.generation:
            raise LockError(
                f"frame {self.seq}'s data is only readable while the lock that produced it is held")
        if self.seq < a0_transport_seq_low(self.owner.lk):
            raise NoFrameError(f"frame {self.seq} was evicted by an alloc under this lock")
        if self._view is None:
            self._view = self.owner._wrap(self.ptr, self.size, False, self.seq)
        return self._view

    def tobytes(self):
        """A copy of the frame's data (same lock rule as `data`)."""
        return bytes(self.data)

    def __len__(self):
        return self.size

    def __repr__(self):
        return f"<a0py.Frame seq={self.seq} size={self.size}>"


cdef enum:
    _DM_TAKE = 0
    _DM_WAIT_TAKEN = 1
    _DM_WAIT_RELEASED = 2
    # Blocking deadman calls sleep in slices this long, so that signals
    # (Ctrl-C) are seen even in pthread lock waits, which glibc restarts.
    _DM_SLICE_NS = 50000000


cdef a0_err_t _deadman_blocking(Arena arena, int op, object timeout) except *:
    """Runs a blocking deadman operation in interruptible slices, with the
    arena counted busy so close() from another thread defers its unmap."""
    cdef timespec final, now, slice_end
    cdef a0_err_t err = A0_OK
    arena._check_open()
    cdef int has_deadline = _make_deadline(timeout, &final)
    arena.busy += 1
    try:
        while True:
            clock_gettime(CLOCK_MONOTONIC, &now)
            slice_end = now
            slice_end.tv_nsec += _DM_SLICE_NS
            if slice_end.tv_nsec >= 1000000000:
                slice_end.tv_sec += 1
                slice_end.tv_nsec -= 1000000000
            if has_deadline and (final.tv_sec < slice_end.tv_sec or
                                 (final.tv_sec == slice_end.tv_sec and final.tv_nsec < slice_end.tv_nsec)):
                slice_end = final
            with nogil:
                if op == _DM_TAKE:
                    err = a0_deadman_take(arena.base, &slice_end)
                elif op == _DM_WAIT_TAKEN:
                    err = a0_deadman_wait_taken(arena.base, &slice_end)
                else:
                    err = a0_deadman_wait_released(arena.base, &slice_end)
            if err == A0_OK and op == _DM_TAKE:
                arena.deadman_held = True
                if arena.closing:  # closed meanwhile: don't hold a lock in a mapping about to go
                    a0_deadman_release(arena.base)
                    arena.deadman_held = False
                    err = A0_ERR_NOT_LOCKED
                    raise ClosedError(f"{arena._describe()} was closed while taking its deadman")
            if err != A0_ERR_TIMEOUT and err != A0_ERR_INTERRUPTED:
                return err
            PyErr_CheckSignals()
            if err == A0_ERR_TIMEOUT and has_deadline:
                clock_gettime(CLOCK_MONOTONIC, &now)
                if now.tv_sec > final.tv_sec or (now.tv_sec == final.tv_sec and now.tv_nsec >= final.tv_nsec):
                    return A0_ERR_TIMEOUT
    finally:
        arena.busy -= 1
        arena._maybe_unmap()


cdef class Deadman:
    """Liveness by lock ownership: a robust lock in the arena's header that
    one process holds for its life. When the holder exits or is killed, the
    lock is at once seen as free (no timeouts, no heartbeats).

    Take it from a thread that lives as long as the process (the main thread):
    a robust lock is released when its owning thread ends.
    """

    def __cinit__(self, arena):
        if not isinstance(arena, Arena):
            raise ArgumentError(f"Deadman needs an a0py.Arena, not {type(arena).__name__}")
        (<Arena>arena)._check_open()
        self.arena = arena

    def take(self, timeout=None):
        """Takes the deadman, waiting for its holder to release it or die.
        A0TimeoutError at the deadline; LockError if this thread holds it;
        interruptible (Ctrl-C raises KeyboardInterrupt)."""
        cdef a0_err_t err = _deadman_blocking(self.arena, _DM_TAKE, timeout)
        if err:
            _raise(err, f"taking the deadman of {self.arena._describe()}")

    def try_take(self):
        """Takes the deadman if free (or its holder died); returns whether it did."""
        self.arena._check_open()
        cdef a0_err_t err = a0_deadman_try_take(self.arena.base)
        if err == A0_ERR_BUSY or err == A0_ERR_DEADLOCK:
            return False
        if err:
            _raise(err, f"taking the deadman of {self.arena._describe()}")
        self.arena.deadman_held = True
        return True

    def release(self):
        """Releases the deadman. LockError if this thread does not hold it."""
        self.arena._check_open()
        cdef a0_err_t err = a0_deadman_release(self.arena.base)
        if err:
            _raise(err, f"releasing the deadman of {self.arena._describe()}")
        self.arena.deadman_held = False

    def _state(self):
        cdef c_bool taken = 0, mine = 0
        cdef uint32_t pid = 0
        self.arena._check_open()
        cdef a0_err_t err = a0_deadman_state(self.arena.base, &taken, &mine, &pid)
        if err:
            _raise(err, f"reading the deadman of {self.arena._describe()}")
        return bool(taken), bool(mine), pid

    def is_taken(self):
        """Whether a live thread (this one included) holds the deadman."""
        return self._state()[0]

    @property
    def is_mine(self):
        """Whether the calling thread holds the deadman."""
        return self._state()[1]

    @property
    def owner_pid(self):
        """Pid of the live holder, or None."""
        taken, _, pid = self._state()
        return pid if taken and pid else None

    def wait_taken(self, timeout=None):
        """Blocks until some process holds the deadman. A0TimeoutError at the
        deadline; interruptible."""
        cdef a0_err_t err = _deadman_blocking(self.arena, _DM_WAIT_TAKEN, timeout)
        if err:
            _raise(err, f"waiting for the deadman of {self.arena._describe()} to be taken")

    def wait_released(self, timeout=None):
        """Blocks until the holder releases the deadman or dies.
        A0TimeoutError at the deadline; LockError if this thread holds it;
        interruptible."""
        cdef a0_err_t err = _deadman_blocking(self.arena, _DM_WAIT_RELEASED, timeout)
        if err:
            if err == A0_ERR_DEADLOCK:
                raise LockError("this thread holds the deadman: it will not be released by waiting")
            _raise(err, f"waiting for the deadman of {self.arena._describe()} to be released")

    def __enter__(self):
        self.take()
        return self

    def __exit__(self, *exc):
        self.release()
        return False


# Packets (a0_packet.h) and the many-arena wait (a0_multiwait.h), one file per concept.
cimport cython
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc
from posix.time cimport CLOCK_REALTIME

from a0py.includes.a0_multiwait cimport *
from a0py.includes.a0_packet cimport *

import json as _json

from .errors import PacketCorruptError

include "binding/packet.pxi"
include "binding/multiwait.pxi"
