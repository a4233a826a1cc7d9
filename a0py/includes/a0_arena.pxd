# csrc/a0_arena.h: the arena's byte layout, creation and open checks.
from libc.stdint cimport uint32_t, uint64_t

from .a0_err cimport a0_err_t


cdef extern from "a0_arena.h" nogil:
    uint64_t A0_ARENA_MAGIC
    uint32_t A0_FORMAT_VERSION
    uint32_t A0_HEADER_SIZE
    uint32_t A0_FRAME_HDR_SIZE
    uint32_t A0_FRAME_ALIGN
    uint32_t A0_MIN_ARENA_SIZE

    ctypedef struct a0_state_t:
        uint64_t seq_low
        uint64_t seq_high
        uint64_t off_head
        uint64_t off_tail
        uint64_t high_water_mark
        uint64_t relayed_frames

    ctypedef struct a0_frame_hdr_t:
        uint64_t seq
        uint64_t off_prev
        uint64_t off_next
        uint64_t data_size

    ctypedef struct a0_check_info_t:
        const char* field
        uint64_t expected
        uint64_t found

    a0_err_t a0_arena_init(void* base, uint64_t size)
    a0_err_t a0_arena_check(const void* base, uint64_t size, a0_check_info_t* info)
    a0_err_t a0_arena_reset_locks(void* base)

    ctypedef struct a0_access_info_t:
        uint32_t uid
        uint32_t gid
        uint32_t mode

    a0_err_t a0_arena_check_access(int fd, uint32_t owner_uid, uint32_t max_mode,
                                   a0_access_info_t* info)
