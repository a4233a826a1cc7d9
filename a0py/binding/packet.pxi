# binding/packet.pxi — packets (csrc/a0_packet.h) in frames: the Packet
# object, the writer (copying and zero-copy) and the reader cursor with its
# init/iter modes and missed count. Included by a0py/_core.pyx, whose Arena
# and transport internals it uses; it knows nothing of topics (a0py.proto
# builds Publisher and SubscriberSync on these classes).
#
# Invariants:
#  - Bytes read from an arena are decoded only through a0_packet_view*: a
#    corrupt frame is a PacketCorruptError naming the field, never a stray read.
#  - The writer assigns a0_transport_seq under the lock, from seq_high + 1,
#    which is exactly the seq a0_transport_alloc gives the frame.
#  - No user code runs while a reader holds the arena lock: packets are
#    copied out (metadata and payload, one memcpy each) and the lock released
#    before anything is returned.
#  - A reader's `last` is the seq of the last packet it returned (or the one
#    before the first it should return); a returned seq above last + 1 in
#    ITER_NEXT means packets were evicted unread, and the gap is counted.

STANDARD_HEADERS = ("a0_time_mono", "a0_time_wall", "a0_writer_id", "a0_writer_seq",
                    "a0_transport_seq")
_STANDARD_SET = frozenset(STANDARD_HEADERS)

cdef enum:
    _STACK_HEADERS = 32
# Payloads of at least _NOGIL_COPY bytes (transport.pxi) are copied with the GIL released.
    # a0_time_wall is the monotonic time plus an offset re-read from
    # CLOCK_REALTIME at least this often (ns): one clock read per packet
    # instead of two (a clock read costs as much as the rest of the
    # header encoding here), at most 1 ms late to see a step of the clock
    # and a few ns off during an NTP slew.
    _WALL_RESYNC_NS = 1000000
    PACKET_INIT_OLDEST = 0
    PACKET_INIT_MOST_RECENT = 1
    PACKET_INIT_AWAIT_NEW = 2
    PACKET_ITER_NEXT = 0
    PACKET_ITER_NEWEST = 1

# Bumped in a forked child: writers then take a new identity (writer id, id
# generator, writer seq), so parent and child never write the same ids.
cdef uint64_t _fork_generation = 0


def _packet_after_fork_in_child():
    global _fork_generation
    _fork_generation += 1


os.register_at_fork(after_in_child=_packet_after_fork_in_child)


cdef str _corrupt_reason(a0_check_info_t* info):
    if info.field == NULL:
        return "malformed"
    field = info.field.decode()
    if field == "magic":
        return f"field magic: expected {info.expected:#010x}, found {info.found:#010x}"
    return f"field {field}: expected {info.expected}, found {info.found}"


cdef str _utf8(const char* s, uint32_t n, str what):
    try:
        return PyUnicode_DecodeUTF8(<char*>s, n, NULL)
    except UnicodeDecodeError as e:
        raise PacketCorruptError(f"{what} is not UTF-8 ({e.reason} at byte {e.start})") from None


cdef str _u64_str(uint64_t v):
    cdef char out[20]
    cdef uint32_t n = a0_u64_to_dec(v, out)
    return out[:n].decode("ascii")


cdef list _standard_items(const a0_packet_std_t* std):
    """The standard block as the five str headers readers see."""
    return [("a0_time_mono", _u64_str(std.time_mono)),
            ("a0_time_wall", _u64_str(std.time_wall)),
            ("a0_writer_id", _format_id(std.writer_id)),
            ("a0_writer_seq", _u64_str(std.writer_seq)),
            ("a0_transport_seq", _u64_str(std.transport_seq))]


cdef tuple _decode_headers(bytes meta, str what, bint with_standard):
    """The headers of a packet's metadata (copied out of the frame): the
    standard ones first (if the packet has them and `with_standard`)."""
    cdef a0_packet_view_t v
    cdef a0_packet_header_t h
    cdef a0_check_info_t info
    cdef a0_err_t err
    cdef uint32_t i
    info.field = NULL
    err = a0_packet_view_meta(<const uint8_t*><const char*>meta, len(meta), &v, &info)
    if err:
        raise PacketCorruptError(f"{what}: {_corrupt_reason(&info)}")
    out = _standard_items(&v.std) if v.has_std and with_standard else []
    for i in range(v.header_count):
        err = a0_packet_header(&v, i, &h, &info)
        if err:
            raise PacketCorruptError(f"{what}: header {i}: {_corrupt_reason(&info)}")
        out.append((_utf8(h.key, h.key_len, f"{what}: header {i} key"),
                    _utf8(h.val, h.val_len, f"{what}: header {i} value")))
    return tuple(out)


