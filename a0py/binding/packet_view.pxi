# binding/packet_view.pxi — PacketView: a zero-copy packet read
# (PacketReader.read_view). Included by a0py/_core.pyx after packet_reader.pxi.
#
# Invariant: a zero-copy packet lends its payload from the arena only while
# its block is open: the cursor moves, and the packet counts as read, when
# the block ends and its frame is found still live; an eviction meanwhile is
# a FrameEvictedError, never a silent torn read.
#
# Why the payload's memoryview is made only when asked for (bench/typed.py,
# ``--loop view``, callgrind, 2026-12-07): making it cost ≈ 480 instructions
# and releasing it at the block's end ≈ 390, a fifth of a 4 KiB read; a block
# that only calls pkt.array() needs neither (the array's base is the lent
# buffer itself, as it was through the memoryview).

@cython.freelist(8)
cdef class PacketView:
    """A zero-copy packet read, from :meth:`PacketReader.read_view`: ``with
    view as pkt`` gives the packet, its payload lent from the arena until the
    block ends; the end checks the frame was not evicted meanwhile."""

    cdef PacketReader reader
    cdef a0_read_t r
    cdef uint64_t gap
    cdef _LentBuffer _buf  # the payload's memory, lent while the block is open
    cdef object _view      # the payload's memoryview, once asked for (Packet._lent_payload)
    cdef timespec deadline
    cdef int has_deadline  # 1 deadline, 0 none (wait forever), -1 don't wait
    cdef object timeout
    cdef int state  # 0 new, 1 entered, 2 ended

    def __init__(self):
        raise TypeError("packet views come from PacketReader.read_view()")

    def __enter__(self):
        cdef PacketReader rd = self.reader
        cdef a0_packet_view_t v
        cdef a0_check_info_t info
        cdef a0_err_t err
        cdef Packet pkt
        if self.state != 0:
            raise LockError("a read_view() is entered once; call read_view() again for the next packet")
        rd._enter()
        try:
            rd.arena._check_open()
            if rd.iter_mode == PACKET_ITER_NEWEST:
                rd._aim_newest()
            while True:
                err = a0_transport_read_begin(&rd.t, &self.r)
                if err == A0_ERR_NO_FRAME:
                    timed_out = self.has_deadline < 0 or (self.has_deadline
                                                          and a0_deadline_passed(&self.deadline))
                    if timed_out or not rd._wait_lock_free(&self.deadline if self.has_deadline else NULL):
                        raise A0TimeoutError(f"{rd._label}: no packet within {self.timeout} s")
                    if rd.iter_mode == PACKET_ITER_NEWEST:
                        rd._aim_newest()
                    continue
                if err == A0_ERR_CORRUPT:
                    skipped = _skip_damaged(&rd.t, rd._label)
                    if skipped is None:  # the arena changed meanwhile: read again
                        continue
                    raise rd._report_skipped(skipped[0], skipped[1])
                if err:
                    _raise_reader(err, rd._label)
                self.gap = 0
                if rd.iter_mode == PACKET_ITER_NEXT and self.r.seq > rd.last + 1:
                    self.gap = self.r.seq - rd.last - 1
                info.field = NULL
                if a0_packet_view(self.r.data, self.r.size, &v, &info) == A0_OK:
                    break
                reason = _corrupt_reason(&info)
                err = a0_transport_read_end(&rd.t, &self.r, &self.r)
                if err == A0_ERR_EVICTED:
                    continue  # overwritten while looked at: what was seen says nothing
                if err:
                    _raise_reader(err, rd._label)
                rd._missed += self.gap
                rd._corrupt += 1
                rd.first = False
                rd.last = self.r.seq
                raise PacketCorruptError(
                    f"{rd._label}: frame seq {self.r.seq} ({self.r.size} bytes) is not an a0py "
                    f"packet: {reason}")
            pkt = Packet.__new__(Packet)
            pkt._meta = PyBytes_FromStringAndSize(<const char*>v.base, <Py_ssize_t>v.meta_size)
            self._buf = _lend(rd.arena, <uint8_t*>v.payload, <Py_ssize_t>v.payload_size, False)
            pkt._payload = None  # made from _buf when asked for
            pkt._seq = self.r.seq
            pkt._missed = self.gap
            pkt._typing = rd._typing
            pkt._lease = self
            self.state = 1
            rd.view_open = True
        finally:
            rd.busy = False
        return pkt

    def __exit__(self, exc_type, exc, tb):
        cdef PacketReader rd = self.reader
        cdef Arena arena
        cdef a0_err_t err
        if self.state != 1:
            return False
        self.state = 2
        rd.view_open = False
        arena = rd.arena
        arena.busy += 1  # releasing the view must not let a close() unmap before the check
        try:
            if self._view is not None:
                try:
                    self._view.release()
                except BufferError:
                    pass  # a derived view (numpy) keeps the mapping alive: memory-safe, not revocable
            self._buf = None  # an array made over it keeps it (and the mapping) alive
            err = a0_transport_read_end(&rd.t, &self.r, &self.r)
        finally:
            arena.busy -= 1
            arena._maybe_unmap()
        if err == A0_OK:
            rd._missed += self.gap
            rd.first = False
            rd.last = self.r.seq
            return False
        if exc_type is not None:
            return False  # the block's own exception goes first
        if err == A0_ERR_EVICTED:
            raise FrameEvictedError(_evicted_message(rd._label, self.r.seq))
        _raise_reader(err, rd._label)

    @property
    def seq(self):
        """The packet's seq (0 before the block is entered)."""
        return self.r.seq if self.state else 0

    def __repr__(self):
        state = ("not entered", "open", "ended")[self.state]
        return f"<a0py.PacketView {self.reader._label} {state}>"
