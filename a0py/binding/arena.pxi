# arena.pxi — Arena: mapping shm, file and heap arenas; the open/create
# protocol (flock), close and its deferral; _LentBuffer, the exporter behind
# every zero-copy memoryview. Included by _core.pyx.

cdef extern from "<stdlib.h>" nogil:
    int posix_memalign(void** memptr, size_t alignment, size_t size)

FORMAT_VERSION = A0_FORMAT_VERSION
HEADER_SIZE = A0_HEADER_SIZE
FRAME_HEADER_SIZE = A0_FRAME_HDR_SIZE
MIN_ARENA_SIZE = A0_MIN_ARENA_SIZE
MAGIC = A0_ARENA_MAGIC

# How long an opener waits for another process to finish creating an arena.
_INIT_WAIT_S = 0.5


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


def _check_create_size(size, label):
    if size is None:
        return None
    value = _as_size(size, f"{label}: arena size")
    if value < A0_MIN_ARENA_SIZE:
        raise ArgumentError(
            f"{label}: arena size must be at least {A0_MIN_ARENA_SIZE} bytes "
            f"({A0_HEADER_SIZE}-byte header + room for a frame), got {value}")
    return value


def _check_mode(mode, label):
    if not isinstance(mode, int) or isinstance(mode, bool) or mode < 0 or mode > 0o7777:
        raise ArgumentError(f"{label}: mode must be an int permission like 0o600, not {mode!r}")
    return mode


def _check_owner(owner, label):
    if owner is None:
        return os.geteuid()
    if not isinstance(owner, int) or isinstance(owner, bool) or owner < 0 or owner >= 2**32 - 1:
        raise ArgumentError(f"{label}: owner must be a uid (an int) or None, not {owner!r}")
    return owner


def _user(uid):
    """``uid 65534 (nobody)``, or ``uid 1234`` for a uid without a name."""
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (KeyError, OverflowError):
        return f"uid {uid}"