_HEADERS_KIND = "headers must be a mapping or an iterable of (key, value) pairs of str, not "


cdef tuple _check_headers(object headers, bint refuse_standard):
    """Headers given by a user, as a tuple of (str, str); each key and value
    has its UTF-8 form computed (and cached on the str) now, so the writer
    reads them under the lock without any chance of failing."""
    cdef Py_ssize_t size
    if headers is None:
        return ()
    if isinstance(headers, Headers):
        items = (<Headers>headers)._items
    elif isinstance(headers, dict):
        items = headers.items()
    elif isinstance(headers, (str, bytes, bytearray, memoryview)):
        raise ArgumentError(_HEADERS_KIND + type(headers).__name__)
    else:
        items = headers.items() if hasattr(headers, "items") else headers
    out = []
    try:
        iterator = iter(items)
    except TypeError:
        raise ArgumentError(_HEADERS_KIND + type(headers).__name__) from None
    for item in iterator:
        if not isinstance(item, tuple) or len(item) != 2:
            try:
                item = tuple(item)
            except TypeError:
                item = (item,)
            if len(item) != 2:
                raise ArgumentError(f"each header must be a (key, value) pair, got {item!r}")
        key, value = item
        if not isinstance(key, str):
            raise ArgumentError(f"header key must be str, not {type(key).__name__} ({key!r})")
        if not isinstance(value, str):
            raise ArgumentError(f"header {key!r}: value must be str, not {type(value).__name__} "
                                f"({value!r}); convert it with str()")
        if not key:
            raise ArgumentError("header key may not be empty")
        if "\0" in key:
            raise ArgumentError(f"header key may not contain a NUL character: {key!r}")
        if refuse_standard and key in _STANDARD_SET:
            raise ArgumentError(f"header {key!r} is written by every writer and cannot be set "
                                f"(reserved: {', '.join(STANDARD_HEADERS)})")
        try:
            PyUnicode_AsUTF8AndSize(key, &size)
            PyUnicode_AsUTF8AndSize(value, &size)
        except UnicodeEncodeError as e:
            raise ArgumentError(f"header {key!r} is not encodable as UTF-8 ({e.reason})") from None
        out.append((key, value))
    return tuple(out)


cdef tuple _without_standard(tuple headers):
    return tuple([kv for kv in headers if kv[0] not in _STANDARD_SET])


cdef bytes _new_id():
    cdef bytearray raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return bytes(raw)


cdef str _format_id(const uint8_t* id):
    cdef char out[36]
    a0_uuid_format(id, out)
    return out[:36].decode("ascii")


cdef bytes _parse_id(object value):
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return bytes(value)
    if isinstance(value, str):
        import uuid
        try:
            return uuid.UUID(value).bytes
        except ValueError:
            pass
    raise ArgumentError(f"packet id must be a UUID string or 16 bytes, not {value!r}")


cdef class Headers:
    """A packet's headers: an ordered multimap of str keys to str values.

    Iterating gives ``(key, value)`` pairs in order (a key may repeat);
    ``h[key]`` is the first value of `key` (KeyError if absent), ``h.get(key,
    default)`` likewise without raising, ``h.getall(key)`` every value of it,
    ``key in h`` tests a key. Compares equal to another Headers or a list of
    pairs with the same items in the same order."""

    cdef tuple _items

    def __init__(self, items=()):
        self._items = _check_headers(items, False)

    @staticmethod
    cdef Headers _wrap(tuple items):
        cdef Headers h = Headers.__new__(Headers)
        h._items = items
        return h

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(self._items)

    def __getitem__(self, key):
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __contains__(self, key):
        for k, _ in self._items:
            if k == key:
                return True
        return False

    def get(self, key, default=None):
        """The first value of `key`, or `default`."""
        for k, v in self._items:
            if k == key:
                return v
        return default

    def getall(self, key):
        """Every value of `key`, in order (an empty list if none)."""
        return [v for k, v in self._items if k == key]

    def keys(self):
        return [k for k, _ in self._items]

    def items(self):
        return list(self._items)

    def __eq__(self, other):
        if isinstance(other, Headers):
            return self._items == (<Headers>other)._items
        if isinstance(other, (list, tuple)):
            try:
                return self._items == tuple([tuple(kv) for kv in other])
            except TypeError:
                return False
        return NotImplemented

    def __hash__(self):
        return hash(self._items)

    def __repr__(self):
        return f"Headers({list(self._items)!r})"


