# Included by _bulk.pyx: a typed topic's headers messages in the family of its
# payloads (a0py/recording/headers.py has the layouts and why). Both
# directions are copies of fixed-size pieces: the recorder's background
# thread writes them in split_records; the readers turn them back into the
# cut packets (headers_records) before they join them with their payloads.

from .headers import (
    CDR_AT as _CDR_AT,
    CDR_BLOCK_AT as _CDR_BLOCK_AT,
    CDR_ENCAPSULATION as _CDR_ENCAPSULATION,
    FORMAT_CDR as _FORMAT_CDR,
    FORMAT_PACKET as _FORMAT_PACKET,
    FORMAT_PROTOBUF as _FORMAT_PROTOBUF,
    NOT_A_PACKET as _NOT_A_PACKET,
    PB_AT as _PB_AT,
    PB_BLOCK_KEY as _PB_BLOCK_KEY,
    PB_FIXED as _PB_FIXED,
    PB_TEMPLATE as _PB_FIXED_TEMPLATE,
    FIELDS as _FIELDS,
)
from .._core import PACKET_LAYOUT as _PL

cdef enum:
    N_FIELDS = 8  # flags, header_count, id, time_mono, time_wall, writer_id, writer_seq, transport_seq

cdef int F_PACKET = _FORMAT_PACKET, F_PROTOBUF = _FORMAT_PROTOBUF, F_CDR = _FORMAT_CDR
cdef uint32_t NOT_PACKET = _NOT_A_PACKET
cdef int64_t PB_FIXED = _PB_FIXED, CDR_BLOCK = _CDR_BLOCK_AT
cdef int64_t INDEX_OFF = _PL["index_off"], FLAGS_OFF = _PL["flags_off"], PAYLOAD_OFF_OFF = _PL["payload_off_off"]
cdef uint32_t PK_MAGIC = _PL["magic"]
cdef uint16_t PK_VERSION = _PL["version"]
# Per field (the order of headers._FIELDS): its size, where it sits in the
# packet, and where its value sits in each message.
cdef int64_t F_SIZE[N_FIELDS]
cdef int64_t F_PACKET_AT[N_FIELDS]
cdef int64_t F_PB_AT[N_FIELDS]
cdef int64_t F_CDR_AT[N_FIELDS]
for _i, (_name, _size, _at) in enumerate(_FIELDS):
    F_SIZE[_i] = _size
    F_PACKET_AT[_i] = _at
    F_PB_AT[_i] = _PB_AT[_name]
    F_CDR_AT[_i] = _CDR_AT[_name]
# Each message's fixed part with its keys (protobuf) or encapsulation (CDR), values zero.
cdef bytes _PB_TEMPLATE = _PB_FIXED_TEMPLATE + _PB_BLOCK_KEY
cdef bytes _CDR_TEMPLATE = _CDR_ENCAPSULATION + bytes(_CDR_BLOCK_AT - len(_CDR_ENCAPSULATION))
cdef const uint8_t* PB_TEMPLATE = <const uint8_t*>PyBytes_AS_STRING(_PB_TEMPLATE)
cdef const uint8_t* CDR_TEMPLATE = <const uint8_t*>PyBytes_AS_STRING(_CDR_TEMPLATE)
cdef int64_t PB_HEAD = len(_PB_TEMPLATE)  # up to the block's length varint


cdef inline int varint_len(uint64_t v) noexcept nogil:
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline int64_t headers_msg_size(int fmt, int64_t block) noexcept nogil:
    """The bytes of a headers message of format fmt whose header_block has `block` bytes."""
    if fmt == F_PROTOBUF:
        return PB_HEAD + varint_len(<uint64_t>block) + block
    return CDR_BLOCK + 4 + block


