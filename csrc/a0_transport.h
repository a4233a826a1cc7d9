/* a0_transport.h — frames in an arena: lock, alloc/commit, iterate, wait,
 * and validated reads without the lock.
 *
 * Writing (the lock holder only):
 *   a0_transport_t t;  a0_transport_init(&t, base, size);
 *   a0_locked_t lk;    a0_transport_lock(&t, &lk);
 *   uint8_t* data;     a0_transport_alloc(lk, n, &data);  memcpy(data, ..., n);
 *   a0_transport_commit_unlock(lk);
 *
 * Reading (no lock; writers never wait on readers):
 *   a0_read_t r;
 *   if (a0_transport_read_begin(&t, &r) == A0_OK) {   // the frame after the cursor
 *     memcpy(out, r.data, r.size);                    // may be overwritten meanwhile...
 *     if (a0_transport_read_end(&t, &r, &r) == A0_OK) // ...so keep it only if still live
 *       use(out);                                     // (A0_ERR_EVICTED: read again)
 *   }
 *
 * Every frame operation under the lock takes an a0_locked_t, which only
 * a0_transport_lock produces, so "forgot to lock" does not compile. The
 * transport struct holds the process-local part: the working copy of the
 * state while locked, the reader's cursor (which persists across lock/unlock
 * and is shared by the locked and the lock-free reads), the gap counter and
 * the adaptive spin state.
 *
 * Crash safety: edits go to the working copy (process memory); commit writes
 * it to the scratch page and publishes it (a0_state_publish). A writer that
 * dies before commit leaves the committed state untouched, except that
 * frames an alloc had to evict are published as evicted first (their bytes
 * are about to be overwritten, so the committed state must stop referencing
 * them). That same rule is what makes lock-free reads safe: a frame that the
 * committed state still lists has not been touched since it was committed.
 *
 * Wait/notify: see the notify word protocol in a0_sync.h. Waiters spin
 * (adaptively) on the word, then arm it and sleep; nobody sleeps holding the
 * lock; a writer makes no syscall while nobody is armed.
 *
 * Relayed writers (t->relayed = 1, set by the caller before it writes): a
 * process that writes into a ring frames it received from elsewhere (a
 * bridge's importer) and also reads the ring to forward what was written
 * locally (the same bridge's exporter). Every publish bumps the notify word,
 * so every ordinary waiter sees relayed frames exactly as others; only the
 * second word, notify_local, is left alone by a relayed writer's publishes,
 * so a forwarder sleeping on it is not woken by its own imports. Each commit
 * of a relayed writer also adds its frames to the state's relayed_frames,
 * which lets such a reader tell, from two snapshots, how many of the frames
 * it did not read were relayed ones (not a loss to it) and how many local.
 * Cost on the ordinary publish path: one more atomic add, on the cache line
 * the first one has just taken. Measured (a C loop of lock + alloc(64) +
 * memset + commit_unlock, nobody waiting, 5 x 7 runs of 2 M alternating with
 * the core before this word, 2 vCPUs, load ~1.1): 48.3 -> 54.3 ns a publish,
 * +6 ns; in Python's Publisher.pub the difference is within the run-to-run
 * noise (bench/results/2026-11-27-bridge-wakefilter.md). One 64-bit add over
 * both words was the alternative: it needs the words adjacent, 64-bit and
 * 32-bit atomics on the same bytes (outside C11) and an argument for the
 * carry between the halves; not worth 6 ns. */
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
  uint64_t missed;      /* frames this reader did not read: removed before it got there, or
                           passed over by a landing (see a0_transport_read_begin) */
  uint64_t pace;        /* frames the writer evicted while this reader's recent lock-free reads
                           were in flight (measured by read_end): how far ahead a landing goes */
  uint32_t lapped;      /* 1 from a landing on an evicted cursor until a lock-free read finds
                           nothing left to read (the reader caught up with the writer) */
  uint32_t spin_adaptive; /* 1: adaptive spin (the default); 0: spin a fixed `spin` */
  uint32_t spin;        /* fixed spin: pause iterations before sleeping (0: sleep at once) */
  uint32_t spin_ns;     /* adaptive: current spin budget in ns (0: sleep at once) */
  uint32_t spin_probe;  /* adaptive: waits left before a budget of 0 is tried again */
  uint32_t spin_yield;  /* adaptive: 1 when the last hit came after a yield in which another thread
                           ran on this core (the peer shares it): the next spin yields at once */
  uint32_t spin_max_ns; /* adaptive: the longest spin, ns (A0_SPIN_MAX_NS by default; 0: never
                           spin). Beyond A0_SPIN_MAX_NS a spin goes on only if no other task
                           waits for a CPU then (see a0_transport_wait_change) */
  uint32_t spin_refused; /* adaptive: the last spin that lasted A0_SPIN_MAX_NS found no CPU to
                            spare, so it stopped there: a wake later than that teaches nothing */
  uint64_t spins;       /* waits of this transport that spun before sleeping or returning */
  uint64_t sleeps;      /* waits of this transport that slept on the futex */
  uint32_t locked;
  uint32_t pending;     /* frames allocated but not committed */
  uint32_t recovered;   /* the last lock found the previous owner dead */
  uint32_t relayed;     /* 1: a relayed writer: its publishes leave notify_local alone and its
                           commits count in relayed_frames (see below) */
  uint32_t wake_words[2]; /* notify, notify_local before this lock's last commit, for the wake */
  uint32_t wake_due;    /* a commit under this lock may have sleepers to wake */
  uint64_t snap_high;   /* seq_high of the snapshot the last lock-free read call took */
  uint64_t snap_relayed; /* its relayed_frames */
} a0_transport_t;