@cython.freelist(64)
cdef class Packet:
    """A packet: an id (a UUID), headers (an ordered multimap str -> str) and
    a payload (bytes).

    ``Packet(headers, payload)``, ``Packet(payload)`` or ``Packet()``:
    headers are a mapping or an iterable of ``(key, value)`` pairs of str;
    the payload is bytes, any bytes-like object (kept, not copied) or a str
    (stored as UTF-8). A new packet gets a fresh random id unless ``id=`` is
    given. Packets read from a topic also carry ``seq`` (the frame's
    transport seq) and ``missed`` (packets this reader lost to eviction just
    before this one), and their headers include the standard ones
    (``a0py.STANDARD_HEADERS``).

    Raises ArgumentError for headers or a payload of the wrong kind."""

    cdef object _headers      # Headers, or None until decoded from _meta
    cdef bytes _meta          # metadata copied from a frame (read packets)
    cdef object _payload
    cdef bytes _id
    cdef object _seq
    cdef uint64_t _missed

    def __init__(self, headers=None, payload=None, *, id=None):
        if payload is None and isinstance(headers, (str, bytes, bytearray, memoryview)):
            headers, payload = None, headers
        self._headers = Headers._wrap(_check_headers(headers, False))
        self._payload = _payload_object(payload)
        self._id = _new_id() if id is None else _parse_id(id)
        self._seq = None

    @staticmethod
    def from_bytes(data):
        """Decodes a whole encoded packet (as :meth:`to_bytes` or a frame
        holds it). Raises PacketCorruptError naming the field that is wrong,
        ArgumentError if `data` is not bytes-like."""
        cdef Py_buffer buf
        cdef a0_packet_view_t v
        cdef a0_check_info_t info
        info.field = NULL
        _get_buffer(data, &buf)
        try:
            if a0_packet_view(<const uint8_t*>buf.buf, <uint64_t>buf.len, &v, &info):
                raise PacketCorruptError(f"not an a0py packet ({buf.len} bytes): {_corrupt_reason(&info)}")
            pkt = _packet_from_view(&v, None, 0)
        finally:
            PyBuffer_Release(&buf)
        pkt.headers  # decode now: from_bytes promises a checked packet
        return pkt

    def to_bytes(self):
        """The packet encoded in the a0py packet format (docs/pubsub.md). A
        packet read from a topic is given back byte for byte, standard block
        included; one made here has no standard block."""
        cdef Py_buffer buf
        if self._meta is not None:
            return self._meta + self._payload
        cdef uint64_t meta, total
        cdef a0_packet_header_t* h
        cdef tuple items = (<Headers>self.headers)._items
        cdef uint32_t n = <uint32_t>len(items)
        _get_buffer(self._payload, &buf)
        h = <a0_packet_header_t*>malloc((n + 1) * sizeof(a0_packet_header_t))
        try:
            if h == NULL:
                raise MemoryError()
            _fill_headers(h, items)
            if a0_packet_encoded_size(h, n, <uint64_t>buf.len, &meta, &total):
                raise FrameTooLargeError(f"packet headers too large to encode ({n} headers)")
            out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>total)
            a0_packet_encode_meta(<uint8_t*><char*>out, meta, <const uint8_t*><const char*>self._id,
                                  NULL, h, n, <uint64_t>buf.len)
            memcpy(<char*>out + meta, buf.buf, buf.len)
            return out
        finally:
            free(h)
            PyBuffer_Release(&buf)

    @property
    def id(self):
        """The packet's id, a UUID string (8-4-4-4-12 hex)."""
        if self._id is None:
            self._id = self._meta[8:24]
        return _format_id(<const uint8_t*><const char*>self._id)

    @property
    def headers(self):
        """The headers (:class:`Headers`); decoded on first access for a
        packet read from a topic. PacketCorruptError if they are not valid."""
        if self._headers is None:
            what = "packet" if self._seq is None else f"packet seq {self._seq}"
            self._headers = Headers._wrap(_decode_headers(self._meta, what, True))
        return self._headers

    @property
    def payload(self):
        """The payload: bytes (for a packet read from a topic, the one copy
        made out of the arena), or the bytes-like object it was made with."""
        return self._payload

    @property
    def seq(self):
        """The transport seq of the frame it was read from (None if not read)."""
        return self._seq

    @property
    def missed(self):
        """Packets the reader lost to eviction right before this one (0 if none)."""
        return self._missed

    def json(self):
        """The payload decoded as JSON (json.loads). ValueError if it is not JSON."""
        payload = self._payload
        if not isinstance(payload, (bytes, bytearray)):
            payload = bytes(payload)
        return _json.loads(payload)

    def __repr__(self):
        seq = "" if self._seq is None else f" seq={self._seq}"
        return f"<a0py.Packet {self.id}{seq} headers={len(self.headers)} payload={len(self._payload)} bytes>"


