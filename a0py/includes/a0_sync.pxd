# csrc/a0_sync.h: futex and robust-mutex helpers (core-internal), and the
# CLOCK_MONOTONIC deadline arithmetic the binding shares with the core.
from libc.stdint cimport uint64_t
from posix.time cimport timespec


cdef extern from "a0_sync.h" nogil:
    timespec a0_deadline_after_ns(uint64_t ns)
    bint a0_timespec_before(const timespec* a, const timespec* b)
    bint a0_deadline_passed(const timespec* deadline)
