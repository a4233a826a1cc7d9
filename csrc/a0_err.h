/* a0_err.h — error codes shared by every a0py C function.
 *
 * Functions return an a0_err_t and hand results back through out-parameters.
 * A0_OK is zero; every other code names one distinct failure so the binding
 * can raise a precise exception. a0_strerror never returns NULL. */
#ifndef A0_ERR_H
#define A0_ERR_H

typedef enum a0_err_e {
  A0_OK = 0,
  A0_ERR_SYS,             /* a system call failed; errno holds the reason */
  A0_ERR_BAD_MAGIC,       /* header magic is not an a0py arena's */
  A0_ERR_BAD_VERSION,     /* format version this build does not read */
  A0_ERR_BAD_HEADER_SIZE, /* header size field differs from this build's */
  A0_ERR_SIZE_MISMATCH,   /* recorded arena size differs from the mapping */
  A0_ERR_TOO_SMALL,       /* mapping too small to hold header + one frame */
  A0_ERR_CORRUPT,         /* shared state failed a bounds/consistency check */
  A0_ERR_FRAME_TOO_LARGE, /* frame larger than the whole workspace */
  A0_ERR_EMPTY,           /* the arena holds no frame */
  A0_ERR_NO_FRAME,        /* cursor not on a live frame / nothing to move to */
  A0_ERR_SEQ_NOT_FOUND,   /* jump(seq) past the newest frame */
  A0_ERR_TIMEOUT,         /* deadline reached */
  A0_ERR_BUSY,            /* try-lock found the lock taken */
  A0_ERR_DEADLOCK,        /* this thread already holds the lock */
  A0_ERR_NOT_RECOVERABLE, /* robust lock left unrecoverable */
  A0_ERR_NOT_LOCKED,      /* operation needs the lock */
  A0_ERR_PENDING,         /* uncommitted frames would be lost (e.g. wait) */
  A0_ERR_NOT_OWNER,       /* releasing a deadman this thread does not hold */
  A0_ERR_INTERRUPTED,     /* a signal arrived while sleeping (lock re-held) */
  A0_ERR_EVICTED,         /* a frame read without the lock was overwritten meanwhile */
  A0_ERR_NOT_REGULAR,     /* an existing arena's shm object or file is not a regular file */
  A0_ERR_FOREIGN_OWNER,   /* an existing arena belongs to another user than the one trusted */
  A0_ERR_MODE_TOO_OPEN,   /* an existing arena grants access beyond the mode asked for */
  A0_ERR__COUNT
} a0_err_t;

const char* a0_strerror(a0_err_t err);

#endif /* A0_ERR_H */