cdef int64_t write_headers_msg(uint8_t* out, int fmt, const uint8_t* frame, int64_t cut, bint packet) noexcept nogil:
    """Writes the headers message of the frame at `frame` (a packet cut at
    `cut` bytes when `packet`, else a frame of `cut` bytes that is none) into
    out; returns the bytes written (headers_msg_size)."""
    cdef const int64_t* at = &F_CDR_AT[0]
    if fmt == F_PROTOBUF:
        at = &F_PB_AT[0]
    cdef int64_t block = cut - INDEX_OFF if packet else cut
    cdef int64_t pos
    cdef uint32_t u32
    cdef uint64_t v
    cdef int i
    if fmt == F_PROTOBUF:
        memcpy(out, PB_TEMPLATE, PB_HEAD)
        pos = PB_HEAD
        v = <uint64_t>block
        while v >= 0x80:
            out[pos] = <uint8_t>(v & 0x7F) | 0x80
            v >>= 7
            pos += 1
        out[pos] = <uint8_t>v
        pos += 1
    else:
        memcpy(out, CDR_TEMPLATE, CDR_BLOCK)
        u32 = <uint32_t>block
        memcpy(out + CDR_BLOCK, &u32, 4)
        pos = CDR_BLOCK + 4
    if packet:
        u32 = 0
        memcpy(&u32, frame + FLAGS_OFF, 2)
        memcpy(out + at[0], &u32, 4)
        for i in range(1, N_FIELDS):
            memcpy(out + at[i], frame + F_PACKET_AT[i], F_SIZE[i])
        memcpy(out + pos, frame + INDEX_OFF, block)
    else:
        memcpy(out + at[0], &NOT_PACKET, 4)
        memcpy(out + pos, frame, block)
    return pos + block


cdef int64_t headers_block(int fmt, const uint8_t* m, int64_t size, int64_t* block_at, const char** why) noexcept nogil:
    """Checks headers message m of `size` bytes; returns its header_block's
    length (its start in *block_at), or -1 and *why."""
    cdef int64_t pos, i
    cdef uint64_t n = 0
    cdef int shift = 0
    cdef uint32_t u32
    if fmt == F_PROTOBUF:
        if size < PB_HEAD + 1:
            why[0] = "shorter than an a0py.PacketHeaders a0py writes"
            return -1
        if not _pb_keys_match(m):
            why[0] = "a field of a0py.PacketHeaders is not where a0py writes it"
            return -1
        pos = PB_HEAD
        while True:
            if pos >= size or shift > 63:
                why[0] = "a0py.PacketHeaders: header_block's length runs past the message"
                return -1
            n |= <uint64_t>(m[pos] & 0x7F) << shift
            shift += 7
            pos += 1
            if m[pos - 1] < 0x80:
                break
        if n != <uint64_t>(size - pos):
            why[0] = "a0py.PacketHeaders: header_block's length is not the rest of the message"
            return -1
        block_at[0] = pos
        return <int64_t>n
    if size < CDR_BLOCK + 4 or m[0] != 0 or m[1] != 1:
        why[0] = "not little-endian CDR of an a0py_msgs/msg/PacketHeaders"
        return -1
    memcpy(&u32, m + CDR_BLOCK, 4)
    if <int64_t>u32 > size - CDR_BLOCK - 4 or size - CDR_BLOCK - 4 - <int64_t>u32 > 3:
        why[0] = "a0py_msgs/msg/PacketHeaders: header_block's length is not the rest of the message"
        return -1
    block_at[0] = CDR_BLOCK + 4
    return <int64_t>u32


cdef bint _pb_keys_match(const uint8_t* m) noexcept nogil:
    cdef int i
    cdef int64_t key_at, key_end
    for i in range(N_FIELDS):
        key_end = F_PB_AT[i]
        key_at = F_PB_AT[i - 1] + F_SIZE[i - 1] if i else 0
        if memcmp(m + key_at, PB_TEMPLATE + key_at, key_end - key_at) != 0:
            return False
    return memcmp(m + PB_FIXED, PB_TEMPLATE + PB_FIXED, PB_HEAD - PB_FIXED) == 0


cdef int64_t cut_size(const uint8_t* m, int fmt, int64_t block) noexcept nogil:
    """The bytes of the cut packet a checked headers message gives."""
    cdef uint32_t flags
    memcpy(&flags, m + (F_PB_AT[0] if fmt == F_PROTOBUF else F_CDR_AT[0]), 4)
    return block if flags == NOT_PACKET else INDEX_OFF + block


