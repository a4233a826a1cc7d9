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
#  - A zero-copy packet (PacketReader.read_view) lends its payload from the
#    arena only while its block is open: the cursor moves, and the packet
#    counts as read, when the block ends and its frame is found still live;
#    an eviction meanwhile is a FrameEvictedError, never a silent torn read.
#  - A packet's schema, decode() and array() are its topic's business: the
#    protocol layer hands readers a `typing` object (schema, decode, array)
#    and packets only delegate to it.

# The names of the standard block's fields, in its order: their one definition
# (a0py.proto.packets names each one for the layers above).
STANDARD_HEADERS = ("a0_time_mono", "a0_time_wall", "a0_writer_id", "a0_writer_seq",
                    "a0_transport_seq")
_STANDARD_SET = frozenset(STANDARD_HEADERS)
cdef str _H_TIME_MONO, _H_TIME_WALL, _H_WRITER_ID, _H_WRITER_SEQ, _H_TRANSPORT_SEQ
_H_TIME_MONO, _H_TIME_WALL, _H_WRITER_ID, _H_WRITER_SEQ, _H_TRANSPORT_SEQ = STANDARD_HEADERS

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
    PACKET_INIT_FIRST = 3
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
    return [(_H_TIME_MONO, _u64_str(std.time_mono)),
            (_H_TIME_WALL, _u64_str(std.time_wall)),
            (_H_WRITER_ID, _format_id(std.writer_id)),
            (_H_WRITER_SEQ, _u64_str(std.writer_seq)),
            (_H_TRANSPORT_SEQ, _u64_str(std.transport_seq))]


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


cdef class PacketView  # below: the zero-copy read whose block lends a packet its payload


cdef class ArrayHook:
    """A compiled ``pkt.array()`` for the packets of a :class:`PacketTyping`
    (``array_hook``): ``view(payload)`` (a C method) gives the array of a
    payload, or None to leave the packet to the typing's ``array(pkt)``.
    This base gives None; a0py.proto's array topics subclass it."""

    cdef object view(self, object payload):
        return None


