# binding/transport.pxi — Transport: an arena's frames with this process's
# cursor (the one-call fast paths: write, write_many; reads without the lock:
# read_next, read_many, read_into, read_view), and the arena lock taken
# through a transport state (_lock_arena, _unlock_arena: what the packet
# writer and reader lock with). Included by a0py/_core.pyx; the zero-copy
# read is read_view.pxi's ReadView, the lock held is locked_transport.pxi's
# LockedTransport.

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
    def spin_max(self):
        """The longest spin of the adaptive waiter, in seconds (default
        50e-6; 0: never spin, sleep at once). The budget grows toward it
        while waits end soon after they begin (caught by the spin, or woken
        within spin_max of the wait's start) and falls to nothing while they
        do not. The first 50 µs of a spin run whatever the machine's load;
        a longer spin goes on only if, then, every runnable task of the
        machine has a CPU (/proc/loadavg), and it yields the CPU between
        polls, so a task that wants this core gets it. At most 1 second.
        Used while :attr:`spin` is None (adaptive)."""
        return self.t.spin_max_ns / 1e9

    @spin_max.setter
    def spin_max(self, value):
        if isinstance(value, (bool, str, bytes)) or not isinstance(value, numbers.Real):
            raise ArgumentError(f"{self.arena._describe()}: spin_max must be a number of seconds, "
                                f"not {value!r}")
        cdef double secs = float(value)
        if not (0 <= secs <= A0_SPIN_MAX_LIMIT_NS / 1e9):  # also rejects NaN
            raise ArgumentError(f"{self.arena._describe()}: spin_max must be between 0 and "
                                f"{A0_SPIN_MAX_LIMIT_NS / 1e9:g} seconds, got {value!r}")
        self.t.spin_max_ns = <uint32_t>(secs * 1e9 + 0.5)

    @property
    def spins(self):
        """How many waits of this Transport spun before they slept or
        returned (a count, for tests and benchmarks)."""
        return self.t.spins

    @property
    def sleeps(self):
        """How many waits of this Transport slept on the futex."""
        return self.t.sleeps

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


# The arena lock taken through a transport state of the caller's own (what
# the packet writer and reader lock with).
cdef int _lock_arena(Arena arena, a0_transport_t* t, a0_locked_t* lk) except -1:
    """Takes the arena's lock through the process-local transport state `t`
    (the same protocol as Transport._acquire: GIL released only while it
    has to wait, the arena counted busy meanwhile so close() defers)."""
    cdef a0_err_t err
    arena._check_open()
    err = a0_transport_trylock(t, lk)
    if err == A0_ERR_BUSY:
        arena.busy += 1
        with nogil:
            err = a0_transport_lock(t, lk)
        arena.busy -= 1
        if not err and arena.closing:
            a0_transport_unlock(lk[0])
            err = A0_ERR_NOT_LOCKED
        if err:
            arena._maybe_unmap()
            arena._check_open()
    if err:
        if err == A0_ERR_DEADLOCK:
            raise LockError(f"{arena._describe()}: this thread already holds its lock (publishing "
                            "inside a `with pub.alloc()` or `with transport.lock()` block of the same arena)")
        _raise(err, f"locking {arena._describe()}")
    arena.locks_held += 1
    return 0


cdef int _unlock_arena(Arena arena, a0_locked_t lk) except -1:
    cdef a0_err_t err = a0_transport_unlock(lk)
    arena.locks_held -= 1
    arena._maybe_unmap()
    if err:
        _raise(err, f"unlocking {arena._describe()}")
    return 0
