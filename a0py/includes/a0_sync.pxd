# csrc/a0_sync.h: futex and robust-mutex helpers, and the CLOCK_MONOTONIC
# deadline arithmetic the binding shares with the core.
from posix.time cimport timespec


cdef extern from "a0_sync.h" nogil:
    bint a0_deadline_passed(const timespec* deadline)
