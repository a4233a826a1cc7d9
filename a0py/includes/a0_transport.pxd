# csrc/a0_transport.h: frames in an arena (lock, alloc/commit, cursor, wait).
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from posix.time cimport timespec

from .a0_arena cimport a0_state_t
from .a0_err cimport a0_err_t, c_bool


cdef extern from "a0_transport.h" nogil:
    uint32_t A0_READ_TRIES
    uint32_t A0_SPIN_MAX_NS
    uint32_t A0_SPIN_MAX_LIMIT_NS

    ctypedef struct a0_transport_t:
        uint8_t* base
        uint64_t size
        a0_state_t work
        a0_state_t published
        uint64_t cur_seq
        uint64_t cur_off
        uint64_t missed
        uint32_t spin_adaptive
        uint32_t spin
        uint32_t spin_ns
        uint32_t spin_max_ns
        uint64_t spins
        uint64_t sleeps
        uint32_t locked
        uint32_t pending
        uint32_t recovered
        uint32_t relayed
        uint64_t snap_high
        uint64_t snap_relayed

    ctypedef struct a0_locked_t:
        a0_transport_t* t

    ctypedef struct a0_frame_t:
        uint64_t seq
        uint8_t* data
        uint64_t size

    ctypedef struct a0_read_t:
        uint64_t seq
        uint64_t off
        const uint8_t* data
        uint64_t size
        uint64_t link_seq
        uint64_t gap

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
    a0_err_t a0_transport_drop_through(a0_locked_t lk, uint64_t seq)
    a0_err_t a0_transport_alloc_noevict(a0_locked_t lk, uint64_t n, const timespec* deadline,
                                        uint8_t** data)
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
    a0_err_t a0_transport_read_begin(a0_transport_t* t, a0_read_t* r)
    a0_err_t a0_transport_read_after(a0_transport_t* t, const a0_read_t* prev, a0_read_t* r)
    a0_err_t a0_transport_read_skip(a0_transport_t* t, uint64_t* first, uint64_t* last)
    a0_err_t a0_transport_read_end(a0_transport_t* t, const a0_read_t* first, const a0_read_t* last)
    a0_err_t a0_transport_read_live(const a0_transport_t* t, const a0_read_t* r, c_bool* live)
    a0_err_t a0_transport_read_ready(const a0_transport_t* t, c_bool* ready)
    a0_err_t a0_transport_snapshot(const a0_transport_t* t, a0_state_t* out)
    a0_err_t a0_transport_wait_readable(a0_transport_t* t, const timespec* deadline)
    a0_err_t a0_transport_wait_change(a0_transport_t* t, uint32_t seen, const timespec* deadline)
    a0_err_t a0_transport_wait(a0_locked_t lk, a0_pred_fn pred, void* ctx, const timespec* deadline)
    a0_err_t a0_transport_wait_step(a0_locked_t lk, const timespec* deadline)
    c_bool a0_pred_has_next(a0_locked_t lk, void* ctx)
    c_bool a0_pred_seq_above(a0_locked_t lk, void* ctx)
    c_bool a0_pred_fits(a0_locked_t lk, void* ctx)
    uint32_t* a0_transport_notify_word(const a0_transport_t* t)
    uint32_t* a0_transport_notify_local_word(const a0_transport_t* t)
    uint32_t a0_transport_notify_local_count(const a0_transport_t* t)
    uint32_t a0_transport_notify_count(const a0_transport_t* t)
    uint32_t a0_transport_waiter_count(const a0_transport_t* t)