_FILE_KINDS = ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
               (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"))


def _check_access(int fd, where, uint32_t owner, uint32_t mode):
    """Raises ArenaPermissionError unless this process may attach to the
    object open at `fd`, which it did not create (a0_arena_check_access)."""
    cdef a0_access_info_t info
    cdef a0_err_t err = a0_arena_check_access(fd, owner, mode, &info)
    if err == A0_OK:
        return
    if err == A0_ERR_SYS:
        _raise(err, where.label)
    path = where.path
    found = info.mode & 0o7777
    quoted = shlex.quote(path)
    remove = (f"If you do not know who made {path}, remove it (`rm {quoted}`, as its owner or "
              "root) and try again")
    api_hint = None
    if err == A0_ERR_NOT_REGULAR:
        kind = next((name for test, name in _FILE_KINDS if test(info.mode)), "special file")
        message = (f"{where.label} is a {kind} ({_user(info.uid)}, mode {found:#o}), not a "
                   f"regular file: refused as an arena. {remove}")
    elif err == A0_ERR_FOREIGN_OWNER:
        message = (f"{where.label} is owned by {_user(info.uid)} with mode {found:#o}, not by "
                   f"{_user(owner)}: refused, a0py attaches only to its own user's objects "
                   f"(another user's could read or write every frame). {remove}")
        api_hint = f"to share that user's arena on purpose, pass owner={info.uid}"
    else:
        message = (f"{where.label} has mode {found:#o} ({_user(info.uid)}), more than the "
                   f"{mode:#o} asked for: refused, other users could read or write its frames. "
                   f"Make it private (`chmod go= {quoted}`) or remove it (`rm {quoted}`; it is "
                   f"created anew with mode {mode:#o})")
        api_hint = f"if that access is meant, pass mode={found:#o}"
    raise ArenaPermissionError(message, path=path, uid=info.uid, mode=found, api_hint=api_hint)


def _refuse_link(where):
    """ArenaPermissionError for a name that is a symbolic link (O_NOFOLLOW's
    ELOOP): the link is what another user can plant to aim a0py at a file of
    its victim's."""
    path = where.path
    try:
        st = os.lstat(path)
    except OSError:
        st = None
    if st is None or not stat.S_ISLNK(st.st_mode):  # ELOOP from a loop in the directories
        raise A0OSError(_errno.ELOOP, f"{where.label}: too many levels of symbolic links in {path!r}")
    raise ArenaPermissionError(
        f"{where.label} is a symbolic link ({_user(st.st_uid)}): refused, a0py never follows a "
        f"link to an arena (it could point at any file). If you do not know who made {path}, "
        f"remove it (`rm {shlex.quote(path)}`, as its owner or root) and try again",
        path=path, uid=st.st_uid, mode=None)


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


class _ShmName:
    """Where a shm arena lives: create/open/unlink by POSIX shm name. create
    raises FileExistsError and open FileNotFoundError, as _FileName's do."""
    kind = "shm"

    def __init__(self, name):
        self.name = name
        # Named as users write it (``Arena.shm("demo")``), not as POSIX spells it ("/demo").
        self.label = f"shared memory arena {name.lstrip('/')!r}"
        # Where glibc's shm_open keeps it (for messages and checks, not for opening).
        self.path = "/dev/shm" + name

    def _fd(self, shm):
        fd = os.dup(shm.fd)
        shm.close_fd()
        return fd

    def create(self, mode):
        try:
            return self._fd(posix_ipc.SharedMemory(self.name, posix_ipc.O_CREX, mode=mode))
        except posix_ipc.ExistentialError:
            raise FileExistsError(self.name) from None
        except posix_ipc.PermissionsError as e:
            raise A0OSError(_errno.EACCES, f"{self.label}: {e}") from None

    def open(self):
        # glibc's shm_open adds O_NOFOLLOW: a symbolic link is ELOOP, not followed.
        try:
            return self._fd(posix_ipc.SharedMemory(self.name))
        except posix_ipc.ExistentialError:
            raise FileNotFoundError(self.name) from None
        except posix_ipc.PermissionsError as e:
            raise A0OSError(_errno.EACCES, f"{self.label}: {e}") from None
        except OSError as e:
            if e.errno == _errno.ELOOP:
                _refuse_link(self)
            raise A0OSError(e.errno, f"{self.label}: {e.strerror}") from None

    def unlink(self):
        Arena.unlink_shm(self.name)


class _FileName:
    """Where a file arena lives: create/open/unlink by path."""
    kind = "file"

    def __init__(self, path):
        self.name = self.path = path
        self.label = f"file arena {path!r}"

    def _os_open(self, flags, mode=0o600):
        # O_NOFOLLOW: a link planted at the name must not aim us at a file of
        # the caller's (it would be grown and written over).
        try:
            return os.open(self.name, flags | os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
        except (FileExistsError, FileNotFoundError):
            raise
        except IsADirectoryError:
            raise ArgumentError(f"file arena path {self.name!r} is a directory") from None
        except OSError as e:
            if e.errno == _errno.ELOOP:
                _refuse_link(self)
            raise A0OSError(e.errno, f"{self.label}: {e.strerror}") from None

    def create(self, mode):
        return self._os_open(os.O_CREAT | os.O_EXCL, mode)

    def open(self):
        return self._os_open(0)

    def unlink(self):
        try:
            os.unlink(self.name)
        except FileNotFoundError:
            pass


def _create_or_open(where, size, mode, owner):
    """The create-or-open dance, once for every named arena kind.

    With a size: exclusive create (so one process initializes it) or, if it
    exists, open; if it vanished between the two, try again. Without: open.
    A created object gets exactly `mode` whatever the umask; if attaching it
    then fails before another process made it (sized and initialized it: it
    may open the empty object between our create and our lock), it is removed
    so a half-made object never poisons the name.
    An object this call did not create is attached only if it passes
    _check_access (a regular file of `owner`, no bit outside `mode`), checked
    on the descriptor before anything is locked, sized, written or mapped.
    """
    cdef Arena arena
    created = no_place = False
    while True:
        try:
            if size is not None:
                try:
                    fd = where.create(mode)
                    created = True
                    break
                except FileExistsError:
                    pass
                except FileNotFoundError:
                    # Creating, not opening, found nothing: the place itself is missing
                    # (a file arena's directory). Retrying cannot help.
                    no_place = True
                    break
            fd = where.open()
            break
        except FileNotFoundError:
            if size is None:
                raise ArenaNotFoundError(f"{where.label} does not exist") from None
            # Unlinked between our create and open attempts: create again.
    if no_place:
        raise ArenaNotFoundError(f"{where.label} cannot be created: its directory does not exist")
    if created:
        try:
            os.fchmod(fd, mode)
        except OSError as e:
            os.close(fd)
            where.unlink()
            raise A0OSError(e.errno, f"{where.label}: {e.strerror}") from None
    arena = Arena.__new__(Arena)
    arena._kind = where.kind
    arena._name = where.name
    if not created:
        try:
            _check_access(fd, where, owner, mode)
        except BaseException:
            os.close(fd)
            raise
    found = []
    try:
        arena._attach(fd, size, where.label, found)  # owns fd from here: closes it on failure
    except BaseException:
        # Only what this call made is removed. Between our exclusive create and our
        # flock another process may have opened the empty object and initialized it
        # (at its own size: we then get ArenaExistsError): that arena is its, in use.
        if created and not found:
            where.unlink()
        raise
    return arena


# no_gc_clear: __dealloc__ gives back the export through `arena`, which the
# cycle collector's tp_clear would set to None first (the mapping then never
# unmapped).
@cython.no_gc_clear
@cython.freelist(16)
cdef class _LentBuffer:
    """Exports [ptr, ptr+size) of an arena's mapping to the buffer protocol.

    Counts as one export of the arena from :func:`_lend` to its deallocation,
    not only while a consumer holds its buffer: numpy keeps a reference to the
    object an array is made over (its base, memoryviews unwrapped) but
    releases the buffer at once, so the mapping must stay while the object
    lives, or an array kept past its block would read unmapped memory."""
    cdef Arena arena
    cdef uint8_t* ptr
    cdef Py_ssize_t size
    cdef bint writable

    def __getbuffer__(self, Py_buffer* view, int flags):
        if flags & PyBUF_WRITABLE and not self.writable:
            raise BufferError("frame data is read-only")
        PyBuffer_FillInfo(view, self, self.ptr, self.size, not self.writable, flags)

    def __releasebuffer__(self, Py_buffer* view):
        pass

    def __dealloc__(self):
        if self.arena is not None:
            self.arena.exports -= 1
            self.arena._maybe_unmap()


cdef _LentBuffer _lend(Arena arena, uint8_t* ptr, Py_ssize_t size, bint writable):
    """A _LentBuffer over [ptr, ptr+size) of `arena`'s mapping, counted as an
    export of it until the buffer object is gone."""
    cdef _LentBuffer buf = _LentBuffer.__new__(_LentBuffer)
    buf.ptr = ptr
    buf.size = size
    buf.writable = writable
    buf.arena = arena
    arena.exports += 1
    return buf


# no_gc_clear: __dealloc__ reads `_kind` to know whether `base` is heap memory
# (free) or a mapping (munmap). The cycle collector's tp_clear would first set
# it to None when an Arena is garbage together with a Transport cycle, and
# heap memory was then munmap()ed: the process's malloc heap corrupted.
@cython.no_gc_clear
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
    def shm(name, size=None, mode=0o600, *, owner=None):
        """Creates, or attaches to, the POSIX shared-memory arena `name`.

        With `size`, creates it (exclusive create, so exactly one process
        initializes it; the object gets exactly `mode`, default 0600) or, if
        it exists with that size, attaches to it. Without `size` (None), it
        must exist and is attached at whatever size it has. Race-free:
        processes creating the same name at once end up with one initialized
        arena, and any of them that asked for another size than the winner's
        gets ArenaExistsError.

        An existing object (one this call did not create) is attached only if
        it belongs to `owner` (default: this process's effective uid, root
        included) and has no permission bit outside `mode`: anyone can take a
        name in /dev/shm first, and adopting their object would hand them
        every frame.

        Raises ArgumentError (bad name, size, mode or owner),
        ArenaNotFoundError (no such arena and no size), ArenaExistsError (it
        exists with another size; the message gives both),
        ArenaPermissionError (it exists and is another user's, or grants
        more than `mode`, or is not a regular file), ArenaFormatError (not an
        a0py arena of this version, or recorded size differs from the
        object's), A0OSError.
        """
        where = _ShmName(_shm_name(name))
        return _create_or_open(where, _check_create_size(size, where.label),
                               _check_mode(mode, where.label), _check_owner(owner, where.label))

    @staticmethod
    def file(path, size=None, mode=0o600, *, owner=None):
        """Creates, or attaches to, a file-backed arena at `path`.

        Same rules as :meth:`shm`: with `size` it is created (mode 0600 by
        default) or attached if it exists with that size; without, it must
        exist and is attached at its size. An existing file must belong to
        `owner` (default: the effective uid) with no bit outside `mode`, and
        the last component of `path` is never followed if it is a symbolic
        link.

        Raises ArgumentError, ArenaNotFoundError, ArenaExistsError (exists
        with another size), ArenaPermissionError (a symbolic link, another
        user's file, more access than `mode`, not a regular file),
        ArenaFormatError (not an a0py arena: wrong magic/version/header size,
        truncated, or size mismatch), A0OSError.
        """
        try:
            path = os.fspath(path)
        except TypeError:
            raise ArgumentError(
                f"file arena path must be str or os.PathLike, not {type(path).__name__}") from None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if "\0" in path:
            raise ArgumentError(f"file arena path may not contain a NUL byte: {path!r}")
        where = _FileName(path)
        return _create_or_open(where, _check_create_size(size, where.label),
                               _check_mode(mode, where.label), _check_owner(owner, where.label))

    @staticmethod
    def heap(size):
        """An arena in this process's memory (threads share it; nothing else).

        Raises ArgumentError for a size below the minimum."""
        cdef Arena arena
        cdef void* mem = NULL
        size = _check_create_size(size, "heap arena")
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
    def open(path=None, *, shm=None, mode=0o600, owner=None):
        """Attaches to an existing arena: a file at `path`, or the shared
        memory object named `shm`. Runs every open check, the owner and
        `mode` check of :meth:`shm` included.

        Raises ArgumentError (neither or both given), ArenaNotFoundError,
        ArenaPermissionError, ArenaFormatError, A0OSError."""
        if (path is None) == (shm is None):
            raise ArgumentError("Arena.open() takes exactly one of path=... or shm=...")
        if shm is not None:
            return Arena.shm(shm, mode=mode, owner=owner)
        return Arena.file(path, mode=mode, owner=owner)

    @staticmethod
    def unlink_shm(name):
        """Removes the shared memory object `name`; True if it existed.
        Processes that have it mapped keep using it until they close it."""
        try:
            posix_ipc.unlink_shared_memory(_shm_name(name))
            return True
        except posix_ipc.ExistentialError:
            return False

    def _attach(self, int fd, size, str label, found=None):
        """The open protocol (the caller has fd open read-write). `found` (a
        list, optional) gets True appended once the file was seen already sized,
        that is made by another process: a creator that then fails must leave
        that process's arena alone.

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
                if found is not None:
                    found.append(True)
                self._map(fd, actual, label)
                err = a0_arena_check(self.base, self.size, &info)
                if actual < A0_HEADER_SIZE and (err == A0_ERR_BAD_MAGIC or actual < 8):
                    # Short and without the magic: some other file, not a
                    # truncated arena ("too small" would send users astray).
                    raise ArenaFormatError(
                        f"{label} is not an a0py arena: {actual} bytes without the arena magic "
                        f"(an arena starts with a {A0_HEADER_SIZE}-byte header)")
                if err:
                    _raise(err, label, &info)
                if size is not None and size != actual:
                    raise ArenaExistsError(
                        f"{label} already exists with a size of {actual} bytes, not the {size} "
                        "bytes asked for: pass size=None to attach to it as it is, or unlink it "
                        "to create it anew")
                if exclusive:
                    a0_arena_reset_locks(self.base)
                break
            if exclusive:
                fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError as e:
            self._unmap()
            os.close(fd)
            if isinstance(e, A0Error):  # ours (ArenaExistsError is an OSError too)
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
        """Closes the arena (idempotent): from now on every call on it, and
        on its transports and deadmen, raises ClosedError. Operations already
        in flight in other threads finish first: a held lock (a ``with
        t.lock()`` block, a write), a blocked wait, a zero-copy view keep the
        mapping, which is unmapped when the last of them is done. Releases
        the deadman if this thread holds it through this arena.

        Raises LockError if another thread of this process holds the
        deadman (release it in that thread first)."""
        if self.base == NULL or self.closing:
            return
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
        """The arena header as a dict (a snapshot, read without the lock):
        the fields of docs/format.md, plus ``committed_page`` (state_version
        & 1) and ``waiters`` (the notify word's sleepers flag;
        ``local_waiters``, notify_local's)."""
        self._check_open()
        import struct
        raw = bytes((<char*>self.base)[:A0_HEADER_SIZE])
        magic, version, header_size, arena_size, flags = struct.unpack_from("<QIIQQ", raw, 0)
        notify, recoveries, state_version, notify_local = struct.unpack_from("<IIQI", raw, 128)
        dm_notify, dm_pid = struct.unpack_from("<II", raw, 256)
        pages = [dict(zip(("seq_low", "seq_high", "off_head", "off_tail", "high_water_mark",
                           "relayed_frames"),
                          struct.unpack_from("<6Q", raw, 320 + 64 * i))) for i in range(2)]
        return {"magic": magic, "version": version, "header_size": header_size,
                "arena_size": arena_size, "flags": flags, "notify": notify,
                "waiters": notify & 1, "notify_local": notify_local,
                "local_waiters": notify_local & 1, "state_version": state_version,
                "committed_page": state_version & 1,
                "recoveries": recoveries, "deadman_notify": dm_notify,
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
        # `_kind` is still set here: the class is no_gc_clear (see above).
        if self.base != NULL:
            if self.deadman_held and a0_deadman_release(self.base) != A0_OK:
                # Another thread holds the deadman: glibc's robust-mutex list
                # of that thread points into this memory. Freeing heap memory
                # under it would corrupt malloc's heap at that thread's next
                # lock or exit, so a heap arena is leaked instead; a mapping
                # the kernel owns is safe to drop.
                if self._kind == "heap":
                    self.base = NULL
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
