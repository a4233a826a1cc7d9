/* a0_transport.h — frames in an arena: lock, alloc/commit, iterate, wait.
 *
 * Usage:
 *   a0_transport_t t;  a0_transport_init(&t, base, size);
 *   a0_locked_t lk;    a0_transport_lock(&t, &lk);
 *   uint8_t* data;     a0_transport_alloc(lk, n, &data);  memcpy(data, ..., n);
 *   a0_transport_commit(lk);
 *   a0_transport_unlock(lk);
 *
 * Every frame operation takes an a0_locked_t, which only a0_transport_lock
 * produces, so "forgot to lock" does not compile. The transport struct holds
 * the process-local part: the working copy of the state while locked, and the
 * reader's cursor, which persists across lock/unlock.
 *
 * Crash safety: edits go to the working copy (process memory); commit writes
 * it to the scratch page and flips committed_page. A writer that dies before
 * commit leaves the committed state untouched, except that frames an alloc
 * had to evict are published as evicted first (their bytes are about to be
 * overwritten, so the committed state must stop referencing them).
 *
 * Wait/notify: waiters read the futex word under the lock, unlock, spin a
 * little, then sleep; nobody sleeps holding the lock. The waiter count is only
 * raised right before sleeping, so a writer makes no syscall while nobody is
 * asleep. */
#ifndef A0_TRANSPORT_H
#define A0_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "a0_arena.h"
#include "a0_err.h"

typedef struct a0_transport_s {
  uint8_t* base;
  uint64_t size;
  a0_state_t work;      /* working copy, valid while locked */
  a0_state_t published; /* what this lock holder last saw committed */
  uint64_t cur_seq;     /* cursor: 0 = before the first frame */
  uint64_t cur_off;
  uint32_t spin;        /* busy-poll iterations before sleeping in wait */
  uint32_t locked;
  uint32_t pending;     /* frames allocated but not committed */
  uint32_t recovered;   /* the last lock found the previous owner dead */
} a0_transport_t;

typedef struct a0_locked_s {
  a0_transport_t* t;
} a0_locked_t;

typedef struct a0_frame_s {
  uint64_t seq;
  uint8_t* data;
  uint64_t size;
} a0_frame_t;

/* Predicate for a0_transport_wait: true when the waiter may stop. */
typedef bool (*a0_pred_fn)(a0_locked_t lk, void* ctx);

/* Busy-poll iterations before sleeping. 0 by default: on machines with few
 * cores the other process is usually on this core, and spinning only delays
 * it (measured: 200 iterations cost 18 us a round trip when both share a
 * core, and save ~6 us when they do not). Raise it on dedicated cores. */
#define A0_DEFAULT_SPIN 0u

/* Binds t to a mapped, checked arena (see a0_arena_check). */
a0_err_t a0_transport_init(a0_transport_t* t, void* base, uint64_t size);

/* Blocks for the lock. A previous owner that died is recovered from (its
 * uncommitted work is dropped) and t->recovered is set. A0_ERR_DEADLOCK if
 * this thread holds it already; A0_ERR_CORRUPT if the committed state fails
 * its checks (the lock is released again). */
a0_err_t a0_transport_lock(a0_transport_t* t, a0_locked_t* out);
a0_err_t a0_transport_trylock(a0_transport_t* t, a0_locked_t* out);
/* Drops uncommitted frames and releases the lock. */
a0_err_t a0_transport_unlock(a0_locked_t lk);

/* Appends a frame of n data bytes to the working state, evicting the oldest
 * frames until it overlaps no live frame; *data points at its data. */
a0_err_t a0_transport_alloc(a0_locked_t lk, uint64_t n, uint8_t** data);
/* Whether alloc(n) would evict at least one frame; changes nothing. */
a0_err_t a0_transport_alloc_evicts(a0_locked_t lk, uint64_t n, bool* evicts);
/* Publishes every frame allocated since lock (no-op if none) and notifies. */
a0_err_t a0_transport_commit(a0_locked_t lk);
/* commit, then unlock, then wake sleepers: the fast path for a writer with
 * nothing more to do under the lock. Sleepers then find the lock free when
 * they wake instead of blocking on it again. The lock is released even if
 * the commit fails (its frames are then dropped). */
