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

/* The notify word protocol (one 32-bit futex word per arena).
 *
 * Bit 0 is the SLEEPERS flag; the rest is a counter that moves by 2. A
 * publisher bumps the word after every publish and makes a wake syscall only
 * if the flag was set: no syscall when nobody sleeps. A waiter that decided
 * to sleep (its predicate was false when the word read `seen`) *arms*: one
 * CAS from `seen` to (seen + 2) | SLEEPERS, then FUTEX_WAIT on that value.
 *
 * - No lost wake-up: the arm and every bump are RMWs on one word, so they
 *   are ordered. A bump before the arm makes the CAS fail (the waiter looks
 *   again); a bump after it sees the flag and wakes, and a FUTEX_WAIT that
 *   has not started yet finds the word changed and returns at once.
 * - The flag is cleared by a publisher after its wake, by a CAS that only
 *   succeeds if the word is still exactly what its bump left: any arm (which
 *   always changes the word) or bump since then keeps the flag for the next
 *   publisher. So a sleeper is never left with the flag cleared under it.
 * - Crash-robust without counting: a waiter killed asleep leaves the flag
 *   set, which costs the next publisher one wake it did not need, after
 *   which the flag is clear again (a count would leak for good). A publisher
 *   killed between its bump and its wake leaves the flag set, so the next
 *   publisher wakes the sleepers. Nothing depends on a process finishing.
 *
 * An arena has two such words (a0_arena.h): `notify`, bumped after every
 * publish, and `notify_local`, bumped after every publish except those of a
 * writer marked relayed (a process that writes frames it received from
 * elsewhere, e.g. a bridge's importer). Each word follows this protocol on
 * its own — a publisher bumps a word, then wakes on it if the bump found
 * the flag; a waiter arms and sleeps on one word — so every argument above
 * holds for each word separately: no state is shared between them, and a
 * process dying anywhere leaves each word as the argument says. A waiter on
 * `notify_local` is woken by every publish except a relayed writer's: it
 * must only be waiting for frames of non-relayed writers. A locker that
 * finds the previous owner dead bumps and wakes both (the dead owner may
 * have published, relayed or not, without notifying). */
#define A0_NOTIFY_SLEEPERS 1u
#define A0_NOTIFY_STEP 2u

static inline uint32_t a0_notify_load(const uint32_t* word) {
  return atomic_load_explicit((_Atomic uint32_t*)word, memory_order_acquire);
}

/* After a publish: returns the word before the bump, for a0_notify_wake. */
static inline uint32_t a0_notify_bump(uint32_t* word) {
  return atomic_fetch_add((_Atomic uint32_t*)word, A0_NOTIFY_STEP);
}

/* Wakes the sleepers if the bump that returned `before` found any. */
static inline void a0_notify_wake(uint32_t* word, uint32_t before) {
  if (!(before & A0_NOTIFY_SLEEPERS)) return;
  a0_futex_wake_all(word);
  uint32_t left = before + A0_NOTIFY_STEP;
  atomic_compare_exchange_strong((_Atomic uint32_t*)word, &left, left & ~A0_NOTIFY_SLEEPERS);
}

/* Arms a sleep on a word that read `seen`; false if it changed since (look
 * again instead of sleeping). *armed is the value to FUTEX_WAIT on. */
static inline bool a0_notify_arm(uint32_t* word, uint32_t seen, uint32_t* armed) {
  uint32_t want = (seen + A0_NOTIFY_STEP) | A0_NOTIFY_SLEEPERS;
  if (!atomic_compare_exchange_strong((_Atomic uint32_t*)word, &seen, want)) return false;
  *armed = want;
  return true;
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
