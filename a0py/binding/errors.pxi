# errors.pxi — C error codes to the exceptions of a0py.errors, and the
# argument checks every call shares (sizes, timeouts, frame data). Included
# by _core.pyx.

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
    A0_ERR_EVICTED: FrameEvictedError,
    A0_ERR_NOT_REGULAR: ArenaPermissionError,
    A0_ERR_FOREIGN_OWNER: ArenaPermissionError,
    A0_ERR_MODE_TOO_OPEN: ArenaPermissionError,
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
        if err == A0_ERR_BAD_VERSION and info.found < info.expected:
            msg += (": written by an older a0py, whose processes must not share arenas with this "
                    "one (docs/format.md); remove it (a0py rm) or use that version")
    raise _ERR_CLASS.get(err, ArenaCorruptError)(msg)


cdef inline int _check_err(a0_err_t err, str what) except -1:
    if err:
        _raise(err, what)
    return 0


cdef str _where(object arena):
    """The prefix that names the arena an argument error is about."""
    return "" if arena is None else f"{arena._describe()}: "


cdef int _frame_too_large(object arena, uint64_t n, uint64_t max_size) except -1:
    """FrameTooLargeError that says how large a frame may be and what to do."""
    needed = arena_size_for(n)
    raise FrameTooLargeError(
        f"a frame of {n} bytes does not fit {arena._describe()}: at most {max_size} bytes per "
        f"frame (its max_frame_size). Create a larger arena (size >= {needed} bytes for this "
        "frame) or split the data over several frames")


cdef int _make_deadline(object timeout, timespec* ts, object arena=None) except -1:
    """Fills ts with now + timeout on CLOCK_MONOTONIC; 0 if timeout is None."""
    if timeout is None:
        return 0
    cdef double secs
    cdef type kind = type(timeout)
    # int and float first: the ABC check below costs more than a whole read.
    if kind is not float and kind is not int and (
            isinstance(timeout, (str, bytes, bool)) or not isinstance(timeout, numbers.Real)):
        raise ArgumentError(f"{_where(arena)}timeout must be a number of seconds or None, "
                            f"not {timeout!r}")
    secs = float(timeout)
    if not secs >= 0:  # also rejects NaN
        raise ArgumentError(f"{_where(arena)}timeout must be >= 0 seconds, got {timeout!r}")
    if secs > 1e9:
        return 0
    ts[0] = a0_deadline_after_ns(<uint64_t>(secs * 1e9))
    return 1


cdef uint64_t _as_size(object n, str what, object arena=None) except? 0:
    try:
        value = int(n.__index__())
    except AttributeError:
        raise ArgumentError(f"{_where(arena)}{what} must be an integer, not {type(n).__name__}") from None
    if value < 0:
        raise ArgumentError(f"{_where(arena)}{what} must be >= 0, got {value}")
    if value >= 2**63:
        raise ArgumentError(f"{_where(arena)}{what} is too large: {value}")
    return <uint64_t>value


cdef int _get_buffer(object data, Py_buffer* buf, object arena=None) except -1:
    # Cython declares PyObject_GetBuffer `except -1`: it raises TypeError
    # itself, so a `< 0` test after it never ran and callers got TypeError
    # instead of the documented ArgumentError.
    try:
        PyObject_GetBuffer(data, buf, PyBUF_SIMPLE)
    except TypeError:
        if isinstance(data, str):
            raise ArgumentError(f"{_where(arena)}frame data must be bytes-like, not str: "
                                "encode it first, e.g. data.encode()") from None
        raise ArgumentError(f"{_where(arena)}frame data must be bytes-like, "
                            f"not {type(data).__name__}") from None
    except BufferError as e:
        raise ArgumentError(f"{_where(arena)}frame data must be one contiguous buffer ({e})") from None
    return 0
