# csrc/a0_err.h: the error codes every core function returns.


cdef extern from "<stdbool.h>" nogil:
    # C's bool, as the core's out-parameters use it (bint is an int).
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
        A0_ERR_EVICTED
        A0_ERR_NOT_REGULAR
        A0_ERR_FOREIGN_OWNER
        A0_ERR_MODE_TOO_OPEN
    const char* a0_strerror(a0_err_t err)
