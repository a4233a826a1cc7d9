/* a0_multiwait.h — sleep until any of up to 128 futex words changes.
 *
 * One thread can watch many arenas at once: each entry is a 32-bit word (an
 * arena's notify word, or a process-private control word another thread
 * bumps to wake the sleeper) with the value the caller last saw. The call
 * returns as soon as any word differs from its expected value.
 *
 * Linux's futex_waitv (syscall 449, Linux 5.16+) does this in one sleep.
 * Where it is missing (ENOSYS: an older kernel; EPERM: a seccomp filter that
 * predates it) the caller falls back to A0_MULTIWAIT_POLL: the sleeper
 * blocks on entry 0 alone (the control word, so a wake from the caller's
 * own threads is immediate) with a timeout that doubles from
 * A0_MULTIWAIT_POLL_MIN_NS to A0_MULTIWAIT_POLL_MAX_NS while nothing
 * changes, and checks every word at each wake. A change to another word is
 * then seen within A0_MULTIWAIT_POLL_MAX_NS.
 *
 * Arena notify words (`notify`, or `notify_local`, see a0_sync.h): an
 * arena writer makes its wake syscall only while
 * the word's SLEEPERS flag is set (the notify protocol of a0_sync.h). An
 * entry marked `arm` follows that protocol: before sleeping, futex_waitv
 * mode arms each such word (one CAS from `expected` to the armed value) and
 * sleeps on the armed values; a word that moved meanwhile ends the call at
 * once with that entry as `changed`. An armed entry's `expected` becomes
 * the armed value, so a word differs from it only if it moved since. Nothing
 * is undone after waking, so a
 * sleeper killed asleep costs each of its arenas one spare wake, as a
 * transport waiter does. In poll mode nothing is armed: the sleeper does
 * not sleep on those words, so a wake would be a wasted syscall. */
#ifndef A0_MULTIWAIT_H
#define A0_MULTIWAIT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "a0_err.h"

#define A0_MULTIWAIT_MAX 128u
#define A0_MULTIWAIT_POLL_MIN_NS 50000L    /* 50 us */
#define A0_MULTIWAIT_POLL_MAX_NS 8000000L  /* 8 ms */

typedef enum a0_multiwait_mode_e {
  A0_MULTIWAIT_WAITV = 0, /* one futex_waitv sleep on every word */
  A0_MULTIWAIT_POLL = 1,  /* sleep on entry 0, poll the others (fallback) */
} a0_multiwait_mode_t;

typedef struct a0_multiwait_entry_s {
  uint32_t* word;     /* the futex word */
  uint32_t arm;       /* 1: an arena notify word (arm it before sleeping) */
  uint32_t expected;  /* sleep only while *word == expected */
  uint32_t shared;    /* 1: word is in a shared mapping; 0: process-private */
} a0_multiwait_entry_t;

/* Whether this kernel (and seccomp filter) lets futex_waitv be called. */
bool a0_multiwait_waitv_available(void);

/* Sleeps until some entries[i].word != entries[i].expected, a wake on one of
 * them, the absolute CLOCK_MONOTONIC deadline (NULL: none), or a signal.
 * *changed (may be NULL) is the index of a word that changed or was woken,
 * or -1 when the kernel did not say which (check them all). Returns A0_OK,
 * A0_ERR_TIMEOUT, A0_ERR_INTERRUPTED (a signal handler ran), or A0_ERR_SYS
 * with errno: EINVAL (n is 0 or above A0_MULTIWAIT_MAX), ENOSYS or EPERM
 * (futex_waitv unavailable: use A0_MULTIWAIT_POLL). Spurious returns are
 * possible; callers re-check their condition. */
a0_err_t a0_multiwait(a0_multiwait_entry_t* entries, uint32_t n, a0_multiwait_mode_t mode,
                      const struct timespec* deadline, int* changed);

/* Bumps a process-private control word and wakes whoever sleeps on it
 * (as entry 0 with shared = 0, in either mode). Safe from any thread. */
void a0_multiwait_wake_private(uint32_t* word);

/* An entry for the notify word of the arena mapped at `base` (see
 * a0_arena.h), expecting its current value, armed before sleeping. */
void a0_multiwait_arena_entry(void* base, a0_multiwait_entry_t* out);
/* The same for the arena's notify_local word: moved by every publish except
 * those of relayed writers (a0_transport.h), so a process that forwards a
 * ring's local frames and writes relayed ones into it is not woken by its
 * own writes. Same protocol, same arming, same crash behaviour. */
void a0_multiwait_arena_local_entry(void* base, a0_multiwait_entry_t* out);

/* The current value of an entry's word (an acquire load). */
uint32_t a0_multiwait_load(const a0_multiwait_entry_t* e);

#endif /* A0_MULTIWAIT_H */
