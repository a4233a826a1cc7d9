# binding/packet_writer.pxi — PacketWriter (copying writes, with the standard
# headers and a cache of array layouts) and PacketAlloc (its zero-copy write).
# Included by a0py/_core.pyx after packet.pxi.
#
# Invariants:
#  - The writer assigns a0_transport_seq under the lock, from seq_high + 1,
#    which is exactly the seq a0_transport_alloc gives the frame.
#  - A forked child's writer takes a new identity (writer id, id generator,
#    writer seq) before its first write.

cdef enum:
    # Headers of one write encoded from an array on the stack (more: malloc).
    _STACK_HEADERS = 32
    # a0_time_wall is the monotonic time plus an offset re-read from
    # CLOCK_REALTIME at least this often (ns): one clock read per packet
    # instead of two (a clock read costs as much as the rest of the
    # header encoding here), at most 1 ms late to see a step of the clock
    # and a few ns off during an NTP slew.
    _WALL_RESYNC_NS = 1000000

# Bumped in a forked child: writers then take a new identity (writer id, id
# generator, writer seq), so parent and child never write the same ids.
cdef uint64_t _fork_generation = 0


def _packet_after_fork_in_child():
    global _fork_generation
    _fork_generation += 1


os.register_at_fork(after_in_child=_packet_after_fork_in_child)


# Why a layout cache in the writer (bench/typed.py, 4 KiB float64 arrays, one
# process, 2026-11-26): pub(ndarray) went through the Python encoder every time
# (a call, a dict lookup keyed by dtype, shape and strides, a tuple back), and
# pub(ndarray) + read().array() cost 4.0x pub(bytes) + read(); with the layout
# compared here in C it costs ≈ 960 instructions more than pub(bytes) (1,970),
# ≈ 600 of them numpy's buffer export, and the pair 1.65x (docs/performance.md).
# numpy builds the buffer's format string only when asked for one
# (PyBUF_FORMAT): a writer given a layout token (an attribute whose object
# fixes the format: numpy's dtype of a plain dtype) asks for shape and
# strides only, and compares that object by identity instead of the format.
# Measured with numpy 2.4.6 (callgrind, bench/typed.py --loop view,
# 2026-12-07): the export fell from ≈ 610 to ≈ 360 instructions, the
# getattr of the dtype costs ≈ 160, so ≈ 90 fewer a pub(ndarray) in all.
# A LayoutHook (below) does better where one is given: a0py.proto's
# compiled ArrayLayouts reads the array's own fields (no getattr, no export,
# no key): ≈ 110 instructions instead of ≈ 760 (same run), so this cache
# serves only where that module is not built.
from cpython.buffer cimport PyBUF_STRIDES
cdef enum:
    # Layouts a writer remembers (see PacketWriter._remember_layout), and the
    # largest key of one: format (at most 32 bytes), ndim, shape, strides.
    _MAX_LAYOUTS = 8
    _LAYOUT_MAX_DIMS = 32
    _LAYOUT_FORMAT_MAX = 32
    _LAYOUT_KEY_MAX = 16 + _LAYOUT_FORMAT_MAX + 2 * _LAYOUT_MAX_DIMS * 8


cdef Py_ssize_t _layout_key(Py_buffer* buf, char* key, bint with_format) noexcept:
    """Writes the layout of `buf` (itemsize, ndim, format unless not
    `with_format`, shape, strides) into `key` (at least _LAYOUT_KEY_MAX
    bytes); its length, or -1 for a buffer whose layout is not kept (its
    memory not one block of buf.len bytes from buf.buf, too many
    dimensions, a long format)."""
    cdef Py_ssize_t flen = 0, i, n, expect_c, expect_f
    cdef bint c_ok = True, f_ok = True
    cdef const char* fmt = buf.format
    cdef Py_ssize_t* shape = buf.shape
    cdef Py_ssize_t* strides = buf.strides
    if buf.ndim > _LAYOUT_MAX_DIMS or buf.ndim < 0 or (buf.ndim > 0 and (shape == NULL or strides == NULL)):
        return -1
    if not with_format:
        fmt = ""  # the layout token stands for it
    elif fmt == NULL:
        fmt = "B"  # the buffer protocol's default: unsigned bytes
    while fmt[flen] != 0:
        flen += 1
        if flen >= _LAYOUT_FORMAT_MAX:
            return -1
    if buf.suboffsets != NULL:
        return -1
    # One block of memory: the strides of a C- or Fortran-ordered array
    # (dimensions of length 1 may have any stride).
    expect_c = expect_f = buf.itemsize
    for i in range(buf.ndim):
        n = buf.ndim - 1 - i
        if shape[n] != 1 and strides[n] != expect_c:
            c_ok = False
        expect_c *= shape[n]
        if shape[i] != 1 and strides[i] != expect_f:
            f_ok = False
        expect_f *= shape[i]
    if not (c_ok or f_ok) or expect_c != buf.len:
        return -1
    memcpy(key, &buf.itemsize, sizeof(Py_ssize_t))
    n = sizeof(Py_ssize_t)
    key[n] = <char>buf.ndim
    key[n + 1] = <char>flen
    memcpy(key + n + 2, fmt, flen)
    n += 2 + flen
    if buf.ndim:
        memcpy(key + n, shape, buf.ndim * sizeof(Py_ssize_t))
        n += buf.ndim * sizeof(Py_ssize_t)
        memcpy(key + n, strides, buf.ndim * sizeof(Py_ssize_t))
        n += buf.ndim * sizeof(Py_ssize_t)
    return n


