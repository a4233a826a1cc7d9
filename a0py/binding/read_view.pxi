# binding/read_view.pxi — ReadView: a frame read without the lock
# (Transport.read_view), lent as a zero-copy memoryview while its block is
# open and validated when the block ends. Included by a0py/_core.pyx after
# transport.pxi.

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
