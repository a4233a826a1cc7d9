# C declarations of csrc/a0_packet.h (the flat packet codec), for the binding.
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t

from .a0_arena cimport a0_check_info_t
from .a0_err cimport a0_err_t, c_bool


cdef extern from "a0_packet.h" nogil:
    uint32_t A0_PACKET_MAGIC
    uint32_t A0_PACKET_VERSION
    uint32_t A0_PACKET_HDR_SIZE
    uint32_t A0_PACKET_STD_SIZE
    uint32_t A0_PACKET_INDEX_OFF
    uint32_t A0_PACKET_HAS_STD
    uint32_t A0_PACKET_ENTRY_SIZE
    uint32_t A0_PACKET_ALIGN
    uint32_t A0_PACKET_ID_SIZE
    uint32_t A0_U64_DEC_MAX
    uint32_t A0_UUID_STR_LEN

    ctypedef struct a0_packet_header_t:
        const char* key
        uint32_t key_len
        const char* val
        uint32_t val_len

    ctypedef struct a0_packet_hdr_t:
        uint32_t magic
        uint16_t version
        uint16_t flags
        uint8_t id[16]
        uint32_t header_count
        uint32_t _reserved
        uint64_t payload_off
        uint64_t payload_size

    ctypedef struct a0_packet_entry_t:
        uint32_t key_off
        uint32_t key_len
        uint32_t val_off
        uint32_t val_len

    ctypedef struct a0_packet_std_t:
        uint64_t time_mono
        uint64_t time_wall
        uint8_t writer_id[16]
        uint64_t writer_seq
        uint64_t transport_seq

    ctypedef struct a0_packet_view_t:
        const uint8_t* base
        uint64_t size
        const uint8_t* id
        c_bool has_std
        a0_packet_std_t std
        uint32_t header_count
        uint64_t meta_size
        const uint8_t* payload
        uint64_t payload_size

    ctypedef struct a0_packet_idgen_t:
        uint64_t state

    a0_err_t a0_packet_encoded_size(const a0_packet_header_t* headers, uint32_t count,
                                    uint64_t payload_size, uint64_t* meta_size, uint64_t* total)
    void a0_packet_encode_meta(uint8_t* buf, uint64_t meta_size, const uint8_t* id,
                               const a0_packet_std_t* std, const a0_packet_header_t* headers,
                               uint32_t count, uint64_t payload_size)
    a0_err_t a0_packet_view(const uint8_t* buf, uint64_t size, a0_packet_view_t* out,
                            a0_check_info_t* info)
    a0_err_t a0_packet_view_meta(const uint8_t* buf, uint64_t size, a0_packet_view_t* out,
                                 a0_check_info_t* info)
    a0_err_t a0_packet_header(const a0_packet_view_t* v, uint32_t i, a0_packet_header_t* out,
                              a0_check_info_t* info)
    a0_err_t a0_packet_find(const a0_packet_view_t* v, const char* key, uint32_t key_len,
                            uint32_t start, uint32_t* index)
    a0_err_t a0_packet_splice_size(const a0_packet_view_t* v, const a0_packet_header_t* extra,
                                   uint32_t n_extra, const char* refuse_key, uint32_t refuse_len,
                                   c_bool* refused, uint64_t* meta_size, uint64_t* total,
                                   a0_check_info_t* info)
    a0_err_t a0_packet_splice(uint8_t* buf, uint64_t meta_size, uint64_t total,
                              const a0_packet_view_t* v, const a0_packet_header_t* extra,
                              uint32_t n_extra)
    uint32_t a0_u64_to_dec(uint64_t v, char* out)
    void a0_packet_idgen_seed(a0_packet_idgen_t* g, uint64_t seed)
    void a0_packet_id_next(a0_packet_idgen_t* g, uint8_t* out)
    void a0_uuid_format(const uint8_t* id, char* out)
