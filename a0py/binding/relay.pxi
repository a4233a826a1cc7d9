# binding/relay.pxi — read_packets_into: a bulk read of packets (as
# Transport.read_into) that leaves out, in the same call, the packets carrying
# a given header, for a process that forwards a ring's packets elsewhere and
# must not forward those that came from there. Included by _core.pyx.
#
# Invariants:
#  - Only the buffer read_into just filled is walked, and every size in it is
#    checked against the bytes read before it is followed: a lying frame
#    prefix ends the walk, it never reads or writes past the data.
#  - A frame whose bytes are not a packet (or whose header index is damaged)
#    is kept as it is: deciding what a malformed packet means is the
#    receiver's business, not the reader's.
#  - Frames are only moved towards the start of the buffer (memmove), in
#    order, so the kept ones stay consecutive and in ring order.


def read_packets_into(transport, out, without_header, *, max_frames=None):
    """Reads the frames after `transport`'s cursor into `out` as
    :meth:`Transport.read_into` does (default 16-byte prefix: seq u64, size
    u64), then removes in place those whose packet has a header named
    `without_header` (its own headers, as :func:`packet_has_header`), moving
    the kept ones up. One call, no Python object per frame.

    Returns ``(read, kept, nbytes, more)``: the frames read (the cursor moved
    past all of them), those left in ``out[:nbytes]`` with their prefixes,
    and whether a frame after the cursor was already there when the call
    ended (read again before waiting).

    Raises what :meth:`Transport.read_into` raises (BufferTooSmallError when
    the next frame does not fit `out`: nothing is read), ArgumentError for a
    `transport` that is not a Transport or a `without_header` that is not a
    str."""
    if not isinstance(transport, Transport):
        raise ArgumentError(f"read_packets_into reads an a0py.Transport, not {type(transport).__name__}")
    if not isinstance(without_header, str):
        raise ArgumentError(f"without_header must be a header name (str), not "
                            f"{type(without_header).__name__}")
    cdef Py_buffer buf
    cdef Py_ssize_t key_len
    cdef const char* key = PyUnicode_AsUTF8AndSize(without_header, &key_len)
    cdef a0_packet_view_t v
    cdef a0_check_info_t info
    cdef uint32_t index
    cdef uint64_t frames, kept, nbytes, off = 0, dst = 0, i, size, step
    cdef uint8_t* base
    cdef c_bool ready = False
    cdef a0_err_t err
    cdef Transport tr = <Transport>transport
    result = tr.read_into(out, max_frames=max_frames)
    frames = result[0]
    nbytes = result[1]
    kept = frames
    if frames:
        PyObject_GetBuffer(out, &buf, PyBUF_WRITABLE)
        try:
            base = <uint8_t*>buf.buf
            if nbytes > <uint64_t>buf.len:
                nbytes = <uint64_t>buf.len
            info.field = NULL
            for i in range(frames):
                if nbytes - off < 16:
                    break
                memcpy(&size, base + off + 8, 8)
                if size > nbytes - off - 16:
                    break
                step = 16 + size
                if a0_packet_view(base + off + 16, size, &v, &info) == A0_OK and \
                        a0_packet_find(&v, key, <uint32_t>key_len, 0, &index) == A0_OK:
                    kept -= 1
                else:
                    if dst != off:
                        memmove(base + dst, base + off, step)
                    dst += step
                off += step
            nbytes = dst
        finally:
            PyBuffer_Release(&buf)
    arena = tr.arena
    if not (<Arena>arena).closed:
        (<Arena>arena).busy += 1
        err = a0_transport_read_ready(&tr.t, &ready)
        (<Arena>arena).busy -= 1
        (<Arena>arena)._maybe_unmap()
        if err:
            ready = True  # let the next read say what is wrong
    return frames, kept, nbytes, bool(ready)
