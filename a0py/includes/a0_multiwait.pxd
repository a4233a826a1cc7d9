# C declarations of csrc/a0_multiwait.h (sleeping on many futex words), for the binding.
from libc.stdint cimport uint32_t
from posix.time cimport timespec

from .a0_err cimport a0_err_t, c_bool


cdef extern from "a0_multiwait.h" nogil:
    uint32_t A0_MULTIWAIT_MAX
    long A0_MULTIWAIT_POLL_MAX_NS

    ctypedef enum a0_multiwait_mode_t:
        A0_MULTIWAIT_WAITV
        A0_MULTIWAIT_POLL

    ctypedef struct a0_multiwait_entry_t:
        uint32_t* word
        uint32_t arm
        uint32_t expected
        uint32_t shared

    c_bool a0_multiwait_waitv_available()
    a0_err_t a0_multiwait(a0_multiwait_entry_t* entries, uint32_t n, a0_multiwait_mode_t mode,
                          const timespec* deadline, int* changed)
    void a0_multiwait_wake_private(uint32_t* word)
    void a0_multiwait_arena_entry(void* base, a0_multiwait_entry_t* out)
    void a0_multiwait_arena_local_entry(void* base, a0_multiwait_entry_t* out)
    uint32_t a0_multiwait_load(const a0_multiwait_entry_t* e)
