# bridge/_ingest_splice.pxi — the importer's passes over the packets of one
# sample, in C: each packet checked and sized with the bridge headers (first
# pass, no lock), those too large for the topic's arena counted (second pass,
# only when there are some), the rest spliced into their frames (third pass,
# under the lock). Included by _ingest.pyx, whose TopicIngest._write runs
# them; nothing here calls Python but the reason a packet is refused.

cdef enum:
    _N_BRIDGE_HEADERS = 3

# The keys of the bridge headers: wire.py's names (their one definition), in
# UTF-8, their lengths computed.
cdef bytes _ORIGIN_UTF8 = ORIGIN.encode("utf-8")
cdef bytes _HOST_UTF8 = HOST.encode("utf-8")
cdef bytes _SEQ_UTF8 = SEQ.encode("utf-8")
cdef const char* _ORIGIN_KEY = _ORIGIN_UTF8
cdef const char* _HOST_KEY = _HOST_UTF8
cdef const char* _SEQ_KEY = _SEQ_UTF8
cdef uint32_t _ORIGIN_KEY_LEN = <uint32_t>len(_ORIGIN_UTF8)
cdef uint32_t _HOST_KEY_LEN = <uint32_t>len(_HOST_UTF8)
cdef uint32_t _SEQ_KEY_LEN = <uint32_t>len(_SEQ_UTF8)
cdef const char* _HEX = b"0123456789abcdef"


cdef struct _BridgeHeaders:
    # The bridge headers of one packet: origin (32 hex digits), host, number.
    a0_packet_header_t h[3]
    char origin_hex[32]
    char seq[20]


cdef struct _PacketWalk:
    # A walk over the packets of one sample that are left to write: a payload
    # of one packet, or a batch of prefixed frames (bounds-checked already).
    # Each pass walks a copy of it.
    const uint8_t* p
    uint64_t total_len
    bint batch
    uint64_t count    # packets to write
    uint64_t off      # where the next one is
    uint64_t number   # and its number


cdef struct _Survey:
    # What the first pass finds in a sample's packets left to write.
    uint64_t ok            # packets to write: a0py packets, not bridged yet, in the format's bounds
    uint64_t corrupt       # not a0py packets, or bridged once already
    uint64_t too_large     # past the packet format's bounds with the bridge headers
    uint64_t biggest       # the largest frame an ok packet takes
    c_bool first_refused   # the first corrupt one was bridged already (else first_info says why)
    a0_check_info_t first_info



cdef inline void _set_number(_BridgeHeaders* x, uint64_t number) noexcept nogil:
    x.h[2].val_len = a0_u64_to_dec(number, x.seq)


cdef inline const uint8_t* _next_frame(const uint8_t* p, uint64_t* off, uint64_t* size, bint batch,
                                       uint64_t total) noexcept nogil:
    """The frame at *off (checked by the walk in ingest), its size, *off moved
    past it."""
    cdef uint64_t sz
    if not batch:
        size[0] = total
        off[0] = total
        return p
    memcpy(&sz, p + off[0] + 8, 8)
    size[0] = sz
    off[0] += _PREFIX + sz
    return p + off[0] - sz


cdef inline a0_err_t _size_packet(const uint8_t* data, uint64_t size, _BridgeHeaders* x,
                                  a0_packet_view_t* v, uint64_t* meta, uint64_t* total, c_bool* refused,
                                  a0_check_info_t* info) noexcept nogil:
    """Checks the packet `data` and sizes it with x's headers: A0_OK (and
    *refused when it crossed a bridge already), A0_ERR_CORRUPT (not a
    packet), A0_ERR_FRAME_TOO_LARGE (too large for the packet format)."""
    refused[0] = False
    if a0_packet_view(data, size, v, info) != A0_OK:
        return A0_ERR_CORRUPT
    return a0_packet_splice_size(v, x.h, _N_BRIDGE_HEADERS, _ORIGIN_KEY, _ORIGIN_KEY_LEN, refused, meta,
                                 total, info)


