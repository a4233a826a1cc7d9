# binding/lockfree_read.pxi — what every reader that takes no lock shares
# (Transport's reads, ReadView, read_into, PacketReader, PacketView): the
# copy out of a frame, the batch size between two validations, and what a
# failed read becomes (an exception, or damaged frames skipped and named).
# Included by a0py/_core.pyx before the transport's files.

cdef enum:
    # Frames at least this big are copied with the GIL released.
    _NOGIL_COPY = 65536
    # Frames copied per validation by read_many and read_into: a longer
    # batch is more likely to be overtaken by a writer, and then it is thrown
    # away as a whole.
    _READ_BATCH = 64


cdef inline void _copy_out(void* dst, const void* src, size_t n) noexcept:
    """memcpy, with the GIL released for big frames. The caller counts the
    arena busy (Arena._enter) so that a close() meanwhile defers the unmap."""
    if n < _NOGIL_COPY:
        memcpy(dst, src, n)
        return
    with nogil:
        memcpy(dst, src, n)


cdef int _raise_reader(a0_err_t err, object label) except -1:
    """Raises for an error of a lock-free read (Transport, PacketReader)."""
    if err == A0_ERR_BUSY:
        raise LockError(f"reading {label}: writers overtook this reader {A0_READ_TRIES} times in a "
                        "row; read again")
    _raise(err, f"reading {label}")


cdef str _damaged_frames(uint64_t first, uint64_t last):
    if first == last:
        return f"frame seq {first} has a header that fails its checks"
    return (f"frames seq {first} to {last} have headers that fail their checks, or can be reached "
            "only through one that does")


cdef object _skip_damaged(a0_transport_t* t, object label):
    """After a lock-free read answered A0_ERR_CORRUPT: moves the cursor past
    the frames that cannot be read (a0_transport_read_skip) and returns their
    seqs as (first, last); None if there is nothing to skip any more (the
    arena changed: read again)."""
    cdef uint64_t first = 0, last = 0
    cdef a0_err_t err = a0_transport_read_skip(t, &first, &last)
    if err:
        _raise_reader(err, label)
    if first == 0:
        return None
    return (first, last)


cdef int _skip_damaged_or_raise(a0_transport_t* t, object label) except -1:
    """As _skip_damaged, then raises ArenaCorruptError naming the frames
    skipped; returns 0 (read again) when there was nothing to skip."""
    skipped = _skip_damaged(t, label)
    if skipped is None:
        return 0
    raise ArenaCorruptError(f"reading {label}: {_damaged_frames(skipped[0], skipped[1])} (the arena "
                            "was damaged, or written by something other than a0py): skipped, the "
                            "next read goes on after them")
