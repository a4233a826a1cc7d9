/* a0_sync.h — futex calls, robust-mutex helpers and deadline arithmetic.
 *
 * Internal to the core, except the deadline helpers, which the C tests and
 * the binding share so that a deadline is computed one way everywhere. */
#ifndef A0_SYNC_H
#define A0_SYNC_H

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "a0_err.h"

#define A0_ATOMIC_U32(p) ((_Atomic uint32_t*)(p))

/* Sleeps while *word == expected, until woken or the absolute CLOCK_MONOTONIC
 * deadline (NULL: none). Shared (not PRIVATE): the word lives in a mapping
 * other processes share. Returns 0, ETIMEDOUT, or EINTR when a signal
 * handler ran (so callers can let Python see Ctrl-C). Spurious wakes are
 * fine: every caller re-checks its condition. */
static inline int a0_futex_wait(uint32_t* word, uint32_t expected, const struct timespec* deadline) {
  long rc = syscall(SYS_futex, word, FUTEX_WAIT_BITSET, expected, deadline, NULL,
                    FUTEX_BITSET_MATCH_ANY);
  if (rc == -1 && (errno == ETIMEDOUT || errno == EINTR)) return errno;
  return 0;
}

static inline void a0_futex_wake_all(uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Deadlines: absolute CLOCK_MONOTONIC times, computed only here (the core,
 * its tests and the binding all use these, so there is one carry rule). */
#define A0_NS_PER_S 1000000000L

static inline bool a0_timespec_before(const struct timespec* a, const struct timespec* b) {
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* now + ns. ns up to ~292 years: callers cap "forever" before calling. */
static inline struct timespec a0_deadline_after_ns(uint64_t ns) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += (time_t)(ns / A0_NS_PER_S);
  t.tv_nsec += (long)(ns % A0_NS_PER_S);
  if (t.tv_nsec >= A0_NS_PER_S) {
    t.tv_sec++;
    t.tv_nsec -= A0_NS_PER_S;
  }
  return t;
}

/* Whether the deadline (NULL: none) is reached. */
static inline bool a0_deadline_passed(const struct timespec* deadline) {
  if (!deadline) return false;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return !a0_timespec_before(&now, deadline);
}

static inline void a0_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* pthread_mutex_(timed)lock with robust recovery: on EOWNERDEAD the mutex is
 * made consistent and *recovered set. deadline NULL blocks. */
static inline a0_err_t a0_robust_lock(pthread_mutex_t* m, const struct timespec* deadline,
                                      int* recovered) {
  int rc = deadline ? pthread_mutex_clocklock(m, CLOCK_MONOTONIC, deadline) : pthread_mutex_lock(m);
  *recovered = 0;
  if (rc == EOWNERDEAD) {
    pthread_mutex_consistent(m);
    *recovered = 1;
    return A0_OK;
  }
  switch (rc) {
    case 0: return A0_OK;
    case ETIMEDOUT: return A0_ERR_TIMEOUT;
    case EDEADLK: return A0_ERR_DEADLOCK;
    case ENOTRECOVERABLE: return A0_ERR_NOT_RECOVERABLE;
    default: errno = rc; return A0_ERR_SYS;
  }
}

static inline a0_err_t a0_robust_trylock(pthread_mutex_t* m, int* recovered) {
  int rc = pthread_mutex_trylock(m);
  *recovered = 0;
  if (rc == EOWNERDEAD) {
    pthread_mutex_consistent(m);
    *recovered = 1;
    return A0_OK;
  }
  switch (rc) {
    case 0: return A0_OK;
    case EBUSY: return A0_ERR_BUSY;
    case EDEADLK: return A0_ERR_DEADLOCK;
    case ENOTRECOVERABLE: return A0_ERR_NOT_RECOVERABLE;
    default: errno = rc; return A0_ERR_SYS;
  }
}

#endif /* A0_SYNC_H */