cdef inline a0_err_t _size_next(_PacketWalk* w, _BridgeHeaders* x, a0_packet_view_t* v, uint64_t* meta,
                                uint64_t* total, c_bool* refused, a0_check_info_t* info) noexcept nogil:
    """Moves `w` past its next packet, gives x that packet's number, and
    checks and sizes the packet with x's headers (as _size_packet)."""
    cdef uint64_t size
    cdef const uint8_t* data = _next_frame(w.p, &w.off, &size, w.batch, w.total_len)
    _set_number(x, w.number)
    w.number += 1
    return _size_packet(data, size, x, v, meta, total, refused, info)


cdef void _set_bridge_headers(_BridgeHeaders* x, const uint8_t* origin, const uint8_t* host,
                              Py_ssize_t host_len) noexcept:
    """Sets x's three headers: the origin bridge (32 hex digits), its host,
    and the number, whose value _set_number gives each packet."""
    cdef int k
    for k in range(_ID):
        x.origin_hex[2 * k] = _HEX[origin[k] >> 4]
        x.origin_hex[2 * k + 1] = _HEX[origin[k] & 15]
    x.h[0].key = _ORIGIN_KEY
    x.h[0].key_len = _ORIGIN_KEY_LEN
    x.h[0].val = x.origin_hex
    x.h[0].val_len = 32
    x.h[1].key = _HOST_KEY
    x.h[1].key_len = _HOST_KEY_LEN
    x.h[1].val = <const char*>host
    x.h[1].val_len = <uint32_t>host_len
    x.h[2].key = _SEQ_KEY
    x.h[2].key_len = _SEQ_KEY_LEN
    x.h[2].val = x.seq


cdef void _survey(_PacketWalk w, _BridgeHeaders* x, _Survey* out) noexcept nogil:
    """The first pass, without the lock: which packets are a0py packets that
    crossed no bridge yet and stay in the packet format's bounds with x's
    headers, the largest frame one of them takes, and why the first of the
    others is refused."""
    cdef a0_packet_view_t v
    cdef a0_check_info_t info
    cdef uint64_t meta, total, j
    cdef c_bool refused
    cdef a0_err_t err
    memset(out, 0, sizeof(_Survey))
    for j in range(w.count):
        info.field = NULL
        err = _size_next(&w, x, &v, &meta, &total, &refused, &info)
        if err == A0_OK and not refused:
            out.ok += 1
            if total > out.biggest:
                out.biggest = total
        elif err == A0_ERR_FRAME_TOO_LARGE:
            out.too_large += 1
        else:
            if out.corrupt == 0:
                out.first_refused = refused
                out.first_info = info
            out.corrupt += 1


cdef uint64_t _count_too_large(_PacketWalk w, _BridgeHeaders* x, uint64_t max_data) noexcept nogil:
    """The second pass (only when the largest packet is too large for the
    topic's arena): how many of those the first pass kept take a frame larger
    than `max_data`, the most the arena takes."""
    cdef a0_packet_view_t v
    cdef uint64_t meta, total, j, n = 0
    cdef c_bool refused
    for j in range(w.count):
        if _size_next(&w, x, &v, &meta, &total, &refused, NULL) == A0_OK and not refused \
                and total > max_data:
            n += 1
    return n


cdef a0_err_t _splice_all(Transport tr, a0_locked_t lk, _PacketWalk w, _BridgeHeaders* x,
                          uint64_t max_data, uint64_t* written) noexcept nogil:
    """The third pass's work, under the lock: each packet that passes (a
    packet, not bridged, fits) spliced straight into a frame of its size.
    Stops at the first error."""
    cdef a0_packet_view_t v
    cdef uint64_t meta, total, j
    cdef uint8_t* dst
    cdef c_bool refused
    cdef a0_err_t err
    for j in range(w.count):
        if _size_next(&w, x, &v, &meta, &total, &refused, NULL) != A0_OK or refused \
                or total > max_data:
            continue
        err = tr._alloc(lk, total, &dst)
        if err == A0_OK:
            err = a0_packet_splice(dst, meta, total, &v, x.h, _N_BRIDGE_HEADERS)
        if err != A0_OK:
            return err
        written[0] += 1
    return A0_OK


cdef str _not_a_packet_reason(a0_check_info_t* info):
    if info.field == NULL:
        return "not an a0py packet"
    field = (<bytes>info.field).decode()
    return f"not an a0py packet: {field} is {info.found}, expected {info.expected}"
