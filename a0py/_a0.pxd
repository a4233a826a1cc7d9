# C declarations of the a0py core (csrc/*.h), for the binding. Nothing else.
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from posix.time cimport timespec


cdef extern from "<stdbool.h>" nogil:
    ctypedef unsigned char c_bool "bool"


cdef extern from "a0_err.h" nogil:
    ctypedef enum a0_err_t:
        A0_OK
        A0_ERR_SYS
        A0_ERR_BAD_MAGIC
        A0_ERR_BAD_VERSION
        A0_ERR_BAD_HEADER_SIZE
        A0_ERR_SIZE_MISMATCH
        A0_ERR_TOO_SMALL
        A0_ERR_CORRUPT
        A0_ERR_FRAME_TOO_LARGE
        A0_ERR_EMPTY
        A0_ERR_NO_FRAME
        A0_ERR_SEQ_NOT_FOUND
        A0_ERR_TIMEOUT
        A0_ERR_BUSY
        A0_ERR_DEADLOCK
        A0_ERR_NOT_RECOVERABLE
        A0_ERR_NOT_LOCKED
        A0_ERR_PENDING
        A0_ERR_NOT_OWNER
        A0_ERR_INTERRUPTED
    const char* a0_strerror(a0_err_t err)


cdef extern from "a0_arena.h" nogil:
    uint64_t A0_ARENA_MAGIC
    uint32_t A0_FORMAT_VERSION
    uint32_t A0_HEADER_SIZE
    uint32_t A0_FRAME_HDR_SIZE
    uint32_t A0_FRAME_ALIGN
    uint32_t A0_MIN_ARENA_SIZE

    ctypedef struct a0_check_info_t:
        const char* field
        uint64_t expected
        uint64_t found

    a0_err_t a0_arena_init(void* base, uint64_t size)
    a0_err_t a0_arena_check(const void* base, uint64_t size, a0_check_info_t* info)
    a0_err_t a0_arena_reset_locks(void* base)


cdef extern from "a0_transport.h" nogil:
    ctypedef struct a0_state_t:
        uint64_t seq_low
        uint64_t seq_high
        uint64_t off_head
        uint64_t off_tail
        uint64_t high_water_mark

    ctypedef struct a0_transport_t:
        uint8_t* base
        uint64_t size
        a0_state_t work
        a0_state_t published
        uint64_t cur_seq
        uint64_t cur_off
        uint32_t spin
        uint32_t locked
        uint32_t pending
        uint32_t recovered

    ctypedef struct a0_locked_t:
        a0_transport_t* t

    ctypedef struct a0_frame_t:
        uint64_t seq
        uint8_t* data
        uint64_t size

    ctypedef c_bool (*a0_pred_fn)(a0_locked_t lk, void* ctx)

    a0_err_t a0_transport_init(a0_transport_t* t, void* base, uint64_t size)
    a0_err_t a0_transport_lock(a0_transport_t* t, a0_locked_t* out)
    a0_err_t a0_transport_trylock(a0_transport_t* t, a0_locked_t* out)
    a0_err_t a0_transport_unlock(a0_locked_t lk)
    a0_err_t a0_transport_alloc(a0_locked_t lk, uint64_t n, uint8_t** data)
    a0_err_t a0_transport_alloc_evicts(a0_locked_t lk, uint64_t n, c_bool* evicts)
    a0_err_t a0_transport_commit(a0_locked_t lk)
    a0_err_t a0_transport_commit_unlock(a0_locked_t lk)
    a0_err_t a0_transport_clear(a0_locked_t lk)
    uint64_t a0_transport_seq_low(a0_locked_t lk)
    uint64_t a0_transport_seq_high(a0_locked_t lk)
    bint a0_transport_empty(a0_locked_t lk)
    a0_err_t a0_transport_used_space(a0_locked_t lk, uint64_t* used)
    uint64_t a0_transport_high_water_mark(a0_locked_t lk)
    uint64_t a0_transport_workspace_size(const a0_transport_t* t)
    uint64_t a0_transport_max_frame_data(const a0_transport_t* t)
    a0_err_t a0_transport_jump_head(a0_locked_t lk)
    a0_err_t a0_transport_jump_tail(a0_locked_t lk)
    a0_err_t a0_transport_jump(a0_locked_t lk, uint64_t seq)
    bint a0_transport_has_next(a0_locked_t lk)
    bint a0_transport_has_prev(a0_locked_t lk)
    a0_err_t a0_transport_next(a0_locked_t lk)
    a0_err_t a0_transport_prev(a0_locked_t lk)
    bint a0_transport_iter_valid(a0_locked_t lk)
    a0_err_t a0_transport_frame(a0_locked_t lk, a0_frame_t* out)
    a0_err_t a0_transport_wait(a0_locked_t lk, a0_pred_fn pred, void* ctx, const timespec* deadline)
    a0_err_t a0_transport_wait_step(a0_locked_t lk, const timespec* deadline)
    c_bool a0_pred_has_next(a0_locked_t lk, void* ctx)
    c_bool a0_pred_seq_above(a0_locked_t lk, void* ctx)
    uint32_t a0_transport_notify_count(const a0_transport_t* t)
    uint32_t a0_transport_waiter_count(const a0_transport_t* t)


cdef extern from "a0_deadman.h" nogil:
    a0_err_t a0_deadman_take(void* base, const timespec* deadline)
    a0_err_t a0_deadman_try_take(void* base)
    a0_err_t a0_deadman_release(void* base)
    a0_err_t a0_deadman_state(void* base, c_bool* taken, c_bool* mine, uint32_t* pid)
    a0_err_t a0_deadman_wait_taken(void* base, const timespec* deadline)
    a0_err_t a0_deadman_wait_released(void* base, const timespec* deadline)