typedef struct a0_locked_s {
  a0_transport_t* t;
} a0_locked_t;

typedef struct a0_frame_s {
  uint64_t seq;
  uint8_t* data;
  uint64_t size;
} a0_frame_t;

/* A frame located without the lock: where it is, and what must still be
 * live afterwards for a copy of it to be good. */
typedef struct a0_read_s {
  uint64_t seq;
  uint64_t off;      /* arena offset of the frame header */
  const uint8_t* data;
  uint64_t size;
  uint64_t link_seq; /* oldest frame this read relied on (see a0_transport_read_end) */
  uint64_t gap;      /* frames between the cursor and this one, not read (evicted or passed over) */
  uint64_t snap_low; /* seq_low of the snapshot the read started from (for t->pace) */
} a0_read_t;

/* Predicate for a0_transport_wait: true when the waiter may stop. */
typedef bool (*a0_pred_fn)(a0_locked_t lk, void* ctx);

/* Spinning before sleeping. Adaptive (the default, spin_adaptive = 1):
 * spin while recent waits were satisfied during the spin, with a budget in
 * time that grows to twice what a hit took and loses a quarter on a miss,
 * down to nothing (then a probe of spin_max_ns every A0_SPIN_PROBE_EVERY
 * waits); a sleep woken within spin_max_ns of the wait's start counts as a
 * hit (a spin that long would have caught it); never on a machine of one
 * CPU. Fixed (spin_adaptive = 0): `spin` pause iterations (0: sleep at
 * once). A0_SPIN_MAX_NS is spin_max_ns's default, and the part of any spin
 * that runs whatever the machine's load; A0_SPIN_MAX_LIMIT_NS the most
 * spin_max_ns may be. */
#define A0_SPIN_MAX_NS 50000u
#define A0_SPIN_MAX_LIMIT_NS 1000000000u
#define A0_SPIN_MIN_NS 1000u
#define A0_SPIN_START_NS 16000u
#define A0_SPIN_PROBE_EVERY 256u

/* Lock-free reads give up (A0_ERR_BUSY) after this many attempts that raced
 * a writer; each failed attempt means a writer made progress. */
#define A0_READ_TRIES 1024u

