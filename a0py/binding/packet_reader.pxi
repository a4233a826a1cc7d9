# binding/packet_reader.pxi — PacketReader: the packets of an arena read from a
# cursor of its own, with init/iter modes, the missed and corrupt counts.
# Included by a0py/_core.pyx after packet.pxi; its zero-copy read is the
# PacketView of packet_view.pxi.
#
# Invariants:
#  - No user code runs while a reader holds the arena lock: packets are
#    copied out (metadata and payload, one memcpy each) and the lock released
#    before anything is returned.
#  - A reader's `last` is the seq of the last packet it returned (or the one
#    before the first it should return); a returned seq above last + 1 in
#    ITER_NEXT means packets were evicted unread, and the gap is counted.

cdef enum:
    PACKET_INIT_OLDEST = 0
    PACKET_INIT_MOST_RECENT = 1
    PACKET_INIT_AWAIT_NEW = 2
    PACKET_INIT_FIRST = 3
    PACKET_ITER_NEXT = 0
    PACKET_ITER_NEWEST = 1


cdef c_bool _pred_new_packet(a0_locked_t lk, void* ctx) noexcept nogil:
    return not a0_transport_empty(lk) and a0_transport_seq_high(lk) > (<uint64_t*>ctx)[0]


cdef class PacketReader:
    """Reads the packets of an arena from a cursor of its own.

    `init`: where it starts — 0 oldest (the oldest packet present when it
    was made), 1 most recent (the newest packet present then, or the first
    written after if none), 2 await new (the first written after it was
    made), 3 first (the arena's first packet, seq 1: for a reader made
    before anything was written, such as one that waited for its topic to
    appear; packets evicted before its first read count in `missed`).
    `iter`: how it moves on — 0 next (every packet in order), 1 newest
    (straight to the newest, skipping the rest). :class:`a0py.SubscriberSync`
    is this class bound to a topic, with named constants.

    `missed` counts the packets that were evicted before this reader got to
    them (ITER_NEXT only; skipping is what ITER_NEWEST asks for); `corrupt`
    the frames it skipped because they were not packets or their frame
    header was damaged (each is reported once, as a PacketCorruptError, and
    the reader goes on after it). Use one reader per thread: LockError if
    two threads use one at once.

    ITER_NEXT reads take no lock (as :meth:`Transport.read_next`): a packet
    is copied out of the arena, then kept only if its frame was still live
    after the copy, so a reader never makes a publisher wait. ITER_NEWEST
    jumps the cursor, which takes the lock for that moment."""

    cdef readonly Arena arena
    cdef a0_transport_t t
    cdef uint64_t last
    cdef int init_mode
    cdef int iter_mode
    cdef bint first
    cdef bint busy
    cdef bint view_open
    cdef uint64_t _missed
    cdef uint64_t _corrupt
    cdef object _label
    cdef object _typing

    def __cinit__(self, *args, **kwargs):
        self.arena = None

    def _set_typing(self, typing):
        """Packets this reader returns delegate ``schema``, ``decode()`` and
        ``array()`` to `typing` (an object with a ``schema`` attribute and
        ``decode(pkt)``, ``array(pkt)`` methods: how a0py.proto gives a
        topic's packets their schema), or to nothing (None)."""
        self._typing = typing

    def __init__(self, arena, init=PACKET_INIT_AWAIT_NEW, iter=PACKET_ITER_NEXT, label=None):
        self._bind(arena, init, iter, label)

    def _bind(self, arena, init, iter, label=None):
        """Binds the reader to `arena` and places its cursor (for subclasses
        that find the arena themselves). `label` names it in messages."""
        cdef a0_locked_t lk
        if not isinstance(arena, Arena):
            raise ArgumentError(f"a packet reader needs an a0py.Arena, not {type(arena).__name__}")
        if isinstance(init, bool) or init not in (PACKET_INIT_OLDEST, PACKET_INIT_MOST_RECENT,
                                                  PACKET_INIT_AWAIT_NEW, PACKET_INIT_FIRST):
            raise ArgumentError(f"init must be 0 (oldest), 1 (most recent), 2 (await new) or 3 (first), "
                                f"not {init!r}")
        if isinstance(iter, bool) or iter not in (PACKET_ITER_NEXT, PACKET_ITER_NEWEST):
            raise ArgumentError(f"iter must be 0 (next) or 1 (newest), not {iter!r}")
        (<Arena>arena)._check_open()
        cdef a0_err_t err = a0_transport_init(&self.t, (<Arena>arena).base, (<Arena>arena).size)
        if err:
            _raise(err, arena._describe())
        self.arena = arena
        self._label = label if label is not None else arena._describe()
        self.init_mode = init
        self.iter_mode = iter
        self.first = True
        _lock_arena(self.arena, &self.t, &lk)
        try:
            self._place_cursor(lk)
        finally:
            _unlock_arena(self.arena, lk)

    cdef int _place_cursor(self, a0_locked_t lk) except -1:
        cdef uint64_t low = a0_transport_seq_low(lk), high = a0_transport_seq_high(lk)
        cdef a0_err_t err = A0_OK
        if self.init_mode == PACKET_INIT_FIRST:
            # Cursor unplaced (next is the oldest surviving), and everything
            # from seq 1 owed: frames already evicted are a gap at the first read.
            self.last = 0
        elif a0_transport_empty(lk):
            self.last = high  # everything from the next write on
        elif self.init_mode == PACKET_INIT_OLDEST:
            self.last = low - 1  # cursor unplaced: next is the oldest surviving
        elif self.init_mode == PACKET_INIT_MOST_RECENT:
            self.last = high - 1
            if high - 1 >= low:
                err = a0_transport_jump(lk, high - 1)
        else:
            self.last = high
            err = a0_transport_jump_tail(lk)
        if err:
            _raise(err, f"placing a reader on {self._label}")
        return 0

    cdef int _enter(self) except -1:
        if self.arena is None:
            if self._label is not None:
                raise ClosedError(f"the reader on {self._label} is closed")
            raise ArgumentError("this reader is not bound to an arena")
        if self.busy:
            raise LockError(f"{self._label}: this reader is in use by another thread "
                            "(use one subscriber per thread)")
        if self.view_open:
            raise LockError(f"{self._label}: a read_view block of this reader is open; its "
                            "cursor moves when the block ends: read on after it")
        self.busy = True
        return 0

    cdef int _aim_newest(self) except -1:
        """ITER_NEWEST for a lock-free read: puts the cursor just before the
        newest frame (under the lock, for that moment), so the read that
        follows starts at the newest frame or a newer one."""
        cdef a0_locked_t lk
        cdef uint64_t low, high
        cdef a0_err_t err = A0_OK
        if self.first and self.init_mode == PACKET_INIT_OLDEST:
            return 0  # the oldest comes first, as in _take_locked
        _lock_arena(self.arena, &self.t, &lk)
        try:
            if not a0_transport_empty(lk):
                low = a0_transport_seq_low(lk)
                high = a0_transport_seq_high(lk)
                if high > self.last:
                    if high - 1 >= low:
                        err = a0_transport_jump(lk, high - 1)
                    else:
                        self.t.cur_seq = 0  # before every frame: the next read is the oldest, the newest
        finally:
            _unlock_arena(self.arena, lk)
        if err:
            _raise(err, f"reading {self._label}")
        return 0

    cdef object _take_locked(self, a0_locked_t lk):
        """The next packet under the lock, or None; a corrupt frame is
        returned as a PacketCorruptError (the cursor has moved past it)."""
        cdef a0_frame_t fr
        cdef a0_packet_view_t v
        cdef a0_check_info_t info
        cdef a0_err_t err
        cdef uint64_t gap = 0
        if a0_transport_empty(lk) or a0_transport_seq_high(lk) <= self.last:
            return None
        cdef uint64_t target
        if self.iter_mode == PACKET_ITER_NEWEST and not (self.first and self.init_mode == PACKET_INIT_OLDEST):
            target = a0_transport_seq_high(lk)
            err = a0_transport_jump_tail(lk)
        else:
            target = a0_transport_seq_low(lk)
            if self.t.cur_seq >= target:
                target = self.t.cur_seq + 1
            err = a0_transport_next(lk)
        if not err:
            err = a0_transport_frame(lk, &fr)
        if err == A0_ERR_CORRUPT:
            # A damaged frame header: reported once, the reader goes on after
            # it (ITER_NEWEST moves to the newest frame next time anyway).
            self.first = False
            self.last = target
            self._corrupt += 1
            return PacketCorruptError(f"{self._label}: {_damaged_frames(target, target)} (the arena was "
                                      "damaged, or written by something other than a0py): skipped")
        if err:
            _raise(err, f"reading {self._label}")
        if self.iter_mode == PACKET_ITER_NEXT and fr.seq > self.last + 1:
            gap = fr.seq - self.last - 1
            self._missed += gap
        self.first = False
        self.last = fr.seq
        info.field = NULL
        if a0_packet_view(fr.data, fr.size, &v, &info):
            self._corrupt += 1
            return PacketCorruptError(
                f"{self._label}: frame seq {fr.seq} ({fr.size} bytes) is not an a0py packet: "
                f"{_corrupt_reason(&info)}")
        return _packet_from_view(&v, fr.seq, gap, self._typing)

    cdef object _take_lock_free(self):
        """ITER_NEXT without the lock: the next packet, None if there is none,
        or a PacketCorruptError (cursor moved past it) as
        :meth:`_take_locked`. The packet's bytes are copied, then its frame
        is checked to be still live; a frame evicted meanwhile is read again
        from where the transport lands ahead of the writer (the loss counted
        in `missed`). Nothing a
        torn copy shows is returned or reported: only a frame that checks out
        live is."""
        cdef a0_read_t r
        cdef a0_packet_view_t v
        cdef a0_check_info_t info
        cdef a0_err_t err
        cdef uint64_t gap
        cdef bint corrupt
        cdef unsigned retries = 0
        self.arena._check_open()
        self.arena.busy += 1
        try:
            while True:
                err = a0_transport_read_begin(&self.t, &r)
                if err == A0_ERR_NO_FRAME:
                    return None
                if err == A0_ERR_CORRUPT:
                    skipped = _skip_damaged(&self.t, self._label)
                    if skipped is None:  # the arena changed meanwhile: read again
                        retries += 1
                        if retries >= A0_READ_TRIES:
                            _raise_reader(A0_ERR_BUSY, self._label)
                        continue
                    return self._report_skipped(skipped[0], skipped[1])
                if err:
                    _raise_reader(err, self._label)
                gap = r.seq - self.last - 1 if r.seq > self.last + 1 else 0
                info.field = NULL
                corrupt = a0_packet_view(r.data, r.size, &v, &info) != A0_OK
                if corrupt:
                    reason = _corrupt_reason(&info)
                else:
                    item = _packet_from_view(&v, r.seq, gap, self._typing)
                err = a0_transport_read_end(&self.t, &r, &r)
                if err == A0_ERR_EVICTED:
                    continue  # overwritten while copied: whatever was seen is discarded
                if err:
                    _raise_reader(err, self._label)
                self._missed += gap
                self.first = False
                self.last = r.seq
                if corrupt:
                    self._corrupt += 1
                    return PacketCorruptError(
                        f"{self._label}: frame seq {r.seq} ({r.size} bytes) is not an a0py packet: "
                        f"{reason}")
                return item
        finally:
            self.arena.busy -= 1
            self.arena._maybe_unmap()

    cdef object _report_skipped(self, uint64_t first, uint64_t last):
        """The report of frames first..last skipped by a0_transport_read_skip
        (the cursor is past them): counted, and a PacketCorruptError."""
        if first > self.last + 1:
            self._missed += first - self.last - 1
        self._corrupt += last - first + 1
        self.first = False
        self.last = last
        return PacketCorruptError(f"{self._label}: {_damaged_frames(first, last)} (the arena was damaged, "
                                  "or written by something other than a0py): skipped")

    cdef int _wait_lock_free(self, timespec* deadline) except -1:
        """Sleeps without the lock (GIL released) until a frame after the
        cursor exists. 1, or 0 at the deadline; Ctrl-C raises."""
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
                _raise_reader(err, self._label)
            PyErr_CheckSignals()

    def can_read(self):
        """Whether :meth:`read` would return a packet now."""
        cdef a0_locked_t lk
        cdef bint ready
        cdef a0_err_t err
        cdef c_bool free_ready = False
        self._enter()
        try:
            if self.iter_mode == PACKET_ITER_NEXT:
                self.arena._check_open()
                err = a0_transport_read_ready(&self.t, &free_ready)
                if err:
                    _raise_reader(err, self._label)
                ready = free_ready
            else:
                _lock_arena(self.arena, &self.t, &lk)
                ready = not a0_transport_empty(lk) and a0_transport_seq_high(lk) > self.last
                _unlock_arena(self.arena, lk)
        finally:
            self.busy = False
        return ready

    def read(self):
        """The next packet (per `iter`), or None if there is none; never waits.

        Raises PacketCorruptError for a frame that is not a valid packet or
        whose frame header is damaged (counted in `corrupt`; the reader moves
        past it: the next call goes on), LockError, ClosedError."""
        cdef a0_locked_t lk
        self._enter()
        try:
            if self.iter_mode == PACKET_ITER_NEXT:
                item = self._take_lock_free()
            else:
                _lock_arena(self.arena, &self.t, &lk)
                try:
                    item = self._take_locked(lk)
                finally:
                    _unlock_arena(self.arena, lk)
        finally:
            self.busy = False
        if type(item) is PacketCorruptError:
            raise item
        return item

    def read_blocking(self, timeout=None):
        """The next packet, waiting for one to be written: as long as it
        takes (None) or up to `timeout` seconds.

        Raises A0TimeoutError at the timeout, ArgumentError for a bad
        timeout, PacketCorruptError as :meth:`read`; Ctrl-C interrupts it."""
        cdef a0_locked_t lk
        cdef timespec ts
        cdef a0_err_t err
        cdef int has_deadline
        self._enter()
        try:
            has_deadline = _make_deadline(timeout, &ts)
            if self.iter_mode == PACKET_ITER_NEXT:
                while True:
                    item = self._take_lock_free()
                    if item is not None:
                        break
                    if not self._wait_lock_free(&ts if has_deadline else NULL):
                        item = self._take_lock_free()  # one last look at the deadline
                        if item is None:
                            raise A0TimeoutError(f"{self._label}: no packet within {timeout} s")
                        break
                if type(item) is PacketCorruptError:
                    raise item
                return item
            _lock_arena(self.arena, &self.t, &lk)
            try:
                while True:
                    item = self._take_locked(lk)
                    if item is not None:
                        break
                    with nogil:
                        err = a0_transport_wait(lk, _pred_new_packet, &self.last,
                                                &ts if has_deadline else NULL)
                    if err == A0_ERR_INTERRUPTED:
                        PyErr_CheckSignals()
                    elif err == A0_ERR_TIMEOUT:
                        raise A0TimeoutError(f"{self._label}: no packet within {timeout} s")
                    elif err:
                        _raise(err, f"waiting on {self._label}")
            finally:
                if self.t.locked:
                    _unlock_arena(self.arena, lk)
                else:  # a relock that failed left it unlocked
                    self.arena.locks_held -= 1
                    self.arena._maybe_unmap()
        finally:
            self.busy = False
        if type(item) is PacketCorruptError:
            raise item
        return item

    def read_batch(self, max_packets=64, max_bytes=None):
        """What successive read() calls would return now (up to
        `max_packets`, and once their payloads reach `max_bytes` no more:
        always at least one), without waiting: with ITER_NEWEST the newest
        packet (after the oldest, on a first read with INIT_OLDEST), under
        the lock. A corrupt frame appears in the list as a
        PacketCorruptError instance instead of a Packet. An error after some
        packets were read is left for the next call: they are returned."""
        cdef a0_locked_t lk
        cdef Py_ssize_t limit = <Py_ssize_t>_as_size(max_packets, "max_packets")
        cdef Py_ssize_t byte_limit = -1, total = 0
        if max_bytes is not None:
            byte_limit = <Py_ssize_t>_as_size(max_bytes, "max_bytes")
        out = []
        self._enter()
        try:
            if self.iter_mode == PACKET_ITER_NEXT:
                while len(out) < limit and (byte_limit < 0 or total < byte_limit):
                    try:
                        item = self._take_lock_free()
                    except A0Error:
                        if out:
                            break  # the packets read first; the next call meets the error
                        raise
                    if item is None:
                        break
                    out.append(item)
                    if type(item) is Packet:
                        total += len((<Packet>item)._payload)
                return out
            _lock_arena(self.arena, &self.t, &lk)
            try:
                while len(out) < limit:
                    item = self._take_locked(lk)
                    if item is None:
                        break
                    out.append(item)
            finally:
                _unlock_arena(self.arena, lk)
        finally:
            self.busy = False
        return out

    def read_view(self, timeout=None):
        """A zero-copy read of the next packet (per `iter`), checked when it
        ends::

            with reader.read_view(timeout=1.0) as pkt:
                frame = pkt.array()   # or pkt.payload: read-only, in the arena

        Waits as :meth:`read_blocking` (timeout None: as long as it takes;
        0: not at all). The packet's payload is a read-only memoryview into
        the arena, valid inside the block only; no lock is held. When the
        block ends the frame is checked: if a writer evicted it meanwhile
        (so what the block read may be torn), FrameEvictedError is raised
        and the packet counts as missed; otherwise the reader moves past it.
        Other reads of this reader wait for the block's end (LockError).

        Raises A0TimeoutError (no packet in time), PacketCorruptError (a
        frame that is not a packet: the reader moves past it), LockError,
        ClosedError, FrameEvictedError (at the end of the block)."""
        cdef PacketView view = PacketView.__new__(PacketView)
        view.reader = self
        if timeout is not None:
            if (type(timeout) is int or type(timeout) is float) and timeout == 0:
                view.has_deadline = -1
            else:
                view.has_deadline = _make_deadline(timeout, &view.deadline)
        view.timeout = timeout
        return view

    @property
    def missed(self):
        """Packets evicted before this reader read them, in total."""
        return self._missed

    @property
    def corrupt(self):
        """Frames this reader skipped as corrupt (not a packet, or a damaged
        frame header), in total; each was reported once."""
        return self._corrupt

    @property
    def last_seq(self):
        """Seq of the last packet returned (or the one before the first to come)."""
        return self.last

    def close(self):
        """Unbinds the reader (idempotent): later reads raise ClosedError.
        LockError if another thread is reading through it right now."""
        if self.busy or self.view_open:
            raise LockError(f"{self._label}: cannot close a reader while a read through it is in "
                            "progress (another thread's, or an open read_view block)")
        self.arena = None

    @property
    def closed(self):
        return self.arena is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return f"<a0py.PacketReader {self._label}>"
