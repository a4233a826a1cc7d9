# binding/read_into.pxi — the engine of Transport.read_into: frames copied out
# in bulk, each after a prefix (FramePrefix). Included by a0py/_core.pyx
# after lockfree_read.pxi, before transport.pxi (whose read_into calls it).
#
# A generic bulk read: the frames after the cursor copied into a caller's
# buffer, each preceded by a prefix of fixed layout (FramePrefix): the
# caller's template bytes, into which the frame's seq and size are stored
# at offsets the caller chose. The binding knows nothing of what the prefix
# means (a recorder lays MCAP message records out this way). Invariants:
#  * only validated frames are counted: a batch is copied, then checked with
#    a0_transport_read_end, and a batch that was overtaken is dropped (the
#    bytes after the count returned are scratch), then read again;
#  * the seqs of one call are consecutive: a gap found after the first frame
#    ends the call, so the gap a call reports always lies just before its
#    first frame;
#  * nothing is written past the room the caller allowed.

cdef enum:
    # Longest template a FramePrefix takes.
    _PREFIX_MAX = 256
    # A batch is validated after this many bytes too (big frames: less to
    # throw away when a writer overtakes the copy).
    _BULK_BATCH_BYTES = 262144


cdef struct _PrefixLayout:
    uint8_t tmpl[256]   # _PREFIX_MAX
    uint32_t size       # bytes of the prefix
    int32_t seq_at      # where the seq goes (-1: nowhere)
    uint32_t seq_bytes  # 8, or 4: the seq modulo 2**32
    int32_t size_at     # where the frame's size + size_add goes, u64 (-1: nowhere)
    uint64_t size_add


cdef struct _BulkSink:
    uint8_t* base       # where the first prefix goes
    uint64_t room       # bytes the call may write from base
    uint64_t used       # bytes of validated frames (with their prefixes) written
    uint64_t frames
    uint64_t max_frames
    uint64_t first_seq
    uint64_t last_seq
    uint64_t gap_first  # seqs missed just before first_seq (0, 0: none)
    uint64_t gap_last
    uint64_t need       # set when not one frame fits: the bytes the next frame takes
    uint64_t need_seq


cdef class FramePrefix:
    """What :meth:`Transport.read_into` writes before each frame: the bytes
    of ``template`` (at most 256), with the frame's seq stored at ``seq_at``
    (little-endian, ``seq_bytes`` bytes: 8, or 4 for the seq modulo 2**32)
    and its data size plus ``size_add`` stored at ``size_at`` (little-endian
    u64); ``None`` stores that field nowhere. The frame's bytes follow the
    prefix. The default, ``FramePrefix()``, is 16 bytes: seq u64, size u64.

    Raises ArgumentError for a template that is not bytes-like or is too
    long, a field that does not lie inside the template, fields that
    overlap, a ``seq_bytes`` other than 4 or 8, a negative ``size_add``."""

    cdef _PrefixLayout p

    def __init__(self, template=b"\0" * 16, *, seq_at=0, seq_bytes=8, size_at=8, size_add=0):
        try:
            tmpl = memoryview(template).tobytes()
        except TypeError:
            raise ArgumentError(f"a FramePrefix template must be bytes-like, not "
                                f"{type(template).__name__}") from None
        if len(tmpl) > _PREFIX_MAX:
            raise ArgumentError(f"a FramePrefix template holds at most {_PREFIX_MAX} bytes, "
                                f"not {len(tmpl)}")
        memcpy(self.p.tmpl, <char*>tmpl, len(tmpl))
        self.p.size = <uint32_t>len(tmpl)
        if type(seq_bytes) is not int or seq_bytes not in (4, 8):
            raise ArgumentError(f"FramePrefix seq_bytes must be 4 or 8, not {seq_bytes!r}")
        self.p.seq_bytes = seq_bytes
        self.p.seq_at = self._field(seq_at, seq_bytes, "seq_at")
        self.p.size_at = self._field(size_at, 8, "size_at")
        self.p.size_add = _as_size(size_add, "FramePrefix size_add", None)
        if (self.p.seq_at >= 0 and self.p.size_at >= 0 and self.p.seq_at < self.p.size_at + 8
                and self.p.size_at < self.p.seq_at + <int32_t>seq_bytes):
            raise ArgumentError(f"FramePrefix fields overlap: seq at {seq_at} ({seq_bytes} bytes), "
                                f"size at {size_at} (8 bytes)")

    cdef int32_t _field(self, at, int width, str name) except -2:
        if at is None:
            return -1
        cdef uint64_t pos = _as_size(at, f"FramePrefix {name}", None)
        if pos + width > self.p.size:
            raise ArgumentError(f"FramePrefix {name}={pos}: a field of {width} bytes there passes the "
                                f"end of the {self.p.size}-byte template")
        return <int32_t>pos

    @property
    def template(self):
        return PyBytes_FromStringAndSize(<char*>self.p.tmpl, self.p.size)

    @property
    def size(self):
        """Bytes written before each frame."""
        return self.p.size

    @property
    def seq_at(self):
        return None if self.p.seq_at < 0 else self.p.seq_at

    @property
    def seq_bytes(self):
        return self.p.seq_bytes

    @property
    def size_at(self):
        return None if self.p.size_at < 0 else self.p.size_at

    @property
    def size_add(self):
        return self.p.size_add

    def __repr__(self):
        return (f"a0py.FramePrefix({self.template!r}, seq_at={self.seq_at}, seq_bytes={self.seq_bytes}, "
                f"size_at={self.size_at}, size_add={self.size_add})")


