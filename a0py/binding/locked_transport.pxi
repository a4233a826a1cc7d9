# binding/locked_transport.pxi — LockedTransport (frame operations under the
# arena lock: alloc, commit, the cursor, waits) and Frame (a frame seen
# under it), with the zero-copy views they hand out and their revocation.
# Included by a0py/_core.pyx after transport.pxi.

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
        cdef _LentBuffer buf = _lend(self.tr.arena, data, <Py_ssize_t>size, writable)
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