a0_err_t a0_transport_commit_unlock(a0_locked_t lk);
/* Removes every frame (seqs are never reused) and publishes at once. */
a0_err_t a0_transport_clear(a0_locked_t lk);
/* Removes the frames from the oldest through `seq` (all of them if seq is
 * the newest or above; nothing if seq is below the oldest) and publishes at
 * once: how a consumer that has read through `seq` gives their room back to
 * non-evicting writers. A0_ERR_PENDING if this lock has uncommitted frames
 * (publishing would commit them). */
a0_err_t a0_transport_drop_through(a0_locked_t lk, uint64_t seq);

/* The non-evicting write. "Room" for n bytes means that alloc(n) would
 * evict no frame; it appears only when frames are removed, by clear() or
 * drop_through() (eviction is what this write refuses to do). Waits (lock
 * released while asleep, as a0_transport_wait) until there is room, then
 * allocates. A0_ERR_FRAME_TOO_LARGE at once if n can never fit;
 * A0_ERR_TIMEOUT / A0_ERR_INTERRUPTED as a0_transport_wait (the lock is
 * held, nothing allocated: call again to keep waiting). */
a0_err_t a0_transport_alloc_noevict(a0_locked_t lk, uint64_t n, const struct timespec* deadline,
                                    uint8_t** data);

uint64_t a0_transport_seq_low(a0_locked_t lk);
uint64_t a0_transport_seq_high(a0_locked_t lk);
bool a0_transport_empty(a0_locked_t lk);
a0_err_t a0_transport_used_space(a0_locked_t lk, uint64_t* used);
uint64_t a0_transport_high_water_mark(a0_locked_t lk);
/* Bytes available to frames (arena size less the header). */
uint64_t a0_transport_workspace_size(const a0_transport_t* t);
/* Largest data size a single frame may have. */
uint64_t a0_transport_max_frame_data(const a0_transport_t* t);

/* Cursor movement. */
a0_err_t a0_transport_jump_head(a0_locked_t lk);
a0_err_t a0_transport_jump_tail(a0_locked_t lk);
a0_err_t a0_transport_jump(a0_locked_t lk, uint64_t seq);
bool a0_transport_has_next(a0_locked_t lk);
bool a0_transport_has_prev(a0_locked_t lk);
a0_err_t a0_transport_next(a0_locked_t lk);
a0_err_t a0_transport_prev(a0_locked_t lk);
bool a0_transport_iter_valid(a0_locked_t lk);
a0_err_t a0_transport_frame(a0_locked_t lk, a0_frame_t* out);

/* Waits until pred holds, sleeping with the lock released between checks.
 * deadline: absolute CLOCK_MONOTONIC time, or NULL for none. Returns with the
 * lock held; A0_ERR_TIMEOUT if the deadline passed first; A0_ERR_INTERRUPTED
 * if a signal handler ran while asleep (call again to keep waiting). If
 * relocking fails (A0_ERR_CORRUPT...), the lock is not held: t->locked is 0. */
a0_err_t a0_transport_wait(a0_locked_t lk, a0_pred_fn pred, void* ctx,
                           const struct timespec* deadline);
/* One sleep of a wait loop (for predicates evaluated by the caller): unlocks,
 * waits for a notification, a signal or the deadline, relocks. A0_ERR_PENDING
 * if uncommitted frames exist; A0_ERR_INTERRUPTED after a signal. */
a0_err_t a0_transport_wait_step(a0_locked_t lk, const struct timespec* deadline);

/* Built-in predicates. */
bool a0_pred_has_next(a0_locked_t lk, void* ctx);
bool a0_pred_seq_above(a0_locked_t lk, void* ctx); /* ctx: const uint64_t* */
/* alloc(n) would evict nothing; ctx: const uint64_t* n. Also true when the
 * answer is an error, so the waiter stops and the alloc reports it. */
bool a0_pred_fits(a0_locked_t lk, void* ctx);

/* The notify word (for tests and tools). */
uint32_t a0_transport_notify_count(const a0_transport_t* t);
uint32_t a0_transport_waiter_count(const a0_transport_t* t);

#endif /* A0_TRANSPORT_H */