/* Binds t to a mapped, checked arena (see a0_arena_check). */
a0_err_t a0_transport_init(a0_transport_t* t, void* base, uint64_t size);

/* Blocks for the lock. A previous owner that died is recovered from (its
 * uncommitted work is dropped) and t->recovered is set. A0_ERR_DEADLOCK if
 * this thread holds it already; A0_ERR_CORRUPT if the committed state fails
 * its checks (the lock is released again). */
a0_err_t a0_transport_lock(a0_transport_t* t, a0_locked_t* out);
a0_err_t a0_transport_trylock(a0_transport_t* t, a0_locked_t* out);
/* Drops uncommitted frames and releases the lock, then wakes sleepers if a
 * commit under it found any. */
a0_err_t a0_transport_unlock(a0_locked_t lk);

/* Appends a frame of n data bytes to the working state, evicting the oldest
 * frames until it overlaps no live frame; *data points at its data. */
a0_err_t a0_transport_alloc(a0_locked_t lk, uint64_t n, uint8_t** data);
/* Whether alloc(n) would evict at least one frame; changes nothing. */
a0_err_t a0_transport_alloc_evicts(a0_locked_t lk, uint64_t n, bool* evicts);
/* Publishes every frame allocated since lock (no-op if none); sleepers are
 * woken now, under the lock. */
a0_err_t a0_transport_commit(a0_locked_t lk);
/* commit, then unlock, then wake sleepers: the fast path for a writer with
 * nothing more to do under the lock. Sleepers then find the lock free when
 * they wake. The lock is released even if the commit fails (its frames are
 * then dropped). */
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

/* Cursor movement under the lock. */
a0_err_t a0_transport_jump_head(a0_locked_t lk);
a0_err_t a0_transport_jump_tail(a0_locked_t lk);
a0_err_t a0_transport_jump(a0_locked_t lk, uint64_t seq);
bool a0_transport_has_next(a0_locked_t lk);
bool a0_transport_has_prev(a0_locked_t lk);
a0_err_t a0_transport_next(a0_locked_t lk);
a0_err_t a0_transport_prev(a0_locked_t lk);
bool a0_transport_iter_valid(a0_locked_t lk);
a0_err_t a0_transport_frame(a0_locked_t lk, a0_frame_t* out);

/* ---- reads without the lock -------------------------------------------
 *
 * read_begin locates the frame after the cursor in a consistent snapshot
 * of the committed state, checking every offset it follows; nothing is
 * copied and the cursor does not move. A0_ERR_NO_FRAME if there is none
 * (which also clears t->lapped: the reader has caught up).
 *
 * If the cursor's frame is gone or was never placed, the read *lands*: not
 * on the oldest frame, which is the next one a writer overwrites, but where
 * it can finish its copy: on the newest frame if t->lapped (this reader
 * landed before and has not caught up since: it is slower than the
 * writer), else 2 * t->pace frames after the oldest (at most the newest;
 * the oldest while no eviction was seen during a read). A landing from an
 * evicted cursor sets t->lapped. The frames between the cursor and the one
 * it lands on are the read's gap (counted in t->missed by read_end).
 * Locked iteration (a0_transport_next) still goes to the oldest frame: under
 * the lock nobody overwrites it.
 * read_after continues a batch from the frame `prev` (located by begin or
 * by read_after before it); A0_ERR_NO_FRAME at the snapshot's
 * newest frame, A0_ERR_EVICTED if prev's header no longer checks out.
 *
 * read_end validates a batch first..last (first == last for one frame)
 * after the caller copied or used it: A0_OK if first->link_seq is still live
 * in the committed state, which proves that every frame of the batch, and
 * every link followed to reach them, was untouched throughout (seq_low only
 * grows, and an alloc publishes the eviction of a frame before it writes
 * over its bytes). Then the cursor moves to `last` and first->gap is added
 * to t->missed. Otherwise A0_ERR_EVICTED: the copy may be torn, the cursor
 * stays; read again (the next read_begin counts what was lost as a gap).
 * Either way it measures t->pace: how many frames the writer evicted since
 * read_begin's snapshot (up at once, down by a quarter a read).
 *
 * A frame's header read without the lock may be torn: it is bounds-checked
 * like any other; a check that fails on a frame that is still live is
 * A0_ERR_CORRUPT, on one that was evicted meanwhile it is a race (retried,
 * at most A0_READ_TRIES times, then A0_ERR_BUSY). When the way forward from
 * the cursor fails its checks, read_begin looks for the frame from the
 * newest one backwards before it answers A0_ERR_CORRUPT.
 *
 * read_skip, after A0_ERR_CORRUPT: moves the cursor past the frames that can
 * be reached neither forward nor back (the one whose header is damaged, and
 * any that only it links to), so the next read_begin goes on with the first
 * intact frame after them; *first..*last are their seqs (0, 0: nothing to
 * skip any more, read again). From an evicted cursor the frames skipped
 * start where read_begin lands. Frames not read before them are added to
 * t->missed as read_end would.
 *
 * Each of read_begin and read_after records in t->snap_high and
 * t->snap_relayed the seq_high and relayed_frames of the snapshot it took;
 * after a read that ended because no frame was left (A0_ERR_NO_FRAME),
 * t->cur_seq == t->snap_high: every frame up to it was read or missed, and
 * snap_relayed of them were written by relayed writers. */