cdef object _payload_object(object payload):
    cdef Py_buffer buf
    if payload is None:
        return b""
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        try:
            return payload.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ArgumentError(f"payload str is not encodable as UTF-8 ({e.reason})") from None
    try:
        PyObject_GetBuffer(payload, &buf, PyBUF_SIMPLE)
    except (TypeError, BufferError):
        raise ArgumentError(f"payload must be bytes, a bytes-like object or str, "
                            f"not {type(payload).__name__}") from None
    PyBuffer_Release(&buf)
    return payload


cdef int _fill_headers(a0_packet_header_t* h, tuple items) except -1:
    cdef Py_ssize_t i, size
    for i in range(len(items)):
        key, value = items[i]
        h[i].key = PyUnicode_AsUTF8AndSize(key, &size)
        h[i].key_len = <uint32_t>size
        h[i].val = PyUnicode_AsUTF8AndSize(value, &size)
        h[i].val_len = <uint32_t>size
    return 0


cdef Packet _packet_from_view(a0_packet_view_t* v, object seq, uint64_t missed):
    cdef Packet pkt = Packet.__new__(Packet)
    pkt._meta = PyBytes_FromStringAndSize(<const char*>v.base, <Py_ssize_t>v.meta_size)
    pkt._payload = PyBytes_FromStringAndSize(<const char*>v.payload, <Py_ssize_t>v.payload_size)
    pkt._seq = seq
    pkt._missed = missed
    return pkt


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

    def __cinit__(self, *args, **kwargs):
        self.arena = None
        self.large_above = UINT64_MAX

    def __init__(self, arena, label=None):
        self._bind(arena, label)

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
        cdef uint64_t slot = (a0_transport_workspace_size(&self.proto_t) // n) & ~(<uint64_t>A0_FRAME_ALIGN - 1)
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

        Raises ArgumentError (bad data or headers, a standard header in
        `headers`), FrameTooLargeError (the packet cannot fit the arena),
        LockError, ClosedError."""
        cdef Py_buffer buf
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
            data = pkt._payload
        elif isinstance(data, str):
            data = _payload_object(data)
        if id == NULL:
            a0_packet_id_next(&self.idgen, idbuf)
            id = idbuf
        try:
            PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
        except (TypeError, BufferError):
            raise ArgumentError(f"pub() takes bytes, a bytes-like object, str or a Packet, "
                                f"not {type(data).__name__}") from None
        try:
            t = self.proto_t
            _lock_arena(arena, &t, &lk)
            try:
                self._encode_locked(lk, id, user, <uint64_t>buf.len, &dst, &seq, &total)
            except BaseException:
                _unlock_arena(arena, lk)
                raise
            if buf.len >= _NOGIL_COPY:
                with nogil:
                    memcpy(dst, buf.buf, buf.len)
            else:
                memcpy(dst, buf.buf, buf.len)
            self.wseq += 1  # under the lock: the next writer thread numbers after us
            # Wakes sleepers after unlocking, so they find the lock free.
            err = a0_transport_commit_unlock(lk)
            arena.locks_held -= 1
            arena._maybe_unmap()
            if err:
                _raise(err, f"committing to {self._label}")
        finally:
            PyBuffer_Release(&buf)
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
        cdef _Buffer buf
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
        buf = _Buffer.__new__(_Buffer)
        buf.arena = self.arena
        buf.ptr = dst
        buf.size = <Py_ssize_t>self.size
        buf.writable = True
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


cdef c_bool _pred_new_packet(a0_locked_t lk, void* ctx) noexcept nogil:
    return not a0_transport_empty(lk) and a0_transport_seq_high(lk) > (<uint64_t*>ctx)[0]


cdef class PacketReader:
    """Reads the packets of an arena from a cursor of its own.

    `init`: where it starts — 0 oldest (the oldest packet present when it
    was made), 1 most recent (the newest packet present then, or the first
    written after if none), 2 await new (the first written after it was
    made). `iter`: how it moves on — 0 next (every packet in order), 1 newest
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
    cdef uint64_t _missed
    cdef uint64_t _corrupt
    cdef object _label

    def __cinit__(self, *args, **kwargs):
        self.arena = None

    def __init__(self, arena, init=PACKET_INIT_AWAIT_NEW, iter=PACKET_ITER_NEXT, label=None):
        self._bind(arena, init, iter, label)

    def _bind(self, arena, init, iter, label=None):
        """Binds the reader to `arena` and places its cursor (for subclasses
        that find the arena themselves). `label` names it in messages."""
        cdef a0_locked_t lk
        if not isinstance(arena, Arena):
            raise ArgumentError(f"a packet reader needs an a0py.Arena, not {type(arena).__name__}")
        if isinstance(init, bool) or init not in (PACKET_INIT_OLDEST, PACKET_INIT_MOST_RECENT,
                                                  PACKET_INIT_AWAIT_NEW):
            raise ArgumentError(f"init must be 0 (oldest), 1 (most recent) or 2 (await new), not {init!r}")
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
            self._place(lk)
        finally:
            _unlock_arena(self.arena, lk)

    cdef int _place(self, a0_locked_t lk) except -1:
        cdef uint64_t low = a0_transport_seq_low(lk), high = a0_transport_seq_high(lk)
        cdef a0_err_t err = A0_OK
        if a0_transport_empty(lk):
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
        self.busy = True
        return 0

    cdef object _take(self, a0_locked_t lk):
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
        return _packet_from_view(&v, fr.seq, gap)

    cdef object _take_free(self):
        """ITER_NEXT without the lock: the next packet, None if there is none,
        or a PacketCorruptError (cursor moved past it) as :meth:`_take`. The
        packet's bytes are copied, then its frame is checked to be still
        live; a frame evicted meanwhile is read again from the oldest
        survivor (the loss counted in `missed`). Nothing a torn copy shows
        is returned or reported: only a frame that checks out live is."""
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
                    return self._skipped(skipped[0], skipped[1])
                if err:
                    _raise_reader(err, self._label)
                gap = r.seq - self.last - 1 if r.seq > self.last + 1 else 0
                info.field = NULL
                corrupt = a0_packet_view(r.data, r.size, &v, &info) != A0_OK
                if corrupt:
                    reason = _corrupt_reason(&info)
                else:
                    item = _packet_from_view(&v, r.seq, gap)
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

    cdef object _skipped(self, uint64_t first, uint64_t last):
        """The report of frames first..last skipped by a0_transport_read_skip
        (the cursor is past them): counted, and a PacketCorruptError."""
        if first > self.last + 1:
            self._missed += first - self.last - 1
        self._corrupt += last - first + 1
        self.first = False
        self.last = last
        return PacketCorruptError(f"{self._label}: {_damaged_frames(first, last)} (the arena was damaged, "
                                  "or written by something other than a0py): skipped")

    cdef int _wait_free(self, timespec* deadline) except -1:
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
                item = self._take_free()
            else:
                _lock_arena(self.arena, &self.t, &lk)
                try:
                    item = self._take(lk)
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
                    item = self._take_free()
                    if item is not None:
                        break
                    if not self._wait_free(&ts if has_deadline else NULL):
                        item = self._take_free()  # one last look at the deadline
                        if item is None:
                            raise A0TimeoutError(f"{self._label}: no packet within {timeout} s")
                        break
                if type(item) is PacketCorruptError:
                    raise item
                return item
            _lock_arena(self.arena, &self.t, &lk)
            try:
                while True:
                    item = self._take(lk)
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
                        item = self._take_free()
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
                    item = self._take(lk)
                    if item is None:
                        break
                    out.append(item)
            finally:
                _unlock_arena(self.arena, lk)
        finally:
            self.busy = False
        return out

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
        if self.busy:
            raise LockError(f"{self._label}: cannot close a reader while another thread reads through it")
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
