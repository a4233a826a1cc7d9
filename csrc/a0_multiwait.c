/* a0_multiwait.c — sleep on many futex words at once (see a0_multiwait.h).
 *
 * Invariants:
 *  1. No lost wake: a count named by an entry is raised (seq_cst) before the
 *     words are compared with their expected values, and futex_waitv compares
 *     them again in the kernel, atomically with queueing. A writer bumps the
 *     word (seq_cst) and then reads the count: one side sees the other.
 *  2. Every count raised is lowered before returning, whatever the outcome.
 *  3. A word is only ever waited on with the sharing it is woken with: arena
 *     notify words are shared futexes (other processes wake them), control
 *     words private ones. The kernel keys the two kinds differently, so a
 *     mismatch would sleep through every wake. */
#include "a0_multiwait.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "a0_arena.h"
#include "a0_sync.h"

#ifdef SYS_futex_waitv
#define A0_SYS_FUTEX_WAITV SYS_futex_waitv
#else
#define A0_SYS_FUTEX_WAITV 449 /* the same number on every architecture */
#endif

/* The kernel's struct futex_waitv and its flags, spelled out so this builds
 * against headers older than Linux 5.16. */
typedef struct a0_futex_waitv_s {
  uint64_t val;
  uint64_t uaddr;
  uint32_t flags;
  uint32_t reserved;
} a0_futex_waitv_t;

#define A0_FUTEX2_SIZE_U32 0x02u
#define A0_FUTEX2_PRIVATE 128u

_Static_assert(sizeof(a0_futex_waitv_t) == 24, "struct futex_waitv is 24 bytes");
/* futex_waitv takes a struct __kernel_timespec (64-bit seconds). */
_Static_assert(sizeof(time_t) == 8, "64-bit time_t");

bool a0_multiwait_waitv_available(void) {
  /* No entries is EINVAL where the call exists: nothing sleeps. */
  long rc = syscall(A0_SYS_FUTEX_WAITV, NULL, 0, 0, NULL, CLOCK_MONOTONIC);
  return !(rc == -1 && (errno == ENOSYS || errno == EPERM));
}

uint32_t a0_multiwait_load(const a0_multiwait_entry_t* e) {
  return atomic_load_explicit(A0_ATOMIC_U32(e->word), memory_order_acquire);
}

/* Index of the first word that differs from its expected value, or -1. */
static int first_changed(const a0_multiwait_entry_t* entries, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (atomic_load(A0_ATOMIC_U32(entries[i].word)) != entries[i].expected) return (int)i;
  return -1;
}

static a0_err_t wait_waitv(a0_multiwait_entry_t* entries, uint32_t n,
                           const struct timespec* deadline, int* changed) {
  *changed = first_changed(entries, n);
  if (*changed >= 0) return A0_OK;
  a0_futex_waitv_t w[A0_MULTIWAIT_MAX];
  for (uint32_t i = 0; i < n; i++) {
    uint32_t val = entries[i].expected;
    /* Arm after the check above: a publish between them fails the CAS. */
    if (entries[i].arm && !a0_notify_arm(entries[i].word, val, &val)) {
      *changed = (int)i;
      return A0_OK;
    }
    entries[i].expected = val; /* "changed" now means: moved since we armed it */
    w[i].val = val;
    w[i].uaddr = (uint64_t)(uintptr_t)entries[i].word;
    w[i].flags = A0_FUTEX2_SIZE_U32 | (entries[i].shared ? 0u : A0_FUTEX2_PRIVATE);
    w[i].reserved = 0;
  }
  long rc = syscall(A0_SYS_FUTEX_WAITV, w, n, 0, deadline, CLOCK_MONOTONIC);
  if (rc >= 0) {
    *changed = (int)rc;
    return A0_OK;
  }
  if (errno == EAGAIN) return A0_OK; /* a word changed before we slept: the caller looks */
  if (errno == ETIMEDOUT) return A0_ERR_TIMEOUT;
  if (errno == EINTR) return A0_ERR_INTERRUPTED;
  return A0_ERR_SYS;
}

static int futex_wait_flags(uint32_t* word, uint32_t expected, const struct timespec* deadline,
                            bool shared) {
  int op = FUTEX_WAIT_BITSET | (shared ? 0 : FUTEX_PRIVATE_FLAG);
  long rc = syscall(SYS_futex, word, op, expected, deadline, NULL, FUTEX_BITSET_MATCH_ANY);
  if (rc == -1 && (errno == ETIMEDOUT || errno == EINTR)) return errno;
  return 0;
}

static struct timespec add_ns(struct timespec t, long ns) {
  t.tv_nsec += ns;
  while (t.tv_nsec >= 1000000000L) {
    t.tv_sec += 1;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

static bool before(const struct timespec* a, const struct timespec* b) {
  return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static a0_err_t wait_poll(a0_multiwait_entry_t* entries, uint32_t n,
                          const struct timespec* deadline, int* changed) {
  long interval = A0_MULTIWAIT_POLL_MIN_NS;
  for (;;) {
    *changed = first_changed(entries, n);
    if (*changed >= 0) return A0_OK;
    struct timespec now, until;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (deadline && !before(&now, deadline)) return A0_ERR_TIMEOUT;
    until = add_ns(now, interval);
    if (deadline && before(deadline, &until)) until = *deadline;
    int rc = futex_wait_flags(entries[0].word, entries[0].expected, &until, entries[0].shared);
    if (rc == EINTR) {
      *changed = first_changed(entries, n);
      return A0_ERR_INTERRUPTED;
    }
    if (interval < A0_MULTIWAIT_POLL_MAX_NS) {
      interval *= 2;
      if (interval > A0_MULTIWAIT_POLL_MAX_NS) interval = A0_MULTIWAIT_POLL_MAX_NS;
    }
  }
}

a0_err_t a0_multiwait(a0_multiwait_entry_t* entries, uint32_t n, a0_multiwait_mode_t mode,
                      const struct timespec* deadline, int* changed) {
  int ignored;
  if (!changed) changed = &ignored;
  *changed = -1;
  if (n == 0 || n > A0_MULTIWAIT_MAX) {
    errno = EINVAL;
    return A0_ERR_SYS;
  }
  if (mode == A0_MULTIWAIT_POLL) return wait_poll(entries, n, deadline, changed);
  return wait_waitv(entries, n, deadline, changed);
}

void a0_multiwait_wake_private(uint32_t* word) {
  atomic_fetch_add(A0_ATOMIC_U32(word), 1);
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void arena_word_entry(uint32_t* word, a0_multiwait_entry_t* out) {
  out->word = word;
  out->arm = 1;
  out->expected = atomic_load(A0_ATOMIC_U32(word));
  out->shared = 1;
}

void a0_multiwait_arena_entry(void* base, a0_multiwait_entry_t* out) {
  arena_word_entry(&((a0_arena_hdr_t*)base)->notify, out);
}

void a0_multiwait_arena_local_entry(void* base, a0_multiwait_entry_t* out) {
  arena_word_entry(&((a0_arena_hdr_t*)base)->notify_local, out);
}