cdef class PacketTyping:
    """A base for the typing objects readers hand their packets
    (:meth:`PacketReader._set_typing`): its ``array_hook`` (an
    :class:`ArrayHook`, or None) is tried by :meth:`Packet.array` before
    the typing's own ``array(pkt)``, with no Python call."""

    def __cinit__(self, *args, **kwargs):
        self.array_hook = None


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
    cdef object _typing       # the reader's typing (a0py.proto): schema, decode, array; or None
    cdef object _lease        # the PacketView whose block lends the payload (zero-copy), or None

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
            return self._meta + self._lent_payload()
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

    cdef object _lent_payload(self):
        if self._lease is not None and (<PacketView>self._lease).state != 1:
            raise ClosedError(
                f"packet seq {self._seq}: its payload was a zero-copy view into the arena, "
                "valid only inside its read_view block (or the callback it was given to); "
                "keep a copy made inside it (bytes(pkt.payload), pkt.decode(), arr.copy())")
        return self._payload

    @property
    def payload(self):
        """The payload: bytes (for a packet read from a topic, the one copy
        made out of the arena), or the bytes-like object it was made with.
        For a zero-copy packet (:meth:`PacketReader.read_view`), a read-only
        memoryview into the arena, valid inside its block only (ClosedError
        after it)."""
        return self._lent_payload()

    @property
    def zero_copy(self):
        """Whether the payload is lent from the arena (a read_view packet)."""
        return self._lease is not None

    def check_intact(self):
        """For a zero-copy packet: raises FrameEvictedError if its frame has
        been evicted since it was read, so what was read from the payload may
        be torn (ClosedError once its block has ended). Nothing for a copied
        packet, whose bytes were checked when they were copied. The end of a
        read_view block makes this check itself; a callback that acts on what
        it read before returning calls it first."""
        cdef PacketView lease
        cdef c_bool live = True
        cdef a0_err_t err
        if self._lease is None:
            return
        self._lent_payload()
        lease = <PacketView>self._lease
        err = a0_transport_read_live(&lease.reader.t, &lease.r, &live)
        if err:
            _raise_reader(err, lease.reader._label)
        if not live:
            raise FrameEvictedError(_evicted_message(lease.reader._label, lease.r.seq))

    @property
    def schema(self):
        """The schema of the topic the packet was read from (an
        ``a0py.Schema``), or None: the topic has none, or the packet was not
        read from a topic."""
        if self._typing is None:
            return None
        return self._typing.schema

    def decode(self):
        """The message, decoded with its topic's schema: a dict (or other JSON
        value) for JSON, a protobuf message for protobuf (Foxglove's well-known
        types included), a numpy array (a copy) for an array topic; the
        payload itself when the topic has no schema. Raises the errors of the
        topic's decoder (``a0py.DecodeError`` for a payload that does not
        decode, ``a0py.SchemaError`` for an encoding a0py does not decode)."""
        if self._typing is None:
            return self._lent_payload()
        return self._typing.decode(self)

    def array(self):
        """A read-only numpy array over the payload, with no copy: the array of
        an array topic (dtype, shape and strides as published), the pixels of
        a ``foxglove.RawImage``. For a packet from ``read_view`` it lies in the
        arena and is valid inside the block only (its end checks that the
        frame was not evicted meanwhile); for a copied packet it lies in the
        packet's bytes. Raises ``a0py.SchemaError`` for a topic that carries
        no arrays, ``a0py.DecodeError`` for a payload that is not one."""
        cdef ArrayHook hook
        if self._typing is None:
            raise ArgumentError("this packet was not read from a topic, so it has no schema to "
                                "read an array with")
        if isinstance(self._typing, PacketTyping):
            hook = (<PacketTyping>self._typing).array_hook
            if hook is not None:
                found = hook.view(self._lent_payload())
                if found is not None:
                    return found
        return self._typing.array(self)

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
        payload = self._lent_payload()
        if not isinstance(payload, (bytes, bytearray)):
            payload = bytes(payload)
        return _json.loads(payload)

    def __repr__(self):
        seq = "" if self._seq is None else f" seq={self._seq}"
        if self._lease is not None and (<PacketView>self._lease).state != 1:
            return f"<a0py.Packet {self.id}{seq} (zero-copy, its block ended)>"
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


cdef Packet _packet_from_view(a0_packet_view_t* v, object seq, uint64_t missed, object typing=None):
    cdef Packet pkt = Packet.__new__(Packet)
    pkt._meta = PyBytes_FromStringAndSize(<const char*>v.base, <Py_ssize_t>v.meta_size)
    pkt._payload = PyBytes_FromStringAndSize(<const char*>v.payload, <Py_ssize_t>v.payload_size)
    pkt._seq = seq
    pkt._missed = missed
    pkt._typing = typing
    return pkt


cdef str _evicted_message(object label, uint64_t seq):
    return (f"{label}: packet seq {seq} was evicted while its zero-copy payload was in use: "
            "what was read from it may be torn, so discard it and read again. The reader fell "
            "behind the publisher: give the topic a larger arena, or read sooner")


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


# Why a layout cache in the writer (bench/typed.py, 4 KiB float64 arrays, one
# process, 2026-11-26): pub(ndarray) went through the Python encoder every time
# (a call, a dict lookup keyed by dtype, shape and strides, a tuple back), and
# pub(ndarray) + read().array() cost 4.0x pub(bytes) + read(); with the layout
# compared here in C it costs ≈ 960 instructions more than pub(bytes) (1,970),
# ≈ 600 of them numpy's buffer export, and the pair 1.65x (docs/performance.md).
cdef enum:
    # Layouts a writer remembers (see PacketWriter._remember_layout), and the
    # largest key of one: format (at most 32 bytes), ndim, shape, strides.
    _MAX_LAYOUTS = 8
    _LAYOUT_MAX_DIMS = 32
    _LAYOUT_FORMAT_MAX = 32
    _LAYOUT_KEY_MAX = 16 + _LAYOUT_FORMAT_MAX + 2 * _LAYOUT_MAX_DIMS * 8