cdef int write_cut_packet(uint8_t* out, const uint8_t* m, int fmt, int64_t block_at, int64_t block,
                          const char** why) noexcept nogil:
    """Writes the cut packet of a checked headers message into out (cut_size
    bytes); 0, or -1 and *why for flags that do not fit a packet."""
    cdef const int64_t* at = &F_CDR_AT[0]
    if fmt == F_PROTOBUF:
        at = &F_PB_AT[0]
    cdef uint32_t flags
    cdef uint16_t f16
    cdef uint64_t payload_off = <uint64_t>(INDEX_OFF + block), zero = 0
    cdef int i
    memcpy(&flags, m + at[0], 4)
    if flags == NOT_PACKET:
        memcpy(out, m + block_at, block)
        return 0
    if flags > 0xFFFF:
        why[0] = "flags do not fit a packet's 16 bits"
        return -1
    f16 = <uint16_t>flags
    memset(out, 0, INDEX_OFF)
    memcpy(out, &PK_MAGIC, 4)
    memcpy(out + 4, &PK_VERSION, 2)
    memcpy(out + FLAGS_OFF, &f16, 2)
    memcpy(out + PAYLOAD_OFF_OFF, &payload_off, 8)
    for i in range(1, N_FIELDS):
        memcpy(out + F_PACKET_AT[i], m + at[i], F_SIZE[i])
    memcpy(out + INDEX_OFF, m + block_at, block)
    return 0


def headers_records(const uint8_t[::1] buf, const int64_t[::1] offsets, int fmt):
    """The message records at ``offsets`` in ``buf`` (a typed topic's headers
    channel in format ``fmt``, ``headers.FORMAT_*``) rewritten with their
    data the cut packets they hold (``headers.cut_packet``), each record's
    other fields kept: ``(records, offsets, lengths)``, a bytearray, the
    int64 offsets of its records and their body lengths. Records of
    ``FORMAT_PACKET`` are copied as they are. Raises ValueError naming the
    first message that is not one a0py wrote (its index), or a record
    outside ``buf``."""
    cdef Py_ssize_t n = offsets.shape[0], i
    cdef int64_t pos, size, total = 0, out_at = 0
    cdef const uint8_t* base = &buf[0] if buf.shape[0] else NULL
    cdef const char* why = NULL
    cdef uint64_t length
    block_at_a = np.zeros(n, np.int64)
    block_a = np.zeros(n, np.int64)
    cut_a = np.zeros(n, np.int64)
    cdef int64_t[::1] block_at = block_at_a
    cdef int64_t[::1] block = block_a
    cdef int64_t[::1] cut = cut_a
    for i in range(n):
        pos = offsets[i]
        if pos < 0 or pos + MSG_FIXED > buf.shape[0]:
            raise ValueError(f"record offset {pos} outside the chunk")
        size = <int64_t>rd64(base + pos + AT_LENGTH) - (MSG_FIXED - HDR)
        if size < 0 or pos + MSG_FIXED + size > buf.shape[0]:
            raise ValueError(f"record at {pos} runs past the chunk")
        if fmt == F_PACKET:
            block[i] = cut[i] = size
        elif fmt == F_PROTOBUF or fmt == F_CDR:
            block[i] = headers_block(fmt, base + pos + MSG_FIXED, size, &block_at[i], &why)
            if block[i] < 0:
                raise ValueError(f"headers message {i}: {why.decode()}")
            cut[i] = cut_size(base + pos + MSG_FIXED, fmt, block[i])
        else:
            raise ValueError(f"headers format {fmt} is not one a0py writes")
        total += MSG_FIXED + cut[i]
    out = bytearray(total)
    out_offs = np.empty(n, np.int64)
    out_lens = np.empty(n, np.int64)
    cdef uint8_t* ob = <uint8_t*>PyByteArray_AS_STRING(out)
    for i in range(n):
        pos = offsets[i]
        memcpy(ob + out_at, base + pos, MSG_FIXED)
        length = <uint64_t>(MSG_FIXED - HDR + cut[i])
        memcpy(ob + out_at + AT_LENGTH, &length, 8)
        if fmt == F_PACKET:
            memcpy(ob + out_at + MSG_FIXED, base + pos + MSG_FIXED, cut[i])
        elif write_cut_packet(ob + out_at + MSG_FIXED, base + pos + MSG_FIXED, fmt, block_at[i], block[i],
                              &why) < 0:
            raise ValueError(f"headers message {i}: {why.decode()}")
        out_offs[i] = out_at
        out_lens[i] = <int64_t>length
        out_at += MSG_FIXED + cut[i]
    return out, out_offs, out_lens
