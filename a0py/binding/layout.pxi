# The byte layout of frames and packets, read from the C headers at compile
# time: the one table that every other language takes its numbers from.
#
# csrc/a0_arena.h and csrc/a0_packet.h are the source (their _Static_asserts
# pin them to docs/format.md). Python code imports PACKET_LAYOUT and
# FRAME_LAYOUT from here; the view's page receives them from its server; the
# JVM reader's constants are generated from them at build time and held to
# them by a test. Nobody types an offset again. frame_span and arena_size_for
# are the one place that sizes an arena for frames (topics, schemas, the
# FrameTooLargeError advice): the ring's own arithmetic, as a0_transport.c does it.

cdef size_t _field_offset(const void* base, const void* field) noexcept:
    return <size_t>(<const char*>field - <const char*>base)


cdef dict _packet_layout():
    cdef a0_packet_hdr_t h
    cdef a0_packet_std_t s
    cdef a0_packet_entry_t e
    std = A0_PACKET_HDR_SIZE
    return {
        "magic": A0_PACKET_MAGIC,
        "version": A0_PACKET_VERSION,
        "flag_has_std": A0_PACKET_HAS_STD,
        "header_size": A0_PACKET_HDR_SIZE,
        "std_size": A0_PACKET_STD_SIZE,
        "index_off": A0_PACKET_INDEX_OFF,
        "entry_size": A0_PACKET_ENTRY_SIZE,
        "align": A0_PACKET_ALIGN,
        "id_size": A0_PACKET_ID_SIZE,
        # the fixed header (a0_packet_hdr_t)
        "magic_off": _field_offset(&h, &h.magic),
        "version_off": _field_offset(&h, &h.version),
        "flags_off": _field_offset(&h, &h.flags),
        "id_off": _field_offset(&h, &h.id),
        "header_count_off": _field_offset(&h, &h.header_count),
        "payload_off_off": _field_offset(&h, &h.payload_off),
        "payload_size_off": _field_offset(&h, &h.payload_size),
        # the standard block (a0_packet_std_t), from the start of the packet
        "time_mono_off": std + _field_offset(&s, &s.time_mono),
        "time_wall_off": std + _field_offset(&s, &s.time_wall),
        "writer_id_off": std + _field_offset(&s, &s.writer_id),
        "writer_seq_off": std + _field_offset(&s, &s.writer_seq),
        "transport_seq_off": std + _field_offset(&s, &s.transport_seq),
        # one entry of the header index (a0_packet_entry_t), from the entry's start
        "entry_key_off": _field_offset(&e, &e.key_off),
        "entry_key_len": _field_offset(&e, &e.key_len),
        "entry_val_off": _field_offset(&e, &e.val_off),
        "entry_val_len": _field_offset(&e, &e.val_len),
    }


cdef dict _frame_layout():
    cdef a0_frame_hdr_t f
    return {
        "arena_header_size": A0_HEADER_SIZE,
        "min_arena_size": A0_MIN_ARENA_SIZE,
        "frame_header_size": A0_FRAME_HDR_SIZE,
        "frame_align": A0_FRAME_ALIGN,
        "seq_off": _field_offset(&f, &f.seq),
        "off_prev_off": _field_offset(&f, &f.off_prev),
        "off_next_off": _field_offset(&f, &f.off_next),
        "data_size_off": _field_offset(&f, &f.data_size),
    }


PACKET_LAYOUT = _packet_layout()
FRAME_LAYOUT = _frame_layout()


def frame_span(data_size):
    """The bytes a frame of `data_size` data bytes takes of an arena's ring: its
    header and the data, padded to the frame alignment (docs/format.md, "Frames").
    Raises ArgumentError unless `data_size` is an integer >= 0."""
    cdef object n = _as_size(data_size, "data_size")
    return (A0_FRAME_HDR_SIZE + n + A0_FRAME_ALIGN - 1) // A0_FRAME_ALIGN * A0_FRAME_ALIGN


def arena_size_for(data_size, frames=1):
    """The smallest arena size whose ring holds `frames` frames of `data_size` data
    bytes at once: the arena header, then `frames` frame spans (:func:`frame_span`).
    Raises ArgumentError unless `data_size` is an integer >= 0 and `frames` one >= 1."""
    cdef object count = _as_size(frames, "frames")
    if count < 1:
        raise ArgumentError(f"frames must be >= 1, got {count}")
    return A0_HEADER_SIZE + count * frame_span(data_size)
