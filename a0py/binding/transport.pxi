# transport.pxi — Transport (one-call fast paths, cursor, reads without the
# lock), ReadView (a zero-copy read validated when it ends), LockedTransport
# (frame operations under the lock, zero-copy views and their revocation)
# and Frame. Included by _core.pyx.

cdef enum:
    # Frames at least this big are copied with the GIL released.
    _NOGIL_COPY = 65536
    # Frames copied per validation by read_many: a longer batch is more likely
    # to be overtaken by a writer, and then it is thrown away as a whole.
    _READ_BATCH = 64


cdef inline void _copy_out(void* dst, const void* src, size_t n) noexcept:
    """memcpy, with the GIL released for big frames. The caller counts the
    arena busy (Arena._enter) so that a close() meanwhile defers the unmap."""
    if n < _NOGIL_COPY:
        memcpy(dst, src, n)
        return
    with nogil:
        memcpy(dst, src, n)

# ---- read_into: frames copied out in bulk, each after a prefix --------------
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


cdef class Transport:
    """A circular list of frames in an arena, with this process's cursor.

    Writers take the arena's lock::

        with transport.lock() as t:
            t.alloc(5)[:] = b"hello"
            t.commit()

    Readers do not: `read_next`, `read_many` and `read_view` copy (or look
    at) frames without the lock and validate what they read, so a reader
    never makes a writer wait. One Transport per thread; each has its own
    cursor. `write`, `write_many`, `read_next`, `read_many` and `read_view`
    are one-call fast paths.
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

    cdef a0_err_t _release(self, a0_locked_t lk, bint commit=False) except *:
        """The one way a lock taken by _acquire is given back: commits first
        if asked (waking sleepers after the unlock), uncounts it, and lets a
        close() that came meanwhile unmap. A lock the core already gave up
        (a failed relock in a wait) is only uncounted. Returns the core's
        error for the caller to raise with its own context."""
        cdef a0_err_t err = A0_OK
        if self.t.locked:
            err = a0_transport_commit_unlock(lk) if commit else a0_transport_unlock(lk)
        self.arena.locks_held -= 1
        self.arena._maybe_unmap()
        return err

    cdef a0_err_t _alloc(self, a0_locked_t lk, uint64_t size, uint8_t** data) noexcept nogil:
        return a0_transport_alloc(lk, size, data)

    cdef uint64_t _max_frame_data(self) noexcept nogil:
        return a0_transport_max_frame_data(&self.t)

    cdef int _raise_for(self, a0_err_t err, str what) except -1:
        _raise(err, f"{what} {self.arena._describe()}")

    def lock(self):
        """The lock as a context manager; `with transport.lock() as t:` gives
        the :class:`LockedTransport` whose methods operate on frames."""
        return self._locked

    @property
    def spin(self):
        """How a waiter spins before it sleeps on the futex: None (the
        default) for the adaptive budget (spins only while spinning has been
        paying off lately, never with a single CPU), or a fixed number of
        busy-poll iterations (0: sleep at once)."""
        return None if self.t.spin_adaptive else self.t.spin

    @spin.setter
    def spin(self, value):
        if value is None:
            self.t.spin_adaptive = 1
            return
        cdef uint64_t spin = _as_size(value, "spin", self.arena)
        if spin > 0xFFFFFFFF:
            raise ArgumentError(f"{self.arena._describe()}: spin must be None (adaptive) or at most "
                                f"{0xFFFFFFFF} iterations, got {spin}")
        self.t.spin = <uint32_t>spin
        self.t.spin_adaptive = 0

    @property
    def cursor_seq(self):
        """Seq the cursor stands on: the last frame read (0 before the first)."""
        return self.t.cur_seq

    @property
    def missed(self):
        """Frames this Transport's reads skipped because they were removed
        (evicted, cleared, dropped) before it read them, counted from its
        first read on. A growing count means this reader falls behind."""
        return self.t.missed

    @property
    def notify_count(self):
        """The arena's notify word (moves on every commit, eviction, clear;
        bit 0 is the sleepers flag)."""
        self.arena._check_open()
        return a0_transport_notify_count(&self.t)

    @property
    def relayed(self):
        """Whether this Transport is a relayed writer: one that writes frames
        it received from elsewhere (a bridge's importer). Its commits move
        the notify word as any writer's (every reader and subscriber sees
        them as usual) but not the arena's second word, ``notify_local``,
        which a forwarder of the same ring sleeps on
        (``MultiWait(local=True)``), so that it is not woken by what it
        imported itself; and they count in the state's ``relayed_frames``
        (:attr:`read_snapshot`). False by default; set it before writing."""
        return bool(self.t.relayed)

    @relayed.setter
    def relayed(self, value):
        if not isinstance(value, bool):
            raise ArgumentError(f"{self.arena._describe()}: relayed must be True or False, "
                                f"not {value!r}")
        self.t.relayed = 1 if value else 0

    @property
    def read_snapshot(self):
        """``(seq_high, relayed_frames)`` of the committed state that this
        Transport's last lock-free read call looked at (``(0, 0)`` before
        the first): the newest frame then, and how many frames up to it
        relayed writers had committed. When :attr:`cursor_seq` equals that
        seq_high, every frame up to it was read or missed by this reader, so
        a forwarder can tell how many of those it did not read were not
        relayed ones: a loss to it."""
        return (self.t.snap_high, self.t.snap_relayed)

    @property
    def notify_local_count(self):
        """The arena's notify_local word (moves on every commit, eviction,
        clear of writers that are not :attr:`relayed`; bit 0 is its sleepers
        flag)."""
        self.arena._check_open()
        return a0_transport_notify_local_count(&self.t)

    @property
    def waiter_count(self):
        """1 while a waiter of any process is (or may be) asleep on this
        arena, so that the next publish makes one wake syscall; 0 when
        nobody sleeps and writers make no syscall. A waiter that timed out or
        was killed asleep leaves it at 1 until the next publish."""
        self.arena._check_open()
        return a0_transport_waiter_count(&self.t)

    @property
    def max_frame_size(self):
        """Largest data size one frame may have in this arena."""
        return a0_transport_max_frame_data(&self.t)

    def write(self, data, evict=True, timeout=None):
        """Appends one frame holding a copy of `data` (any bytes-like object)
        and commits it; returns its seq. One lock round trip.

        evict=True (default): the oldest frames are evicted as needed, and
        the call never waits for room. evict=False: no frame is evicted; if
        there is no room the call sleeps (lock released, GIL released,
        Ctrl-C interrupts) until a consumer removes frames (``clear()`` or
        ``drop_through(seq)``), for at most `timeout` seconds (None: no
        limit; 0: do not wait).

        Raises FrameTooLargeError (can never fit this arena), A0TimeoutError
        (evict=False: still no room at the timeout; nothing written),
        ArgumentError (not bytes-like, a bad timeout, or a timeout with
        evict=True), and the lock errors of :meth:`lock`."""
        cdef Py_buffer buf
        cdef a0_locked_t lk
        cdef uint8_t* dst
        cdef a0_err_t err
        cdef timespec ts
        cdef int has_deadline = 0
        cdef bint evicting = evict
        cdef uint64_t n
        if not evicting:
            has_deadline = _make_deadline(timeout, &ts, self.arena)
        elif timeout is not None:
            raise ArgumentError(f"write to {self.arena._describe()}: timeout applies only with "
                                "evict=False (an evicting write never waits for room)")
        _get_buffer(data, &buf, self.arena)
        try:
            self._acquire(&lk)
            n = <uint64_t>buf.len
            if evicting or a0_pred_fits(lk, &n):  # room now: no GIL round trip
                err = a0_transport_alloc(lk, n, &dst)
            else:
                while True:
                    with nogil:
                        err = a0_transport_alloc_noevict(lk, <uint64_t>buf.len,
                                                         &ts if has_deadline else NULL, &dst)
                    if err != A0_ERR_INTERRUPTED:
                        break
                    try:
                        PyErr_CheckSignals()  # Ctrl-C raises here; other handlers: keep waiting
                    except BaseException:
                        self._release(lk)
                        raise
            seq = a0_transport_seq_high(lk)
            if err:
                self._release(lk)
            else:
                memcpy(dst, buf.buf, buf.len)
                err = self._release(lk, commit=True)
            if err == A0_ERR_FRAME_TOO_LARGE:
                _frame_too_large(self.arena, buf.len, a0_transport_max_frame_data(&self.t))
            if err == A0_ERR_TIMEOUT:
                raise A0TimeoutError(
                    f"no room for a frame of {buf.len} bytes in {self.arena._describe()} without "
                    f"evicting, after {timeout} s: a consumer makes room with clear() or "
                    "drop_through(seq)")
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
            raise ArgumentError(f"write_many to {self.arena._describe()} needs an iterable of "
                                "bytes-like frames, "
                                f"not {type(frames).__name__}") from None
        self._acquire(&lk)
        try:
            for item in items:
                _get_buffer(item, &buf, self.arena)
                err = a0_transport_alloc(lk, <uint64_t>buf.len, &dst)
                if not err:
                    memcpy(dst, buf.buf, buf.len)
                PyBuffer_Release(&buf)
                if err == A0_ERR_FRAME_TOO_LARGE:
                    _frame_too_large(self.arena, buf.len, a0_transport_max_frame_data(&self.t))
                if err:
                    _raise(err, f"writing frame {count} to {self.arena._describe()}")
                count += 1
            seq = a0_transport_seq_high(lk) if count else None
        except BaseException:
            self._release(lk)
            raise
        err = self._release(lk, commit=True)
        if err:
            _raise(err, f"committing to {self.arena._describe()}")
        return seq

    cdef int _raise_read(self, a0_err_t err) except -1:
        return _raise_reader(err, self.arena._describe())

    cdef int _wait_readable(self, timespec* deadline) except -1:
        """Sleeps (GIL released) until a frame after the cursor exists.
        Returns 1, or 0 at the deadline; Ctrl-C raises KeyboardInterrupt."""
        cdef a0_err_t err
        while True:
            self.arena.busy += 1
            with nogil:
                err = a0_transport_wait_readable(&self.t, deadline)
            self.arena.busy -= 1
            self.arena._maybe_unmap()
            self.arena._check_open()  # closed while asleep: ClosedError
            if err == A0_OK:
                return 1
            if err == A0_ERR_TIMEOUT:
                return 0
            if err != A0_ERR_INTERRUPTED:
                self._raise_read(err)
            PyErr_CheckSignals()  # Ctrl-C raises here; other handlers: keep waiting

    cdef object _read_one(self):
        """The next frame as (seq, bytes) without the lock, or None."""
        self.arena._check_open()
        self.arena.busy += 1
        try:
            return self._read_one_open()
        finally:
            self.arena.busy -= 1
            self.arena._maybe_unmap()

    cdef object _read_one_open(self):
        cdef a0_read_t r
        cdef a0_err_t err
        while True:
            err = a0_transport_read_begin(&self.t, &r)
            if err == A0_ERR_NO_FRAME:
                return None
            if err == A0_ERR_CORRUPT:
                _skip_damaged_or_raise(&self.t, self.arena._describe())
                continue
            if err:
                self._raise_read(err)
            data = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>r.size)
            _copy_out(PyBytes_AS_STRING(data), r.data, r.size)
            err = a0_transport_read_end(&self.t, &r, &r)
            if err == A0_OK:
                return (r.seq, data)
            if err != A0_ERR_EVICTED:
                self._raise_read(err)
            # Overwritten while copying: read again (the loss is counted).

    def read_next(self, timeout=0):
        """Moves the cursor to the next frame and returns ``(seq, bytes)``.

        Takes no lock: the frame is copied, then checked to be still live,
        and read again if it was not.
        timeout=0 (default) does not wait: None if there is no next frame.
        timeout=None waits as long as it takes; a number waits up to that
        many seconds and then returns None. From an evicted cursor the read
        lands where it can finish its copy ahead of the writer (twice the
        writer's pace past the oldest frame, or the newest while this reader
        stays lapped: docs/transport.md): the frames skipped are added to
        :attr:`missed` (and the seqs jump).

        Raises ArgumentError (bad timeout), ClosedError, ArenaCorruptError
        (a damaged frame header, named: raised once, the cursor moved past
        it, the next read goes on after it)."""
        cdef timespec ts
        cdef int has_deadline = -1
        if timeout is None or timeout != 0:
            has_deadline = _make_deadline(timeout, &ts, self.arena)
        self.arena._check_open()
        while True:
            frame = self._read_one()
            if frame is not None or has_deadline < 0:
                return frame
            if not self._wait_readable(&ts if has_deadline else NULL):
                return self._read_one()

    def read_many(self, max_frames=None):
        """Returns every frame after the cursor (up to `max_frames`) as a list
        of ``(seq, bytes)``, without waiting and without the lock: frames are
        copied in batches and each batch is validated once. Frames removed
        before they could be read are skipped and added to :attr:`missed`.
        A batch ends after 64 frames or 256 KiB.
        At a damaged frame header it returns the frames before it; called
        again, it raises ArenaCorruptError as :meth:`read_next`."""
        cdef Py_ssize_t limit = -1
        if max_frames is not None:
            limit = <Py_ssize_t>_as_size(max_frames, "max_frames", self.arena)
        self.arena._check_open()
        self.arena.busy += 1
        try:
            return self._read_many_open(limit)
        finally:
            self.arena.busy -= 1
            self.arena._maybe_unmap()

    cdef list _read_many_open(self, Py_ssize_t limit):
        cdef a0_read_t first, cur, after
        cdef a0_err_t err
        cdef Py_ssize_t batch_len
        cdef uint64_t batch_bytes
        out = []
        while limit != 0:
            err = a0_transport_read_begin(&self.t, &first)
            if err == A0_ERR_NO_FRAME:
                break
            if err == A0_ERR_CORRUPT:
                if out:
                    break  # what was read first; the next call meets the damage
                _skip_damaged_or_raise(&self.t, self.arena._describe())
                continue
            if err:
                self._raise_read(err)
            batch = []
            batch_bytes = 0
            cur = first
            while True:
                data = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>cur.size)
                _copy_out(PyBytes_AS_STRING(data), cur.data, cur.size)
                batch.append((cur.seq, data))
                batch_len = len(batch)
                batch_bytes += cur.size
                # Big frames: a short batch, as read_into's (a lapped reader's
                # batch must be copied before the writer reaches its first frame).
                if batch_len == limit or batch_len == _READ_BATCH or batch_bytes >= _BULK_BATCH_BYTES:
                    break
                if a0_transport_read_after(&self.t, &cur, &after) != A0_OK:
                    break  # the newest frame, or a race that the check below will see
                cur = after
            err = a0_transport_read_end(&self.t, &first, &cur)
            if err == A0_ERR_EVICTED:
                continue  # overtaken while copying: this batch is discarded, read again
            if err:
                self._raise_read(err)
            out.extend(batch)
            if limit > 0:
                limit -= batch_len
        return out

    def read_into(self, out, *, offset=0, max_frames=None, max_bytes=None, prefix=None):
        """Copies the frames after the cursor into ``out`` (a writable
        bytes-like buffer: bytearray, writable memoryview, numpy array) from
        byte ``offset`` on, each preceded by ``prefix`` (a
        :class:`FramePrefix`: template bytes with the frame's seq and size
        stored at fixed offsets; None: 16 bytes, seq u64 then size u64,
        little-endian), the frame's bytes right after its prefix.

        One call, GIL released while copying, no lock, no Python object per
        frame: frames are copied in batches and each batch is kept only if
        it was still live afterwards (as :meth:`read_many`); a batch that a
        writer overtook is dropped and read again, its frames counted as
        missed. Stops at ``max_frames`` frames, when the next frame would
        pass the end of ``out`` or ``max_bytes`` bytes, when no frame is
        left, or at a gap after the first frame (so the frames of a call
        have consecutive seqs and its gap lies just before them).

        Returns ``(frames, nbytes, first_seq, last_seq, gap_first,
        gap_last)``: the frames and their prefixes written to
        ``out[offset:offset + nbytes]`` (bytes past that are scratch), the
        seqs of the first and last (0 if none), and the seqs removed unread
        just before the first (0, 0 if none; as :attr:`missed`, only once
        the cursor has read a frame).

        Raises BufferTooSmallError (an ArgumentError) if the first frame and
        its prefix do not fit the room given (its ``needed`` and ``seq`` say
        which; nothing is read); ArgumentError for a read-only or
        non-contiguous ``out``, an ``offset`` past its end, a negative or
        non-integer count, a ``prefix`` that is not a FramePrefix;
        ClosedError, ArenaCorruptError (a damaged frame header, as
        :meth:`read_next`, after the frames before it were returned), and
        LockError if writers overtook the copies 1024 times in a row."""
        cdef Py_buffer buf
        cdef _BulkSink sink
        cdef a0_err_t err
        cdef FramePrefix layout
        cdef uint64_t off = _as_size(offset, "read_into offset", self.arena)
        cdef uint64_t limit_frames = 0xFFFFFFFFFFFFFFFF
        cdef uint64_t limit_bytes = 0xFFFFFFFFFFFFFFFF
        if max_frames is not None:
            limit_frames = _as_size(max_frames, "max_frames", self.arena)
        if max_bytes is not None:
            limit_bytes = _as_size(max_bytes, "max_bytes", self.arena)
        if prefix is None:
            layout = _DEFAULT_PREFIX
        elif type(prefix) is FramePrefix:
            layout = <FramePrefix>prefix
        else:
            raise ArgumentError(f"{self.arena._describe()}: read_into prefix must be an a0py.FramePrefix "
                                f"(or None: seq u64, size u64), not {type(prefix).__name__}")
        memset(&sink, 0, sizeof(sink))
        sink.max_frames = limit_frames
        try:
            PyObject_GetBuffer(out, &buf, PyBUF_WRITABLE)
        except (TypeError, BufferError) as e:
            raise ArgumentError(f"{self.arena._describe()}: read_into needs a writable, contiguous "
                                f"buffer (bytearray, writable memoryview), not "
                                f"{type(out).__name__} ({e})") from None
        try:
            if off > <uint64_t>buf.len:
                raise ArgumentError(f"{self.arena._describe()}: read_into offset {off} is past the end "
                                    f"of the buffer ({buf.len} bytes)")
            sink.base = <uint8_t*>buf.buf + off
            sink.room = <uint64_t>buf.len - off
            if limit_bytes < sink.room:
                sink.room = limit_bytes
            self.arena._check_open()
            self.arena.busy += 1
            while True:
                with nogil:
                    err = _read_prefixed(&self.t, &sink, &layout.p)
                if err != A0_ERR_CORRUPT:
                    break
                self.arena.busy -= 1
                self.arena._maybe_unmap()
                _skip_damaged_or_raise(&self.t, self.arena._describe())
                self.arena._check_open()
                self.arena.busy += 1
            self.arena.busy -= 1
            self.arena._maybe_unmap()
            if err:
                self._raise_read(err)
            if sink.need:
                room = (f"max_bytes {limit_bytes}" if limit_bytes < <uint64_t>buf.len - off
                        else f"{sink.room} bytes from offset {off} of a {buf.len}-byte buffer")
                raise BufferTooSmallError(
                    f"{self.arena._describe()}: frame {sink.need_seq} of "
                    f"{sink.need - layout.p.size} bytes needs {sink.need} bytes with its "
                    f"{layout.p.size}-byte prefix, and read_into was given {room}: give it at least "
                    f"{sink.need} bytes",
                    needed=sink.need, seq=sink.need_seq)
            return (sink.frames, sink.used, sink.first_seq, sink.last_seq, sink.gap_first,
                    sink.gap_last)
        finally:
            PyBuffer_Release(&buf)

    def read_view(self, timeout=None):
        """A zero-copy read, validated when it ends::

            with tr.read_view(timeout=1.0) as frame:
                process(frame.seq, frame.data)   # a read-only memoryview into the arena

        Waits (as :meth:`read_next`; timeout=None: as long as it takes) for
        the next frame and gives a :class:`ReadView` of it; no lock is held.
        On leaving the block the view is released and the frame is checked:
        if a writer evicted it meanwhile (its bytes may have been written
        over while the block read them), FrameEvictedError is raised, and the
        cursor stays, and the next read lands ahead of the writer as
        :meth:`read_next`'s. Otherwise the cursor moves to the frame.

        Raises A0TimeoutError (no frame within the timeout), LockError (a
        read_view of this Transport is already open), FrameEvictedError (on
        exit), ArenaCorruptError (as :meth:`read_next`), ArgumentError,
        ClosedError."""
        cdef ReadView view = ReadView.__new__(ReadView)
        view.tr = self
        if timeout is not None:
            if (type(timeout) is int or type(timeout) is float) and timeout == 0:
                view.has_deadline = -1  # don't wait: no clock needed
            else:
                view.has_deadline = _make_deadline(timeout, &view.deadline, self.arena)
        view.timeout = timeout
        return view

    def __repr__(self):
        return f"<a0py.Transport on {self.arena._describe()}>"


cdef class ReadView:
    """A frame read without the lock, from :meth:`Transport.read_view`:
    `seq`, `size`, and `data`, a read-only zero-copy memoryview into the
    arena, valid inside the ``with`` block only. Whether the frame stayed
    intact is known when the block ends (FrameEvictedError if not)."""

    def __init__(self):
        raise TypeError("read views come from Transport.read_view()")

    def __enter__(self):
        cdef Transport tr = self.tr
        cdef a0_err_t err
        if self.state != 0:
            raise LockError("a read_view() is entered once; call read_view() again for the next frame")
        if tr._view_open:
            raise LockError(f"{tr.arena._describe()}: a read_view of this Transport is already open "
                            "(its cursor moves when that block ends)")
        tr.arena._check_open()
        while True:
            err = a0_transport_read_begin(&tr.t, &self.r)
            if err == A0_OK:
                break
            if err == A0_ERR_CORRUPT:
                _skip_damaged_or_raise(&tr.t, tr.arena._describe())
                continue
            if err != A0_ERR_NO_FRAME:
                tr._raise_read(err)
            timed_out = self.has_deadline < 0 or (self.has_deadline and a0_deadline_passed(&self.deadline))
            if timed_out or not tr._wait_readable(&self.deadline if self.has_deadline else NULL):
                raise A0TimeoutError(f"no frame to read in {tr.arena._describe()} "
                                     f"within {self.timeout} s")
        self.state = 1
        self._view = memoryview(self)  # exported by this object: counted by the arena
        tr._view_open = True
        return self

    def __getbuffer__(self, Py_buffer* view, int flags):
        if self.state != 1:
            raise BufferError("a read_view's data is readable only inside its with-block")
        if flags & PyBUF_WRITABLE:
            raise BufferError("frame data is read-only")
        PyBuffer_FillInfo(view, self, <void*>self.r.data, <Py_ssize_t>self.r.size, 1, flags)
        self.tr.arena.exports += 1

    def __releasebuffer__(self, Py_buffer* view):
        self.tr.arena.exports -= 1
        self.tr.arena._maybe_unmap()

    def __exit__(self, exc_type, exc, tb):
        cdef Transport tr = self.tr
        if self.state != 1:
            return False
        cdef a0_err_t err
        self.state = 2
        tr._view_open = False
        tr.arena.busy += 1  # releasing the view must not let a close() unmap before the check
        try:
            try:
                self._view.release()
            except BufferError:
                pass  # a derived view (memoryview(v), numpy) keeps it: memory-safe, not revocable
            err = a0_transport_read_end(&tr.t, &self.r, &self.r)
        finally:
            tr.arena.busy -= 1
            tr.arena._maybe_unmap()
        if err == A0_OK or exc_type is not None:
            return False  # the block's own exception goes first
        if err == A0_ERR_EVICTED:
            raise FrameEvictedError(
                f"frame {self.r.seq} of {tr.arena._describe()} was evicted while the read_view "
                "block used it: what the block read may be torn. Read again; the reader is "
                "falling behind (a larger arena gives it more time)")
        tr._raise_read(err)

    @property
    def seq(self):
        return self.r.seq

    @property
    def size(self):
        return self.r.size

    @property
    def data(self):
        if self.state != 1:
            raise LockError("a read_view's data is readable only inside its with-block")
        return self._view

    def __len__(self):
        return self.r.size

    def __repr__(self):
        return f"<a0py.ReadView seq={self.r.seq} size={self.r.size}>"


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
            _check_err(self.tr._release(self.lk), f"unlocking {self.tr.arena._describe()}")
        return False

    cdef int _check(self) except -1:
        if not self.active:
            raise LockError("the transport's lock is not held: use it inside `with transport.lock() as t:`")
        return 0

    cdef object _wrap(self, uint8_t* data, uint64_t size, bint writable, uint64_t seq):
        cdef _Buffer buf = _lend(self.tr.arena, data, <Py_ssize_t>size, writable)
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
        cdef uint64_t size = _as_size(n, "frame size", self.tr.arena)
        self._check()
        cdef a0_err_t err = a0_transport_alloc(self.lk, size, &data)
        if err:
            if err == A0_ERR_FRAME_TOO_LARGE:
                _frame_too_large(self.tr.arena, size, a0_transport_max_frame_data(&self.tr.t))
            _raise(err, f"alloc({size})")
        if self.views:
            self._release_evicted()
        return self._wrap(data, size, True, a0_transport_seq_high(self.lk))

    def alloc_evicts(self, n):
        """Whether alloc(n) would evict at least one frame; changes nothing."""
        cdef c_bool evicts = 0
        cdef uint64_t size = _as_size(n, "frame size", self.tr.arena)
        self._check()
        cdef a0_err_t err = a0_transport_alloc_evicts(self.lk, size, &evicts)
        if err == A0_ERR_FRAME_TOO_LARGE:
            _frame_too_large(self.tr.arena, size, a0_transport_max_frame_data(&self.tr.t))
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
        if self.views:
            self._release_evicted()

    def drop_through(self, seq):
        """Removes the frames from the oldest through `seq` and publishes at
        once: a consumer that has read through `seq` gives their room back to
        writers waiting in ``write(data, evict=False)``. Nothing happens for a
        `seq` below the oldest frame; a `seq` at or above the newest empties
        the ring (seqs keep counting up).

        Raises LockError if frames allocated under this lock are not
        committed yet (dropping publishes, which would commit them),
        ArgumentError for a bad seq."""
        cdef uint64_t s = _as_size(seq, "seq", self.tr.arena)
        self._check()
        cdef a0_err_t err = a0_transport_drop_through(self.lk, s)
        if err == A0_ERR_PENDING:
            raise LockError(f"drop_through({s}) on {self.tr.arena._describe()}: commit the frames "
                            "allocated under this lock first")
        _check_err(err, f"drop_through({s})")
        if self.views:
            self._release_evicted()

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
        cdef uint64_t s = _as_size(seq, "seq", self.tr.arena)
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
    def relayed_frames(self):
        """Frames that relayed writers (:attr:`Transport.relayed`) have
        committed to this arena, ever, as of the state this lock holds."""
        self._check()
        return self.lk.t.work.relayed_frames

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
        cdef int has_deadline = _make_deadline(timeout, &ts, self.tr.arena)
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
            raise ArgumentError(f"{self.tr.arena._describe()}: predicate must be callable, "
                                f"not {type(predicate).__name__}")
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
        cdef uint64_t target = _as_size(seq, "seq", self.tr.arena)
        self._check()
        cdef int has_deadline = _make_deadline(timeout, &ts, self.tr.arena)
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
            # Relocking failed: the lock is no longer held; uncount it now.
            self.active = False
            self.tr._release(self.lk)
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