cdef Py_ssize_t _layout_key(Py_buffer* buf, char* key) noexcept:
    """Writes the layout of `buf` (itemsize, ndim, format, shape, strides)
    into `key` (at least _LAYOUT_KEY_MAX bytes); its length, or -1 for a
    buffer whose layout is not kept (its memory not one block of buf.len
    bytes from buf.buf, too many dimensions, a long format)."""
    cdef Py_ssize_t flen = 0, i, n, expect_c, expect_f
    cdef bint c_ok = True, f_ok = True
    cdef const char* fmt = buf.format
    cdef Py_ssize_t* shape = buf.shape
    cdef Py_ssize_t* strides = buf.strides
    if buf.ndim > _LAYOUT_MAX_DIMS or buf.ndim < 0 or (buf.ndim > 0 and (shape == NULL or strides == NULL)):
        return -1
    if fmt == NULL:
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
    cdef list _layouts         # [(layout key bytes, prefix bytes)], see _remember_layout

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
        self._layouts = []

    def _remember_layout(self, value, prefix):
        """Remembers that a value of ``type(value)`` with `value`'s buffer
        layout (format, shape, strides: the buffer protocol's, so arrays of
        one dtype and shape) is published as `prefix` + its bytes, so that
        :meth:`pub` writes the next such value without calling the encoder.
        For an encoder that has checked this value (kind, contiguity, size)
        and whose payload depends on nothing but its layout; the
        encoder's schema checks are thereby done for good. At most
        _MAX_LAYOUTS layouts and one type (a new type forgets the others).
        Returns whether it was remembered (False for a value whose buffer
        is not one contiguous block)."""
        cdef Py_buffer buf
        cdef char key[_LAYOUT_KEY_MAX]
        cdef Py_ssize_t n
        if not isinstance(prefix, bytes):
            raise ArgumentError(f"prefix must be bytes, not {type(prefix).__name__}")
        try:
            PyObject_GetBuffer(value, &buf, PyBUF_RECORDS_RO)
        except (TypeError, BufferError, ValueError):
            return False
        try:
            n = _layout_key(&buf, key)
            if n < 0:
                return False
            if type(value) is not self._layout_type:
                self._layouts = []
                self._layout_type = type(value)
            if len(self._layouts) >= _MAX_LAYOUTS:
                return False
            self._layouts.append((PyBytes_FromStringAndSize(key, n), prefix))
            return True
        finally:
            PyBuffer_Release(&buf)

    cdef object _known_layout(self, object value, Py_buffer* buf):
        """The prefix remembered for `value`'s layout, with `buf` holding its
        buffer (the caller releases it); None (nothing held) if unknown."""
        cdef char key[_LAYOUT_KEY_MAX]
        cdef Py_ssize_t n
        cdef bytes known
        if PyObject_GetBuffer(value, buf, PyBUF_RECORDS_RO) != 0:  # raised: not a plain buffer
            return None
        n = _layout_key(buf, key)
        if n >= 0:
            for entry in self._layouts:
                known = <bytes>(<tuple>entry)[0]
                if PyBytes_GET_SIZE(known) == n and memcmp(PyBytes_AS_STRING(known), key, n) == 0:
                    return (<tuple>entry)[1]
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
        cdef Py_buffer buf
        cdef Py_buffer pre
        cdef bint has_prefix = False
        cdef bint has_buf = False
        cdef tuple user
        cdef const uint8_t* id = NULL
        cdef uint8_t idbuf[16]
        cdef a0_transport_t t
        cdef a0_locked_t lk
        cdef uint8_t* dst
        cdef uint64_t seq, total
        cdef a0_err_t err
        cdef Packet pkt
        pre.len = 0
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
            if type(data) is self._layout_type:
                try:
                    prefix = self._known_layout(data, &buf)
                except (TypeError, BufferError, ValueError):
                    prefix = None
            if prefix is not None:  # a layout written before: its buffer is held in buf
                _get_buffer(prefix, &pre)
                has_prefix = has_buf = True
            else:
                data = self._encoder(data)
                if type(data) is tuple:
                    prefix, data = data
                    _get_buffer(prefix, &pre)
                    has_prefix = True
        if id == NULL:
            a0_packet_id_next(&self.idgen, idbuf)
            id = idbuf
        if not has_buf:
            try:
                PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
            except (TypeError, BufferError):
                if has_prefix:
                    PyBuffer_Release(&pre)
                raise ArgumentError(f"pub() takes bytes, a bytes-like object, str or a Packet, "
                                    f"not {type(data).__name__}") from None
        try:
            t = self.proto_t
            _lock_arena(arena, &t, &lk)
            try:
                self._encode_locked(lk, id, user, <uint64_t>(buf.len + pre.len), &dst, &seq, &total)
            except BaseException:
                _unlock_arena(arena, lk)
                raise
            if has_prefix:
                memcpy(dst, pre.buf, pre.len)
                dst += pre.len
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
            if has_prefix:
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


