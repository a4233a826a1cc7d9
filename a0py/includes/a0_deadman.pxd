# csrc/a0_deadman.h: liveness by robust-lock ownership.
from libc.stdint cimport uint32_t
from posix.time cimport timespec

from .a0_err cimport a0_err_t, c_bool


cdef extern from "a0_deadman.h" nogil:
    a0_err_t a0_deadman_take(void* base, const timespec* deadline)
    a0_err_t a0_deadman_try_take(void* base)
    a0_err_t a0_deadman_release(void* base)
    a0_err_t a0_deadman_state(void* base, c_bool* taken, c_bool* mine, uint32_t* pid)
    a0_err_t a0_deadman_wait_taken(void* base, const timespec* deadline)
    a0_err_t a0_deadman_wait_released(void* base, const timespec* deadline)
