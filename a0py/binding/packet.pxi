# binding/packet.pxi — the packet (csrc/a0_packet.h) as Python sees it: Packet,
# its Headers, the typing hooks a topic gives its packets (ArrayHook,
# PacketTyping), the codec helpers the writer and readers share, and the
# functions on an encoded packet (packet_append_headers, packet_has_header).
# Included by a0py/_core.pyx; it knows nothing of topics (a0py.proto builds
# Publisher and SubscriberSync on the classes of packet_writer.pxi and
# packet_reader.pxi).
#
# Invariants:
#  - Bytes read from an arena are decoded only through a0_packet_view*: a
#    corrupt frame is a PacketCorruptError naming the field, never a stray read.
#  - A packet's schema, decode() and array() are its topic's business: the
#    protocol layer hands readers a `typing` object (schema, decode, array)
#    and packets only delegate to it.
#  - A zero-copy packet's payload is lent by its PacketView (packet_view.pxi)
#    and read only while that view's block is open (ClosedError after).

# The names of the standard block's fields, in its order: their one definition
# (a0py.proto.packets names each one for the layers above).
STANDARD_HEADERS = ("a0_time_mono", "a0_time_wall", "a0_writer_id", "a0_writer_seq",
                    "a0_transport_seq")
_STANDARD_SET = frozenset(STANDARD_HEADERS)
cdef str _H_TIME_MONO, _H_TIME_WALL, _H_WRITER_ID, _H_WRITER_SEQ, _H_TRANSPORT_SEQ
_H_TIME_MONO, _H_TIME_WALL, _H_WRITER_ID, _H_WRITER_SEQ, _H_TRANSPORT_SEQ = STANDARD_HEADERS


cdef str _corrupt_reason(a0_check_info_t* info):
    if info.field == NULL:
        return "malformed"
    field = info.field.decode()
    if field == "magic":
        return f"field magic: expected {info.expected:#010x}, found {info.found:#010x}"
    return f"field {field}: expected {info.expected}, found {info.found}"


cdef str _decode_utf8(const char* s, uint32_t n, str what):
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
        out.append((_decode_utf8(h.key, h.key_len, f"{what}: header {i} key"),
                    _decode_utf8(h.val, h.val_len, f"{what}: header {i} value")))
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
    (``array_hook``): ``view(owner, data, size)`` (a C method) gives the
    array of the payload of `size` bytes at `data`, which `owner` keeps
    alive (the packet's bytes, or the arena buffer lent to a zero-copy
    read: what the array must keep as its base), or None to leave the
    packet to the typing's ``array(pkt)``. This base gives None; a0py.proto's
    array topics subclass it."""

    cdef object view(self, object owner, const char* data, Py_ssize_t size):
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

    cdef int _check_lease(self) except -1:
        """ClosedError for a zero-copy packet whose block has ended."""
        if self._lease is not None and (<PacketView>self._lease).state != 1:
            raise ClosedError(
                f"packet seq {self._seq}: its payload was a zero-copy view into the arena, "
                "valid only inside its read_view block (or the callback it was given to); "
                "keep a copy made inside it (bytes(pkt.payload), pkt.decode(), arr.copy())")
        return 0

    cdef object _lent_payload(self):
        cdef PacketView lease
        self._check_lease()
        if self._payload is None and self._lease is not None:
            # A zero-copy packet's memoryview, made on first use; released at
            # the block's end (PacketView.__exit__).
            lease = <PacketView>self._lease
            lease._view = memoryview(lease._buf)
            self._payload = lease._view
        return self._payload

    cdef object _hook_view(self, ArrayHook hook):
        """The hook's array of the payload (None: the hook does not know it).
        A zero-copy packet's payload is the buffer its view lends (which an
        array keeps as its base, holding the mapping), a copied one's its
        bytes; anything else is left to the typing. ClosedError after a
        zero-copy packet's block."""
        cdef _LentBuffer lent
        self._check_lease()
        if self._lease is not None:
            lent = (<PacketView>self._lease)._buf
            return hook.view(lent, <const char*>lent.ptr, lent.size)
        if type(self._payload) is bytes:
            return hook.view(self._payload, PyBytes_AS_STRING(self._payload),
                             PyBytes_GET_SIZE(self._payload))
        return None

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
                found = self._hook_view(hook)
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
        return f"<a0py.Packet {self.id}{seq} headers={len(self.headers)} payload={len(self._lent_payload())} bytes>"



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