cdef c_bool _pred_new_packet(a0_locked_t lk, void* ctx) noexcept nogil:
    return not a0_transport_empty(lk) and a0_transport_seq_high(lk) > (<uint64_t*>ctx)[0]


cdef class PacketReader:
    """Reads the packets of an arena from a cursor of its own.

    `init`: where it starts — 0 oldest (the oldest packet present when it
    was made), 1 most recent (the newest packet present then, or the first
    written after if none), 2 await new (the first written after it was
    made), 3 first (the arena's first packet, seq 1: for a reader made
    before anything was written, such as one that waited for its topic to
    appear; packets evicted before its first read count in `missed`). `iter`: how it moves on — 0 next (every packet in order), 1 newest
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
            self._place(lk)
        finally:
            _unlock_arena(self.arena, lk)

    cdef int _place(self, a0_locked_t lk) except -1:
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
            return 0  # the oldest comes first, as in _take
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
        return _packet_from_view(&v, fr.seq, gap, self._typing)

    cdef object _take_free(self):
        """ITER_NEXT without the lock: the next packet, None if there is none,
        or a PacketCorruptError (cursor moved past it) as :meth:`_take`. The
        packet's bytes are copied, then its frame is checked to be still
        live; a frame evicted meanwhile is read again from where the
        transport lands ahead of the writer (the loss counted in `missed`). Nothing a torn copy shows
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


@cython.freelist(8)
cdef class PacketView:
    """A zero-copy packet read, from :meth:`PacketReader.read_view`: ``with
    view as pkt`` gives the packet, its payload lent from the arena until the
    block ends; the end checks the frame was not evicted meanwhile."""

    cdef PacketReader reader
    cdef a0_read_t r
    cdef uint64_t gap
    cdef object _view
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
        cdef _Buffer buf
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
                    timed_out = self.has_deadline < 0 or (self.has_deadline and a0_deadline_passed(&self.deadline))
                    if timed_out or not rd._wait_free(&self.deadline if self.has_deadline else NULL):
                        raise A0TimeoutError(f"{rd._label}: no packet within {self.timeout} s")
                    if rd.iter_mode == PACKET_ITER_NEWEST:
                        rd._aim_newest()
                    continue
                if err == A0_ERR_CORRUPT:
                    skipped = _skip_damaged(&rd.t, rd._label)
                    if skipped is None:  # the arena changed meanwhile: read again
                        continue
                    raise rd._skipped(skipped[0], skipped[1])
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
            buf = _lend(rd.arena, <uint8_t*>v.payload, <Py_ssize_t>v.payload_size, False)
            self._view = memoryview(buf)
            pkt._payload = self._view
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
            try:
                self._view.release()
            except BufferError:
                pass  # a derived view (numpy) keeps the mapping alive: memory-safe, not revocable
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