a0_err_t a0_transport_read_begin(a0_transport_t* t, a0_read_t* r);
a0_err_t a0_transport_read_skip(a0_transport_t* t, uint64_t* first, uint64_t* last);
a0_err_t a0_transport_read_after(a0_transport_t* t, const a0_read_t* prev, a0_read_t* r);
a0_err_t a0_transport_read_end(a0_transport_t* t, const a0_read_t* first, const a0_read_t* last);
/* Whether what read_begin/read_after located in `r` (its header, hence its
 * size, and the links followed to reach it) is still live: the check of
 * read_end without moving the cursor, for a reader that looked at a frame
 * and decided not to take it (e.g. it does not fit the caller's buffer). */
a0_err_t a0_transport_read_live(const a0_transport_t* t, const a0_read_t* r, bool* live);
/* Whether a frame after the cursor exists, from a fresh snapshot. */
a0_err_t a0_transport_read_ready(const a0_transport_t* t, bool* ready);
/* A consistent copy of the committed state, checked (no lock). */
a0_err_t a0_transport_snapshot(const a0_transport_t* t, a0_state_t* out);

/* Waits without the lock until a frame after the cursor exists (spinning,
 * then sleeping on the notify word). A0_ERR_TIMEOUT at the deadline,
 * A0_ERR_INTERRUPTED if a signal handler ran while asleep. */
a0_err_t a0_transport_wait_readable(a0_transport_t* t, const struct timespec* deadline);
/* Waits (no lock held) until the notify word differs from `seen`: spins per
 * t->spin_adaptive / t->spin, then arms the word and sleeps. A0_OK also on a spurious wake:
 * callers re-check their condition. */
a0_err_t a0_transport_wait_change(a0_transport_t* t, uint32_t seen, const struct timespec* deadline);

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

/* The notify word, for tools, tests and callers that sleep on it themselves
 * (e.g. on many arenas at once): follow the protocol in a0_sync.h. */
uint32_t* a0_transport_notify_word(const a0_transport_t* t);
/* The second word (publishes of non-relayed writers only), same protocol. */
uint32_t* a0_transport_notify_local_word(const a0_transport_t* t);
uint32_t a0_transport_notify_local_count(const a0_transport_t* t);
uint32_t a0_transport_notify_count(const a0_transport_t* t);
/* 1 while a waiter is (or may be) asleep on the notify word, i.e. while the
 * next publish will make a wake syscall; 0 when nobody sleeps. */
uint32_t a0_transport_waiter_count(const a0_transport_t* t);

#endif /* A0_TRANSPORT_H */