cdef class LayoutHook:
    """A compiled layout cache a writer consults first for values that are not
    bytes, a str or a Packet (``PacketWriter._set_layout_hook``):
    ``known(value, &data, &size)`` (a C method) gives the prefix (bytes) to
    write before `size` bytes at `data`, the value's own memory, when `value`
    has a layout published before; or None, and the value goes on to the
    writer's other paths. This base knows nothing; a0py.proto's array topics
    subclass it (a0py.proto._ndarray.ArrayLayouts), so that the binding does
    not depend on numpy.

    Contract for subclasses: `data` must point into memory that `value`
    itself keeps alive (the writer holds a reference to `value` until the
    copy is made), `size` bytes of it one block; nothing may raise."""

    cdef object known(self, object value, const char** data, Py_ssize_t* size):
        return None


cdef class PacketWriter:
    """Writes packets to an arena, each with the standard headers
    (``a0_time_mono``, ``a0_time_wall``: nanoseconds of CLOCK_MONOTONIC and
    of the Unix epoch; ``a0_writer_id``: this writer's UUID;
    ``a0_writer_seq``: 1, 2, 3... per writer; ``a0_transport_seq``: the
    frame's seq) ahead of the caller's.

    Thread-safe: every write locks the arena with state of its own. A forked
    child's writer takes a new writer id and restarts its writer seq.
    :class:`a0py.Publisher` is this class bound to a topic."""

    cdef readonly Arena arena
    cdef a0_transport_t proto_t
    cdef a0_packet_idgen_t idgen
    cdef uint64_t wseq
    cdef uint8_t wid[16]
    cdef uint64_t fork_generation
    cdef int64_t wall_offset
    cdef uint64_t wall_synced
    cdef uint64_t large_above  # see _watch_large
    cdef object _label
    cdef object _encoder
    cdef object _layout_type   # the type whose buffer layouts have prefixes remembered, or None
    cdef object _token_attr    # the layout token's attribute name (str), or None: see _remember_layout
    cdef list _layouts         # [(layout key bytes, prefix bytes, token or None)], see _remember_layout
    cdef readonly LayoutHook layout_hook  # consulted first by pub(), or None: see _set_layout_hook

    def __cinit__(self, *args, **kwargs):
        self.arena = None
        self.large_above = UINT64_MAX
        self._layouts = []

    def __init__(self, arena, label=None):
        self._bind(arena, label)

    def _set_encoder(self, encoder):
        """`encoder(value)` is called by :meth:`pub` for every value that is
        not bytes, a str or a Packet (how a0py.proto publishes typed values:
        protobuf messages, arrays). It returns the payload, bytes-like, or a
        pair ``(prefix, body)`` of bytes-like objects written back to back
        (one copy of the body, straight into the frame); or raises."""
        if encoder is not None and not callable(encoder):
            raise ArgumentError(f"encoder must be callable, not {type(encoder).__name__}")
        self._encoder = encoder
        self._layout_type = None
        self._token_attr = None
        self._layouts = []
        self.layout_hook = None

    def _set_layout_hook(self, hook):
        """`hook` (a :class:`LayoutHook`, or None) is asked first by
        :meth:`pub` for every value that goes to the encoder otherwise: a
        value it knows is written as its prefix and its own memory, with no
        encoder call and no buffer export. Set after :meth:`_set_encoder`
        (which forgets it, with every layout remembered for the old encoder).
        ArgumentError for anything else."""
        if hook is not None and not isinstance(hook, LayoutHook):
            raise ArgumentError(f"a layout hook must be an a0py LayoutHook, not {type(hook).__name__}")
        self.layout_hook = hook

    def _remember_layout(self, value, prefix, token_attr=None):
        """Remembers that a value of ``type(value)`` with `value`'s buffer
        layout (format, shape, strides: the buffer protocol's, so arrays of
        one dtype and shape) is published as `prefix` + its bytes, so that
        :meth:`pub` writes the next such value without calling the encoder.
        For an encoder that has checked this value (kind, contiguity, size)
        and whose payload depends on nothing but its layout; the
        encoder's schema checks are thereby done for good. At most
        _MAX_LAYOUTS layouts and one type (a new type forgets the others).

        `token_attr`: the name of an attribute of such values whose object
        alone fixes their buffer's format (numpy's ``dtype``, for dtypes
        without fields); the layout is then remembered with that object,
        and a later value matches it by that object's identity and its
        shape and strides, its buffer asked for no format string (which
        numpy builds anew on every export). A value whose object is another
        (an equal dtype made anew) goes to the encoder. A new `token_attr`
        forgets the layouts remembered without it, and the reverse.

        Returns whether it was remembered (False for a value whose buffer
        is not one contiguous block). Raises ArgumentError for a prefix
        that is not bytes, a `token_attr` that is not a str or that
        `value` lacks."""
        cdef Py_buffer buf
        cdef char key[_LAYOUT_KEY_MAX]
        cdef Py_ssize_t n
        cdef object token = None
        if not isinstance(prefix, bytes):
            raise ArgumentError(f"prefix must be bytes, not {type(prefix).__name__}")
        if token_attr is not None:
            if not isinstance(token_attr, str):
                raise ArgumentError(f"token_attr must be a str, not {type(token_attr).__name__}")
            try:
                token = getattr(value, token_attr)
            except AttributeError:
                raise ArgumentError(f"a {type(value).__name__} has no attribute {token_attr!r} "
                                    "(the layout token)") from None
        try:
            PyObject_GetBuffer(value, &buf, PyBUF_RECORDS_RO if token_attr is None else PyBUF_STRIDES)
        except (TypeError, BufferError, ValueError):
            return False
        try:
            n = _layout_key(&buf, key, token_attr is None)
            if n < 0:
                return False
            if type(value) is not self._layout_type or token_attr != self._token_attr:
                self._layouts = []
                self._layout_type = type(value)
                self._token_attr = token_attr
            if len(self._layouts) >= _MAX_LAYOUTS:
                return False
            self._layouts.append((PyBytes_FromStringAndSize(key, n), prefix, token))
            return True
        finally:
            PyBuffer_Release(&buf)

    cdef object _known_layout(self, object value, Py_buffer* buf):
        """The prefix remembered for `value`'s layout, with `buf` holding its
        buffer (the caller releases it); None (nothing held) if unknown."""
        cdef char key[_LAYOUT_KEY_MAX]
        cdef Py_ssize_t n
        cdef bytes known
        cdef tuple row
        cdef object token = None
        if self._token_attr is not None:
            token = getattr(value, self._token_attr)  # checked for identity below
            if PyObject_GetBuffer(value, buf, PyBUF_STRIDES) != 0:  # raised: not a plain buffer
                return None
        elif PyObject_GetBuffer(value, buf, PyBUF_RECORDS_RO) != 0:
            return None
        n = _layout_key(buf, key, self._token_attr is None)
        if n >= 0:
            for entry in self._layouts:
                row = <tuple>entry
                known = <bytes>row[0]
                if (row[2] is token and PyBytes_GET_SIZE(known) == n
                        and memcmp(PyBytes_AS_STRING(known), key, n) == 0):
                    return row[1]
        PyBuffer_Release(buf)
        return None

    def _bind(self, arena, label=None):
        """Binds the writer to `arena` (for subclasses that find the arena
        themselves). `label` names it in error messages."""
        if not isinstance(arena, Arena):
            raise ArgumentError(f"a packet writer needs an a0py.Arena, not {type(arena).__name__}")
        (<Arena>arena)._check_open()
        cdef a0_err_t err = a0_transport_init(&self.proto_t, (<Arena>arena).base, (<Arena>arena).size)
        if err:
            _raise(err, arena._describe())
        self.arena = arena
        self._label = label if label is not None else arena._describe()
        self.large_above = UINT64_MAX
        self._new_identity()

    def _watch_large(self, fits):
        """Call ``self._large_packet(packet_size)`` once, after the write
        (lock released), for the first packet (`packet_size`: its bytes,
        headers included) whose frame fits fewer than `fits` times in the
        arena's ring (0: never). One comparison per write, so a sizing
        policy above the binding costs nothing on the hot path. Raises
        ArgumentError for a bad `fits`, ClosedError."""
        cdef uint64_t n = _as_size(fits, "fits")
        self._check_bound()
        self.large_above = UINT64_MAX
        if n == 0:
            return
        # The largest packet whose frame (header + data, aligned) fits n
        # times in the workspace; larger ones set the hook off.
        cdef uint64_t slot = ((a0_transport_workspace_size(&self.proto_t) // n)
                              & ~(<uint64_t>A0_FRAME_ALIGN - 1))
        self.large_above = slot - A0_FRAME_HDR_SIZE if slot > A0_FRAME_HDR_SIZE else 0

    def _large_packet(self, packet_size):
        """Called as `_watch_large` says; subclasses say what to do."""

    cdef int _after_large(self, uint64_t total) except -1:
        self.large_above = UINT64_MAX  # once
        self._large_packet(total)
        return 0

    cdef _new_identity(self):
        seed = int.from_bytes(os.urandom(8), "little")
        a0_packet_idgen_seed(&self.idgen, <uint64_t>seed)
        cdef bytes raw_id = _new_id()
        memcpy(self.wid, <const char*>raw_id, 16)
        self.wseq = 0
        self.fork_generation = _fork_generation

    cdef int _check_bound(self) except -1:
        if self.arena is None:
            if self._label is not None:
                raise ClosedError(f"the writer on {self._label} is closed")
            raise ArgumentError("this writer is not bound to an arena")
        if self.fork_generation != _fork_generation:
            self._new_identity()
        return 0

    @property
    def relayed(self):
        """Whether this writer's packets are written as a relayed writer's
        (see :attr:`Transport.relayed`): False by default; set it after the
        writer is bound (a bridge writing what another machine sent)."""
        return bool(self.proto_t.relayed)

    @relayed.setter
    def relayed(self, value):
        if not isinstance(value, bool):
            raise ArgumentError(f"relayed must be True or False, not {value!r}")
        self.proto_t.relayed = 1 if value else 0

    @property
    def writer_id(self):
        """This writer's id (the ``a0_writer_id`` header of its packets)."""
        self._check_bound()
        return _format_id(self.wid)

    @property
    def writer_seq(self):
        """How many packets this writer has written (the last ``a0_writer_seq``)."""
        return self.wseq

    cdef int _encode_locked(self, a0_locked_t lk, const uint8_t* id, tuple user,
                            uint64_t payload_size, uint8_t** payload_out, uint64_t* seq_out,
                            uint64_t* total_out) except -1:
        """Allocates the frame and writes the packet's metadata; the caller
        holds the lock (and releases it if this raises) and fills the payload.
        `total_out`: the packet's size, headers included."""
        cdef a0_packet_header_t stack_h[_STACK_HEADERS]
        cdef a0_packet_header_t* h = stack_h
        cdef uint32_t n = <uint32_t>len(user)
        cdef a0_packet_std_t std
        cdef timespec ts_mono, ts_wall
        cdef uint64_t mono_ns, wall_ns
        cdef uint64_t meta = 0, total = 0
        cdef uint8_t* dst
        cdef a0_err_t err
        if n > _STACK_HEADERS:
            h = <a0_packet_header_t*>malloc(n * sizeof(a0_packet_header_t))
            if h == NULL:
                raise MemoryError()
        try:
            if n:
                _fill_headers(h, user)
            clock_gettime(CLOCK_MONOTONIC, &ts_mono)
            mono_ns = <uint64_t>ts_mono.tv_sec * 1000000000u + <uint64_t>ts_mono.tv_nsec
            if self.wall_synced == 0 or mono_ns - self.wall_synced >= _WALL_RESYNC_NS:
                clock_gettime(CLOCK_REALTIME, &ts_wall)
                wall_ns = <uint64_t>ts_wall.tv_sec * 1000000000u + <uint64_t>ts_wall.tv_nsec
                self.wall_offset = <int64_t>(wall_ns - mono_ns)
                self.wall_synced = mono_ns
            std.time_mono = mono_ns
            std.time_wall = <uint64_t>(<int64_t>mono_ns + self.wall_offset)
            memcpy(std.writer_id, self.wid, 16)
            std.writer_seq = self.wseq + 1
            std.transport_seq = a0_transport_seq_high(lk) + 1  # the seq alloc gives the frame
            err = a0_packet_encoded_size(h, n, payload_size, &meta, &total)
            if not err:
                err = a0_transport_alloc(lk, total, &dst)
            if err:
                if err == A0_ERR_FRAME_TOO_LARGE:
                    raise FrameTooLargeError(
                        f"a packet of {payload_size} payload bytes ({total if total else 'too many'} "
                        f"bytes with its headers) does not fit {self._label}: at most "
                        f"{a0_transport_max_frame_data(lk.t)} bytes per frame in this arena")
                _raise(err, f"writing to {self._label}")
            a0_packet_encode_meta(dst, meta, id, &std, h, n, payload_size)
        finally:
            if h != stack_h:
                free(h)
        payload_out[0] = dst + meta
        seq_out[0] = std.transport_seq
        total_out[0] = total
        return 0

    def pub(self, data, headers=None):
        """Writes one packet and returns its transport seq.

        `data`: bytes or any bytes-like object (the payload), a str (UTF-8),
        or a :class:`Packet` (its id and headers are kept, except the
        standard headers, which this writer writes anew). `headers`: extra
        headers, a mapping or (key, value) pairs of str, added after the
        packet's own.

        Any other value goes to the writer's encoder, if it has one (see
        :meth:`_set_encoder`: how :class:`a0py.Publisher` takes protobuf
        messages and numpy arrays), which raises for what it does not take.

        Raises ArgumentError (bad data or headers, a standard header in
        `headers`), FrameTooLargeError (the packet cannot fit the arena),
        LockError, ClosedError, and the encoder's errors."""
        cdef Py_buffer buf      # the body's buffer, when one is held (release_buf)
        cdef Py_buffer pre      # the encoder's prefix's buffer, when one is held (release_pre)
        cdef bint release_buf = False, release_pre = False, has_body = False
        cdef const char* body = NULL   # the payload: head_len bytes at head, then body_len at body
        cdef const char* head = NULL
        cdef Py_ssize_t body_len = 0, head_len = 0
        cdef tuple user
        cdef const uint8_t* id = NULL
        cdef uint8_t idbuf[16]
        cdef a0_transport_t t
        cdef a0_locked_t lk
        cdef uint8_t* dst
        cdef uint64_t seq, total
        cdef a0_err_t err
        cdef Packet pkt
        self._check_bound()
        cdef Arena arena = self.arena  # close() from another thread must not pull it away
        user = _check_headers(headers, True) if headers is not None else ()
        if isinstance(data, Packet):
            pkt = <Packet>data
            if pkt._headers is None:  # read from a topic: its other headers, undecoded so far
                own = _without_standard(_decode_headers(pkt._meta, "packet", False))
            else:
                own = _without_standard((<Headers>pkt._headers)._items)
            user = own + user if user else own
            id_bytes = pkt._id if pkt._id is not None else pkt._meta[8:24]
            id = <const uint8_t*><const char*>id_bytes
            data = pkt._lent_payload()
        elif isinstance(data, str):
            data = _payload_object(data)
        elif type(data) is not bytes and self._encoder is not None:
            prefix = None
            if self.layout_hook is not None:
                # A layout the hook knows: its prefix, and the value's own
                # memory (kept alive by `data`), no buffer export.
                prefix = self.layout_hook.known(data, &body, &body_len)
                if prefix is not None and type(prefix) is not bytes:
                    raise ArgumentError(f"a layout hook gave a {type(prefix).__name__} prefix, not bytes")
            if prefix is None and type(data) is self._layout_type:
                try:
                    prefix = self._known_layout(data, &buf)  # bytes (_remember_layout checks)
                except (TypeError, BufferError, ValueError, AttributeError):
                    prefix = None
                if prefix is not None:  # buf holds the value's buffer
                    release_buf = True
                    body = <const char*>buf.buf
                    body_len = buf.len
            if prefix is not None:  # a layout written before: the prefix, then the value's memory
                head = PyBytes_AS_STRING(prefix)
                head_len = PyBytes_GET_SIZE(prefix)
                has_body = True
            else:
                data = self._encoder(data)
                if type(data) is tuple:
                    prefix, data = data
                    _get_buffer(prefix, &pre)
                    release_pre = True
                    head = <const char*>pre.buf
                    head_len = pre.len
        if id == NULL:
            a0_packet_id_next(&self.idgen, idbuf)
            id = idbuf
        if not has_body:
            try:
                PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
            except (TypeError, BufferError):
                if release_pre:
                    PyBuffer_Release(&pre)
                raise ArgumentError(f"pub() takes bytes, a bytes-like object, str or a Packet, "
                                    f"not {type(data).__name__}") from None
            release_buf = True
            body = <const char*>buf.buf
            body_len = buf.len
        try:
            t = self.proto_t
            _lock_arena(arena, &t, &lk)
            try:
                self._encode_locked(lk, id, user, <uint64_t>(body_len + head_len), &dst, &seq, &total)
            except BaseException:
                _unlock_arena(arena, lk)
                raise
            if head_len:
                memcpy(dst, head, head_len)
                dst += head_len
            if body_len >= _NOGIL_COPY:
                with nogil:
                    memcpy(dst, body, body_len)
            else:
                memcpy(dst, body, body_len)
            self.wseq += 1  # under the lock: the next writer thread numbers after us
            # Wakes sleepers after unlocking, so they find the lock free.
            err = a0_transport_commit_unlock(lk)
            arena.locks_held -= 1
            arena._maybe_unmap()
            if err:
                _raise(err, f"committing to {self._label}")
        finally:
            if release_buf:
                PyBuffer_Release(&buf)
            if release_pre:
                PyBuffer_Release(&pre)
        if total > self.large_above:
            self._after_large(total)
        return seq

    def alloc(self, size, headers=None):
        """Zero-copy write: ``with writer.alloc(n) as buf:`` gives a writable
        memoryview of the payload of a new n-byte packet, placed in the
        arena; fill it in place. Leaving the block normally publishes the
        packet; leaving it by an exception discards it.

        The arena's lock is held for the whole block: keep it short, and
        do not publish to the same arena inside it (LockError). The view is
        released at the end of the block. Raises ArgumentError,
        FrameTooLargeError."""
        self._check_bound()
        cdef PacketAlloc a = PacketAlloc.__new__(PacketAlloc)
        a.writer = self
        a.size = _as_size(size, "payload size")
        a.headers = _check_headers(headers, True) if headers is not None else ()
        return a

    def close(self):
        """Unbinds the writer (idempotent): later writes raise ClosedError. The
        arena itself stays open for its other users."""
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
        return f"<a0py.PacketWriter {self._label}>"



cdef class PacketAlloc:
    """A zero-copy packet being written (what PacketWriter.alloc returns);
    ``seq`` is its transport seq once entered."""

    cdef PacketWriter writer
    cdef Arena arena
    cdef uint64_t size
    cdef tuple headers
    cdef a0_transport_t t
    cdef a0_locked_t lk
    cdef object view
    cdef bint active
    cdef uint64_t total
    cdef readonly uint64_t seq

    def __init__(self):
        raise TypeError("use PacketWriter.alloc(n)")

    def __enter__(self):
        cdef uint8_t* dst
        cdef uint8_t idbuf[16]
        cdef _LentBuffer buf
        if self.active:
            raise LockError("this alloc() block is already entered")
        self.writer._check_bound()
        self.arena = self.writer.arena
        a0_packet_id_next(&self.writer.idgen, idbuf)
        self.t = self.writer.proto_t
        _lock_arena(self.arena, &self.t, &self.lk)
        try:
            self.writer._encode_locked(self.lk, idbuf, self.headers, self.size, &dst, &self.seq, &self.total)
        except BaseException:
            _unlock_arena(self.arena, self.lk)
            raise
        buf = _lend(self.arena, dst, <Py_ssize_t>self.size, True)
        self.view = memoryview(buf)
        self.active = True
        return self.view

    def __exit__(self, exc_type, exc, tb):
        cdef a0_err_t err
        if not self.active:
            return False
        self.active = False
        try:
            self.view.release()
        except BufferError:
            pass  # a derived view lives on; the mapping outlives it
        self.view = None
        if exc_type is not None:
            _unlock_arena(self.arena, self.lk)  # discards the frame
            return False
        self.writer.wseq += 1  # under the lock, as in pub()
        err = a0_transport_commit_unlock(self.lk)
        self.arena.locks_held -= 1
        self.arena._maybe_unmap()
        if err:
            _raise(err, f"committing to {self.writer._label}")
        if self.total > self.writer.large_above:
            self.writer._after_large(self.total)
        return False