def packet_append_headers(data, headers, refuse_key=None):
    """The packet `data` (one encoded packet, bytes-like) with `headers` (pairs of
    str) added after its own, everything else kept byte for byte: its id, its headers,
    its standard block and its payload. The whole packet is checked as
    :meth:`Packet.from_bytes` checks it (layout, every header's bounds), without
    decoding its strings. Returns bytes, or None if the packet already has a header
    named `refuse_key`.

    (How a bridge adds its headers to a packet it carries: one copy, no decoding.)

    Raises PacketCorruptError (`data` is not an a0py packet), ArgumentError (bad
    headers or data)."""
    cdef Py_buffer buf
    cdef a0_packet_view_t v
    cdef a0_check_info_t info
    cdef a0_packet_header_t* h
    cdef tuple extra = _check_headers(headers, False)
    cdef uint32_t n = <uint32_t>len(extra)
    cdef uint32_t i = 0
    cdef uint64_t meta, total
    cdef Py_ssize_t rk_len = 0
    cdef const char* rk = NULL
    cdef c_bool refused = False
    cdef a0_err_t err
    cdef uint8_t* dst
    if refuse_key is not None:
        if not isinstance(refuse_key, str):
            raise ArgumentError(f"refuse_key must be a str or None, not {type(refuse_key).__name__}")
        rk = PyUnicode_AsUTF8AndSize(refuse_key, &rk_len)
    info.field = NULL
    h = <a0_packet_header_t*>malloc((n + 1) * sizeof(a0_packet_header_t))
    if h == NULL:
        raise MemoryError()
    try:
        _fill_headers(h, extra)
        _get_buffer(data, &buf)
        try:
            if a0_packet_view(<const uint8_t*>buf.buf, <uint64_t>buf.len, &v, &info):
                raise PacketCorruptError(f"not an a0py packet ({buf.len} bytes): {_corrupt_reason(&info)}")
            err = a0_packet_splice_size(&v, h, n, rk, <uint32_t>rk_len, &refused, &meta, &total, &info)
            if err == A0_ERR_CORRUPT:
                for i in range(v.header_count):  # which header (the error path only)
                    if a0_packet_header(&v, i, &h[n], &info):
                        break
                raise PacketCorruptError(f"not an a0py packet: header {i}: {_corrupt_reason(&info)}")
            if err:
                raise ArgumentError(f"a packet of {v.payload_size} payload bytes and "
                                    f"{v.header_count + n} headers is too large to encode")
            if refused:
                return None
            out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>total)
            dst = <uint8_t*>PyBytes_AS_STRING(out)
            if total >= _NOGIL_COPY:
                with nogil:
                    err = a0_packet_splice(dst, meta, total, &v, h, n)
            else:
                err = a0_packet_splice(dst, meta, total, &v, h, n)
            if err:  # the buffer changed under the call (a bytearray written by another thread)
                raise PacketCorruptError("not an a0py packet: it changed while it was read")
        finally:
            PyBuffer_Release(&buf)
    finally:
        free(h)
    return out


def packet_has_header(data, key):
    """Whether the packet `data` (one encoded packet, bytes-like) has a header named
    `key` (its own headers; the standard ones are not looked at). PacketCorruptError if
    `data` is not an a0py packet or its index is damaged."""
    cdef Py_buffer buf
    cdef a0_packet_view_t v
    cdef a0_check_info_t info
    cdef uint32_t index
    cdef a0_err_t err
    cdef Py_ssize_t k_len
    if not isinstance(key, str):
        raise ArgumentError(f"key must be a str, not {type(key).__name__}")
    cdef const char* k = PyUnicode_AsUTF8AndSize(key, &k_len)
    info.field = NULL
    _get_buffer(data, &buf)
    try:
        if a0_packet_view(<const uint8_t*>buf.buf, <uint64_t>buf.len, &v, &info):
            raise PacketCorruptError(f"not an a0py packet ({buf.len} bytes): {_corrupt_reason(&info)}")
        err = a0_packet_find(&v, k, <uint32_t>k_len, 0, &index)
    finally:
        PyBuffer_Release(&buf)
    if err == A0_OK:
        return True
    if err == A0_ERR_NO_FRAME:
        return False
    raise PacketCorruptError("not an a0py packet: its header index is damaged")