cdef FramePrefix _DEFAULT_PREFIX = FramePrefix()


cdef inline void _put_prefixed(uint8_t* r, const a0_read_t* f, const _PrefixLayout* p) noexcept nogil:
    cdef uint64_t size = f.size + p.size_add
    cdef uint64_t seq = f.seq
    memcpy(r, p.tmpl, p.size)
    if p.seq_at >= 0:
        memcpy(r + p.seq_at, &seq, p.seq_bytes)  # little-endian: 4 bytes are the seq modulo 2**32
    if p.size_at >= 0:
        memcpy(r + p.size_at, &size, 8)
    memcpy(r + p.size, f.data, f.size)


cdef a0_err_t _read_prefixed(a0_transport_t* t, _BulkSink* s, const _PrefixLayout* p) noexcept nogil:
    """Copies the frames after the cursor into s, each after its prefix,
    validating them a batch at a time (see the invariants above); moves the
    cursor past those it keeps. An error after some frames were kept is left
    for the next call: they are returned first."""
    cdef a0_read_t first, cur, nxt, last
    cdef a0_err_t err
    cdef uint64_t start, n, data, need = 0
    cdef c_bool live
    cdef bint full
    while s.frames < s.max_frames:
        err = a0_transport_read_begin(t, &first)
        if err == A0_ERR_NO_FRAME:
            return A0_OK
        if err:
            return A0_OK if s.frames else err
        if first.gap and s.frames:
            return A0_OK  # the next call starts with this gap
        if s.frames == 0:
            s.gap_first = first.seq - first.gap if first.gap else 0
            s.gap_last = first.seq - 1 if first.gap else 0
        start = s.used
        n = 0
        data = 0
        full = False
        cur = first
        while True:
            need = p.size + cur.size
            if need > s.room - s.used:
                full = True
                break
            _put_prefixed(s.base + s.used, &cur, p)
            s.used += need
            n += 1
            data += cur.size
            last = cur
            if s.frames + n == s.max_frames or n == _READ_BATCH or data >= _BULK_BATCH_BYTES:
                break
            if a0_transport_read_after(t, &cur, &nxt) != A0_OK:
                break  # the newest frame, or a race that read_end will see
            cur = nxt
        if n == 0:
            # Not even this frame fits. Its size is believed only if the
            # frame was still live after it was read.
            err = a0_transport_read_live(t, &first, &live)
            if err:
                return A0_OK if s.frames else err
            if not live:
                continue
            if s.frames == 0:
                s.need = need
                s.need_seq = first.seq
            return A0_OK
        err = a0_transport_read_end(t, &first, &last)
        if err == A0_ERR_EVICTED:
            s.used = start  # overtaken while copying: the copies may be torn, drop them
            continue
        if err:
            s.used = start
            return A0_OK if s.frames else err
        if s.frames == 0:
            s.first_seq = first.seq
        s.frames += n
        s.last_seq = last.seq
        if full:
            return A0_OK
    return A0_OK
