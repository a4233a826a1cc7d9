/* a0_transport.c — the frame ring: lock, alloc/commit, eviction, cursor,
 * wait, and validated reads without the lock.
 *
 * Invariants this file keeps (see a0_arena.h for the layout):
 *  1. Only the lock holder writes frames and state pages. Readers without
 *     the lock read them, and trust what they read only after validation.
 *  2. The committed page never references a byte that an uncommitted alloc
 *     may overwrite: alloc publishes its evictions before handing out memory
 *     (a0_state_publish orders the publish before the writes that follow).
 *  3. seq_low and seq_high of the committed state never decrease. With 2,
 *     a frame whose seq is >= the committed seq_low has not been written
 *     over since it was committed: the whole validation of a lock-free read.
 *  4. Every offset and size read from the arena passes frame_at() or
 *     a0_state_check() before it is followed, and every walk is bounded by
 *     the seq range (and lock-free retries by A0_READ_TRIES), so a corrupt
 *     arena yields A0_ERR_CORRUPT, never a stray access or an endless loop.
 *  5. The notify word moves on every publish (commit, eviction, clear), after
 *     the publish; waiters read it before they test their predicate, so no
 *     wake-up is lost (protocol in a0_sync.h). notify_local moves likewise
 *     on every publish of a writer not marked relayed, and on every lock
 *     recovery; a relayed writer's commits add to relayed_frames in the
 *     state they publish. */
#include "a0_transport.h"

#include <string.h>

#include "a0_spin.h"
#include "a0_sync.h"

#define HDR(t) ((a0_arena_hdr_t*)(t)->base)
#define WS_START ((uint64_t)A0_HEADER_SIZE)

static inline bool state_empty(const a0_state_t* s) { return s->seq_low > s->seq_high; }

static inline uint64_t frame_span(uint64_t data_size) {
  return a0_align_up(A0_FRAME_HDR_SIZE + data_size);
}

/* Copies out the frame header at off after checking it lies in the
 * workspace, carries the expected seq and that its data fits the arena. */
static a0_err_t frame_at(const a0_transport_t* t, uint64_t off, uint64_t seq, a0_frame_hdr_t* out) {
  if (off < WS_START || off % A0_FRAME_ALIGN != 0 || off > t->size - A0_FRAME_HDR_SIZE)
    return A0_ERR_CORRUPT;
  /* Relaxed atomic loads: a reader without the lock may race a writer here
   * (and then discards what it read); under the lock they are plain loads. */
  const a0_frame_hdr_t* f = (const a0_frame_hdr_t*)(t->base + off);
  out->seq = __atomic_load_n(&f->seq, __ATOMIC_RELAXED);
  out->off_prev = __atomic_load_n(&f->off_prev, __ATOMIC_RELAXED);
  out->off_next = __atomic_load_n(&f->off_next, __ATOMIC_RELAXED);
  out->data_size = __atomic_load_n(&f->data_size, __ATOMIC_RELAXED);
  if (out->seq != seq) return A0_ERR_CORRUPT;
  if (out->data_size > t->size - off - A0_FRAME_HDR_SIZE) return A0_ERR_CORRUPT;
  return A0_OK;
}

static void frame_hdr_store(a0_transport_t* t, uint64_t off, const a0_frame_hdr_t* h) {
  a0_frame_hdr_t* f = (a0_frame_hdr_t*)(t->base + off);
  __atomic_store_n(&f->seq, h->seq, __ATOMIC_RELAXED);
  __atomic_store_n(&f->off_prev, h->off_prev, __ATOMIC_RELAXED);
  __atomic_store_n(&f->off_next, h->off_next, __ATOMIC_RELAXED);
  __atomic_store_n(&f->data_size, h->data_size, __ATOMIC_RELAXED);
}

static uint32_t* notify_word(const a0_transport_t* t) { return &HDR(t)->notify; }
static uint32_t* local_word(const a0_transport_t* t) { return &HDR(t)->notify_local; }

/* Publishes s and bumps the notify words (notify_local unless this writer is
 * relayed); before[] gets the words before the bumps, for wake_after (which
 * the caller runs now or after unlocking). A word not bumped reads 0 there:
 * no sleepers flag, so no wake. */
static void publish_quiet(a0_transport_t* t, const a0_state_t* s, uint32_t before[2]) {
  a0_state_publish(t->base, s);
  t->published = *s;
  before[0] = a0_notify_bump(notify_word(t));
  before[1] = t->relayed ? 0 : a0_notify_bump(local_word(t));
}

static void wake_after(a0_transport_t* t, const uint32_t before[2]) {
  a0_notify_wake(notify_word(t), before[0]);
  a0_notify_wake(local_word(t), before[1]);
}

static void publish(a0_transport_t* t, const a0_state_t* s) {
  uint32_t before[2];
  publish_quiet(t, s, before);
  wake_after(t, before);
}

a0_err_t a0_transport_snapshot(const a0_transport_t* t, a0_state_t* out) {
  a0_err_t err = a0_state_read(t->base, out, NULL);
  if (err) return err;
  return a0_state_check(out, t->size, NULL) ? A0_ERR_CORRUPT : A0_OK;
}

static a0_err_t load_committed(a0_transport_t* t) {
  a0_state_t s;
  a0_err_t err = a0_transport_snapshot(t, &s);
  if (err) return err;
  t->work = s;
  t->published = s;
  t->pending = 0;
  return A0_OK;
}

static a0_err_t after_lock(a0_transport_t* t, int recovered, a0_locked_t* out) {
  a0_arena_hdr_t* h = HDR(t);
  t->recovered = (uint32_t)recovered;
  a0_err_t err = load_committed(t);
  if (err) {
    pthread_mutex_unlock(&h->lock.mutex);
    return err;
  }
  t->locked = 1;
  t->wake_due = 0;
  if (recovered) {
    h->recoveries++;
    /* The dead owner may have published without notifying, relayed or not. */
    a0_notify_wake(notify_word(t), a0_notify_bump(notify_word(t)));
    a0_notify_wake(local_word(t), a0_notify_bump(local_word(t)));
  }
  out->t = t;
  return A0_OK;
}

a0_err_t a0_transport_init(a0_transport_t* t, void* base, uint64_t size) {
  a0_err_t err = a0_arena_check(base, size, NULL);
  if (err) return err;
  memset(t, 0, sizeof *t);
  t->base = (uint8_t*)base;
  t->size = size;
  t->spin_adaptive = 1;
  t->spin_ns = A0_SPIN_START_NS;
  t->spin_max_ns = A0_SPIN_MAX_NS;
  return A0_OK;
}

a0_err_t a0_transport_lock(a0_transport_t* t, a0_locked_t* out) {
  if (t->locked) return A0_ERR_DEADLOCK;
  int recovered;
  a0_err_t err = a0_robust_lock(&HDR(t)->lock.mutex, NULL, &recovered);
  if (err) return err;
  return after_lock(t, recovered, out);
}

a0_err_t a0_transport_trylock(a0_transport_t* t, a0_locked_t* out) {
  if (t->locked) return A0_ERR_DEADLOCK;
  int recovered;
  a0_err_t err = a0_robust_trylock(&HDR(t)->lock.mutex, &recovered);
  if (err) return err;
  return after_lock(t, recovered, out);
}

static void drop_pending(a0_transport_t* t) {
  if (t->pending && t->cur_seq > t->published.seq_high) {
    /* The cursor stood on a discarded frame: back to the newest committed. */
    t->cur_seq = t->published.seq_high;
    t->cur_off = state_empty(&t->published) ? 0 : t->published.off_tail;
  }
  t->pending = 0;
}

a0_err_t a0_transport_unlock(a0_locked_t lk) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  drop_pending(t);
  t->locked = 0;
  int rc = pthread_mutex_unlock(&HDR(t)->lock.mutex);
  /* Woken only now: a sleeper woken while we still held the lock would at
   * once block on it again, two sleeps and two wakes per frame instead of
   * one (measured: 6.8 futex calls per ping-pong round trip instead of 2). */
  if (t->wake_due) {
    t->wake_due = 0;
    wake_after(t, t->wake_words);
  }
  if (rc) {
    errno = rc;
    return A0_ERR_SYS;
  }
  return A0_OK;
}

uint64_t a0_transport_workspace_size(const a0_transport_t* t) { return t->size - WS_START; }

uint64_t a0_transport_max_frame_data(const a0_transport_t* t) {
  return (a0_transport_workspace_size(t) & ~(uint64_t)(A0_FRAME_ALIGN - 1)) - A0_FRAME_HDR_SIZE;
}

/* End offset (aligned) of the tail frame of a non-empty state. */
static a0_err_t tail_end_of(const a0_transport_t* t, const a0_state_t* s, uint64_t* end) {
  a0_frame_hdr_t tail;
  a0_err_t err = frame_at(t, s->off_tail, s->seq_high, &tail);
  if (err) return err;
  *end = s->off_tail + frame_span(tail.data_size);
  return A0_OK;
}

/* Where a frame of `need` bytes goes: right after the tail, or at the start
 * of the workspace when it would run past the end (or the ring is empty). */
static a0_err_t place(const a0_transport_t* t, const a0_state_t* s, uint64_t need, uint64_t* off,
                      uint64_t* tail_end) {
  *tail_end = 0;
  *off = WS_START;
  if (state_empty(s)) return A0_OK;
  a0_err_t err = tail_end_of(t, s, tail_end);
  if (err) return err;
  if (*tail_end <= t->size && t->size - *tail_end >= need) *off = *tail_end;
  return A0_OK;
}

/* Whether [a, b) overlaps a live frame. Live frames form a band from the
 * head to tail_end; when it wraps (head above tail), it is [head, size) plus
 * [WS_START, tail_end), because a wrap always restarts at WS_START. */
static bool overlaps_live(const a0_transport_t* t, const a0_state_t* s, uint64_t tail_end,
                          uint64_t a, uint64_t b) {
  if (s->off_head <= s->off_tail) return a < tail_end && s->off_head < b;
  return (a < tail_end && WS_START < b) || (a < t->size && s->off_head < b);
}

static a0_err_t evict_head(const a0_transport_t* t, a0_state_t* s) {
  if (s->seq_low == s->seq_high) {
    s->seq_low++;
    s->off_head = s->off_tail = 0;
    return A0_OK;
  }
  a0_frame_hdr_t head, next;
  a0_err_t err = frame_at(t, s->off_head, s->seq_low, &head);
  if (!err) err = frame_at(t, head.off_next, s->seq_low + 1, &next);
  if (err) return err;
  s->off_head = head.off_next;
  s->seq_low++;
  return A0_OK;
}

a0_err_t a0_transport_alloc_evicts(a0_locked_t lk, uint64_t n, bool* evicts) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  if (n > a0_transport_max_frame_data(t)) return A0_ERR_FRAME_TOO_LARGE;
  uint64_t need = frame_span(n), off, tail_end;
  a0_err_t err = place(t, &t->work, need, &off, &tail_end);
  if (err) return err;
  *evicts = !state_empty(&t->work) && overlaps_live(t, &t->work, tail_end, off, off + need);
  return A0_OK;
}

a0_err_t a0_transport_alloc(a0_locked_t lk, uint64_t n, uint8_t** data) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  if (n > a0_transport_max_frame_data(t)) return A0_ERR_FRAME_TOO_LARGE;
  a0_state_t* w = &t->work;
  if (w->seq_high >= UINT64_MAX - 1) return A0_ERR_CORRUPT;
  uint64_t need = frame_span(n), off, tail_end;
  a0_err_t err = place(t, w, need, &off, &tail_end);
  if (err) return err;
  while (!state_empty(w) && overlaps_live(t, w, tail_end, off, off + need)) {
    err = evict_head(t, w);
    if (err) return err;
  }
  const a0_state_t* pub = &t->published;
  if (!state_empty(pub) && w->seq_low > pub->seq_low) {
    /* Invariant 2: publish the eviction of committed frames now. */
    a0_state_t e = *pub;
    if (w->seq_low > pub->seq_high) {
      e.seq_low = pub->seq_high + 1;
      e.off_head = e.off_tail = 0;
    } else {
      e.seq_low = w->seq_low;
      e.off_head = w->off_head;
    }
    publish(t, &e);
  }
  uint64_t seq = w->seq_high + 1;
  a0_frame_hdr_t frame = {.seq = seq, .off_prev = 0, .off_next = 0, .data_size = n};
  if (state_empty(w)) {
    w->off_head = off;
  } else {
    /* Linking the old tail is harmless even if never committed: nobody
     * follows off_next from the newest committed frame (seq == seq_high),
     * and a reader that saw this frame committed saw the link first. */
    frame.off_prev = w->off_tail;
    __atomic_store_n(&((a0_frame_hdr_t*)(t->base + w->off_tail))->off_next, off, __ATOMIC_RELAXED);
  }
  frame_hdr_store(t, off, &frame);
  w->off_tail = off;
  w->seq_high = seq;
  t->pending++;
  *data = t->base + off + A0_FRAME_HDR_SIZE;
  return A0_OK;
}

static a0_err_t used_space_of(const a0_transport_t* t, const a0_state_t* s, uint64_t* used) {
  *used = 0;
  if (state_empty(s)) return A0_OK;
  uint64_t tail_end;
  a0_err_t err = tail_end_of(t, s, &tail_end);
  if (err) return err;
  if (s->off_head <= s->off_tail)
    *used = tail_end - s->off_head;
  else
    *used = (t->size - s->off_head) + (tail_end - WS_START);
  return A0_OK;
}

/* Publishes the working state; the wake is left to the caller. */
static a0_err_t commit_quiet(a0_transport_t* t, uint32_t before[2]) {
  uint64_t used;
  a0_err_t err = used_space_of(t, &t->work, &used);
  if (err) return err;
  if (used > t->work.high_water_mark) t->work.high_water_mark = used;
  if (t->relayed) t->work.relayed_frames += t->pending;
  publish_quiet(t, &t->work, before);
  t->pending = 0;
  return A0_OK;
}

a0_err_t a0_transport_commit(a0_locked_t lk) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  if (!t->pending) return A0_OK;
  uint32_t before[2];
  a0_err_t err = commit_quiet(t, before);
  if (!err) wake_after(t, before);
  return err;
}

a0_err_t a0_transport_commit_unlock(a0_locked_t lk) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  a0_err_t err = A0_OK;
  if (t->pending) {
    err = commit_quiet(t, t->wake_words);
    t->wake_due = !err; /* a0_transport_unlock wakes, after releasing the lock */
  }
  a0_err_t unlock_err = a0_transport_unlock(lk);
  return err ? err : unlock_err;
}

a0_err_t a0_transport_clear(a0_locked_t lk) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  a0_state_t* w = &t->work;
  w->seq_low = w->seq_high + 1;
  w->off_head = w->off_tail = 0;
  t->pending = 0;
  publish(t, w);
  return A0_OK;
}

a0_err_t a0_transport_drop_through(a0_locked_t lk, uint64_t seq) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  if (t->pending) return A0_ERR_PENDING;
  a0_state_t w = t->work; /* walked on a copy: a corrupt link changes nothing */
  if (state_empty(&w) || seq < w.seq_low) return A0_OK;
  if (seq >= w.seq_high) {
    w.seq_low = w.seq_high + 1;
    w.off_head = w.off_tail = 0;
  } else {
    while (w.seq_low <= seq) { /* at most seq_high - seq_low steps, each checked */
      a0_err_t err = evict_head(t, &w);
      if (err) return err;
    }
  }
  t->work = w;
  publish(t, &t->work);
  return A0_OK;
}

a0_err_t a0_transport_alloc_noevict(a0_locked_t lk, uint64_t n, const struct timespec* deadline,
                                    uint8_t** data) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  if (n > a0_transport_max_frame_data(t)) return A0_ERR_FRAME_TOO_LARGE;
  a0_err_t err = a0_transport_wait(lk, a0_pred_fits, &n, deadline);
  if (err) return err;
  return a0_transport_alloc(lk, n, data);
}

uint64_t a0_transport_seq_low(a0_locked_t lk) { return lk.t->work.seq_low; }
uint64_t a0_transport_seq_high(a0_locked_t lk) { return lk.t->work.seq_high; }
bool a0_transport_empty(a0_locked_t lk) { return state_empty(&lk.t->work); }
uint64_t a0_transport_high_water_mark(a0_locked_t lk) { return lk.t->work.high_water_mark; }

a0_err_t a0_transport_used_space(a0_locked_t lk, uint64_t* used) {
  if (!lk.t->locked) return A0_ERR_NOT_LOCKED;
  return used_space_of(lk.t, &lk.t->work, used);
}

static a0_err_t set_cursor(a0_transport_t* t, uint64_t off, uint64_t seq) {
  a0_frame_hdr_t f;
  a0_err_t err = frame_at(t, off, seq, &f);
  if (err) return err;
  t->cur_seq = seq;
  t->cur_off = off;
  return A0_OK;
}

a0_err_t a0_transport_jump_head(a0_locked_t lk) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  if (state_empty(&t->work)) return A0_ERR_EMPTY;
  return set_cursor(t, t->work.off_head, t->work.seq_low);
}

a0_err_t a0_transport_jump_tail(a0_locked_t lk) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  if (state_empty(&t->work)) return A0_ERR_EMPTY;
  return set_cursor(t, t->work.off_tail, t->work.seq_high);
}

a0_err_t a0_transport_jump(a0_locked_t lk, uint64_t seq) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  const a0_state_t* w = &t->work;
  if (state_empty(w)) return A0_ERR_EMPTY;
  if (seq > w->seq_high) return A0_ERR_SEQ_NOT_FOUND;
  if (seq <= w->seq_low) return set_cursor(t, w->off_head, w->seq_low);
  a0_frame_hdr_t f;
  a0_err_t err;
  uint64_t off, s;
  /* Walk from whichever end is closer; each step is checked. */
  if (seq - w->seq_low <= w->seq_high - seq) {
    for (off = w->off_head, s = w->seq_low; s < seq; s++) {
      if ((err = frame_at(t, off, s, &f))) return err;
      off = f.off_next;
    }
  } else {
    for (off = w->off_tail, s = w->seq_high; s > seq; s--) {
      if ((err = frame_at(t, off, s, &f))) return err;
      off = f.off_prev;
    }
  }
  return set_cursor(t, off, seq);
}

bool a0_transport_has_next(a0_locked_t lk) {
  const a0_transport_t* t = lk.t;
  return t->locked && !state_empty(&t->work) && t->cur_seq < t->work.seq_high;
}

bool a0_transport_has_prev(a0_locked_t lk) {
  const a0_transport_t* t = lk.t;
  return t->locked && !state_empty(&t->work) && t->cur_seq > t->work.seq_low &&
         t->cur_seq <= t->work.seq_high;
}

bool a0_transport_iter_valid(a0_locked_t lk) {
  const a0_transport_t* t = lk.t;
  return t->locked && !state_empty(&t->work) && t->cur_seq >= t->work.seq_low &&
         t->cur_seq <= t->work.seq_high;
}

a0_err_t a0_transport_next(a0_locked_t lk) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  if (!a0_transport_has_next(lk)) return A0_ERR_NO_FRAME;
  /* From an evicted (or unplaced) cursor: the oldest surviving frame. */
  if (t->cur_seq < t->work.seq_low) return set_cursor(t, t->work.off_head, t->work.seq_low);
  a0_frame_hdr_t f;
  a0_err_t err = frame_at(t, t->cur_off, t->cur_seq, &f);
  if (err) return err;
  return set_cursor(t, f.off_next, t->cur_seq + 1);
}

a0_err_t a0_transport_prev(a0_locked_t lk) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  if (!a0_transport_has_prev(lk)) return A0_ERR_NO_FRAME;
  a0_frame_hdr_t f;
  a0_err_t err = frame_at(t, t->cur_off, t->cur_seq, &f);
  if (err) return err;
  return set_cursor(t, f.off_prev, t->cur_seq - 1);
}

a0_err_t a0_transport_frame(a0_locked_t lk, a0_frame_t* out) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  if (!a0_transport_iter_valid(lk)) return A0_ERR_NO_FRAME;
  a0_frame_hdr_t f;
  a0_err_t err = frame_at(t, t->cur_off, t->cur_seq, &f);
  if (err) return err;
  out->seq = f.seq;
  out->data = t->base + t->cur_off + A0_FRAME_HDR_SIZE;
  out->size = f.data_size;
  return A0_OK;
}

/* ---- reads without the lock -------------------------------------------- */

/* The committed state as it is now, for the check after the caller's loads
 * of frame bytes: the acquire fence orders those loads before the version
 * loads of the snapshot (a seqlock reader's read barrier). */
static a0_err_t recheck(const a0_transport_t* t, a0_state_t* s) {
  atomic_thread_fence(memory_order_acquire);
  return a0_transport_snapshot(t, s);
}

static bool live_in(const a0_state_t* s, uint64_t seq) {
  return seq >= s->seq_low && seq <= s->seq_high;
}

/* Whether frame `seq` is still live in the committed state. */
static a0_err_t still_live(const a0_transport_t* t, uint64_t seq, bool* live) {
  a0_state_t s;
  a0_err_t err = recheck(t, &s);
  if (err) return err;
  *live = live_in(&s, seq);
  return A0_OK;
}

static bool readable_in(const a0_transport_t* t, const a0_state_t* s) {
  return !state_empty(s) && t->cur_seq < s->seq_high;
}

/* A frame header that fails its checks: corruption if the frame it was
 * reached from is still live (then every byte on the way was committed and
 * untouched), a race with a writer otherwise. */
static a0_err_t failed_check(const a0_transport_t* t, uint64_t link_seq) {
  bool live;
  a0_err_t err = still_live(t, link_seq, &live);
  if (err) return err;
  return live ? A0_ERR_CORRUPT : A0_ERR_EVICTED;
}

static void fill_read(const a0_transport_t* t, const a0_frame_hdr_t* f, uint64_t off,
                      uint64_t link_seq, uint64_t snap_low, a0_read_t* r) {
  r->seq = f->seq;
  r->off = off;
  r->data = t->base + off + A0_FRAME_HDR_SIZE;
  r->size = f->data_size;
  r->link_seq = link_seq;
  r->gap = 0;
  r->snap_low = snap_low;
}

/* ---- landing: where a read goes from a cursor whose frame is gone -------
 *
 * From an evicted (or never placed) cursor there is no "frame after it",
 * and the oldest surviving frame is the worst choice: it is the one the
 * writer overwrites next, so a reader that copies slower than the writer
 * evicts loses that race again and again (1 MiB frames: 3 % of its rate).
 * The read lands instead
 *  - on the newest frame if this reader landed before and has not caught up
 *    with the writer since (t->lapped): it is slower than the writer, and the
 *    newest frame is the one the writer comes back to last, a ring away;
 *  - otherwise 2 * t->pace frames after the oldest (at most on the newest),
 *    t->pace being how many frames the writer evicted while this reader's
 *    recent reads were in flight: a reader that fell behind once (a stall)
 *    loses little more than what was evicted, and finishes its copy before
 *    the writer gets there. Having seen no eviction (pace 0): the oldest.
 * The frames passed over count in missed, as evicted ones do. t->lapped is
 * set by a landing from an evicted cursor that passes frames over, and
 * cleared by a read that finds nothing left to read; t->pace is measured by
 * every read_end. */
static uint64_t landing_seq(const a0_transport_t* t, const a0_state_t* s) {
  uint64_t ahead = s->seq_high - s->seq_low;
  if (t->lapped || t->pace > ahead / 2) return s->seq_high;
  return s->seq_low + 2 * t->pace;
}

/* t->pace after a read during which the writer evicted `moved` frames: up
 * at once, down by a quarter of the difference (at least one) a read. */
static void note_pace(a0_transport_t* t, uint64_t moved) {
  if (moved >= t->pace)
    t->pace = moved;
  else
    t->pace -= (t->pace - moved + 3) / 4;
}

/* Locates frame `want` of snapshot s by walking forward from its oldest
 * frame, want - seq_low steps, every header checked; on one that fails, *bad
 * is its seq, *bad_off where it was looked for, and the error what
 * failed_check makes of it. What it finds relied on every frame from
 * seq_low up. */
static a0_err_t walk_from_head(const a0_transport_t* t, const a0_state_t* s, uint64_t want,
                               uint64_t* off, a0_frame_hdr_t* f, uint64_t* bad, uint64_t* bad_off) {
  uint64_t o = s->off_head;
  for (uint64_t seq = s->seq_low;; seq++) {
    if (frame_at(t, o, seq, f)) {
      *bad = seq;
      *bad_off = o;
      return failed_check(t, s->seq_low);
    }
    if (seq == want) {
      *off = o;
      return A0_OK;
    }
    o = f->off_next;
  }
}

/* Locates frame `want` of snapshot s by walking back from its newest frame:
 * the way to a frame when the way forward from the cursor is broken. Every
 * header on the way is checked; on one that fails, *bad is its seq, *bad_off
 * where it was looked for, and the error what failed_check makes of it. At
 * most seq_high - want steps. A frame found this way relied only on frames
 * from `want` up. */
static a0_err_t walk_from_tail(const a0_transport_t* t, const a0_state_t* s, uint64_t want,
                               uint64_t* off, a0_frame_hdr_t* f, uint64_t* bad, uint64_t* bad_off) {
  uint64_t o = s->off_tail;
  for (uint64_t seq = s->seq_high;; seq--) {
    if (frame_at(t, o, seq, f)) {
      *bad = seq;
      *bad_off = o;
      /* the tail's offset came from the snapshot; any other from seq + 1 */
      return failed_check(t, seq == s->seq_high ? seq : seq + 1);
    }
    if (seq == want) {
      *off = o;
      return A0_OK;
    }
    o = f->off_prev;
  }
}

/* Locates the landing frame `want` of s (see landing_seq): the newest from
 * the snapshot's own offset, any other by walking from the oldest. *from:
 * the oldest frame the way there relied on. Errors as the walks'. */
static a0_err_t locate_landing(const a0_transport_t* t, const a0_state_t* s, uint64_t want,
                               uint64_t* off, a0_frame_hdr_t* f, uint64_t* bad, uint64_t* bad_off,
                               uint64_t* from) {
  if (want == s->seq_high) {
    *from = want;
    return walk_from_tail(t, s, want, off, f, bad, bad_off);
  }
  *from = s->seq_low;
  return walk_from_head(t, s, want, off, f, bad, bad_off);
}

/* The off_next of the frame header at off, its other fields not trusted: a
 * frame whose own header is damaged may still link on (what it links to is
 * checked by frame_at like any other). False if off is out of bounds. */
static bool raw_next(const a0_transport_t* t, uint64_t off, uint64_t* next) {
  if (off < WS_START || off % A0_FRAME_ALIGN != 0 || off > t->size - A0_FRAME_HDR_SIZE) return false;
  *next = __atomic_load_n(&((const a0_frame_hdr_t*)(t->base + off))->off_next, __ATOMIC_RELAXED);
  return true;
}

a0_err_t a0_transport_read_begin(a0_transport_t* t, a0_read_t* r) {
  for (unsigned attempt = 0; attempt < A0_READ_TRIES; attempt++) {
    a0_state_t s;
    a0_err_t err = a0_transport_snapshot(t, &s);
    if (err) return err;
    t->snap_high = s.seq_high;
    t->snap_relayed = s.relayed_frames;
    if (!readable_in(t, &s)) {
      t->lapped = 0; /* caught up with the writer */
      return A0_ERR_NO_FRAME;
    }
    a0_frame_hdr_t f;
    uint64_t off = 0, link_seq, want, bad, bad_off;
    bool landing = t->cur_seq < s.seq_low;
    if (landing) {
      want = landing_seq(t, &s);
      err = locate_landing(t, &s, want, &off, &f, &bad, &bad_off, &link_seq);
      if (!err && link_seq < want) {
        /* The headers walked from the oldest on were intact if it is still
         * live now; from here on the read relies on `want` alone. */
        bool live;
        err = still_live(t, link_seq, &live);
        if (err) return err;
        if (!live) continue;
        link_seq = want;
      }
    } else {
      /* Follow the cursor frame's link: valid only while that frame lives
       * (read_end checks). Its own header is not needed: it was checked when
       * the cursor moved there, or it is a damaged frame read_skip passed. */
      want = t->cur_seq + 1;
      link_seq = t->cur_seq;
      err = raw_next(t, t->cur_off, &off) ? frame_at(t, off, want, &f) : A0_ERR_CORRUPT;
      if (err) err = failed_check(t, link_seq);
    }
    if (err == A0_ERR_EVICTED) continue;
    if (err == A0_ERR_CORRUPT) {
      /* Corrupt on the way: the frame may still be reachable from the newest
       * one (only a link before it was damaged). */
      err = walk_from_tail(t, &s, want, &off, &f, &bad, &bad_off);
      if (err == A0_ERR_EVICTED) continue;
      link_seq = want;
    }
    if (err) return err;
    fill_read(t, &f, off, link_seq, s.seq_low, r);
    if (t->cur_seq && r->seq > t->cur_seq + 1) r->gap = r->seq - t->cur_seq - 1;
    /* Lapped only if the landing passed frames over: a cursor whose frame is
     * gone while the next one lives (its reader dropped what it had read, as
     * an arena queue's does) lands on that next frame and has lost nothing. */
    if (landing && t->cur_seq && r->seq > t->cur_seq + 1) t->lapped = 1;
    return A0_OK;
  }
  return A0_ERR_BUSY;
}

a0_err_t a0_transport_read_skip(a0_transport_t* t, uint64_t* first, uint64_t* last) {
  *first = *last = 0;
  for (unsigned attempt = 0; attempt < A0_READ_TRIES; attempt++) {
    a0_state_t s;
    a0_err_t err = a0_transport_snapshot(t, &s);
    if (err) return err;
    if (!readable_in(t, &s)) return A0_OK;
    a0_frame_hdr_t f;
    bool placed = t->cur_seq >= s.seq_low;
    uint64_t want, from, off, bad, bad_off, next;
    uint64_t want_off = 0; /* where `want` is, going forward (0: unknown) */
    if (placed) {
      want = t->cur_seq + 1;
      from = t->cur_seq;
      if (raw_next(t, t->cur_off, &want_off) && frame_at(t, want_off, want, &f) == A0_OK)
        return A0_OK; /* readable (now) */
    } else {
      /* The frame read_begin lands on (the same rule, the same state). */
      want = landing_seq(t, &s);
      err = locate_landing(t, &s, want, &off, &f, &bad, &bad_off, &from);
      if (err == A0_OK) return A0_OK;
      if (err == A0_ERR_EVICTED) continue;
      if (err != A0_ERR_CORRUPT) return err;
      if (bad == want) want_off = bad_off; /* its own header is the damaged one */
    }
    err = walk_from_tail(t, &s, want, &off, &f, &bad, &bad_off);
    if (err == A0_OK) return A0_OK;
    if (err == A0_ERR_EVICTED) continue;
    if (err != A0_ERR_CORRUPT) return err;
    /* `want` is reachable neither way, nor is anything up to `bad` from the
     * newest frame back. Skip only `want` if the frame after it is reachable
     * through its (damaged) header; else want..bad. */
    uint64_t to = bad, to_off = bad_off;
    if (bad > want && want_off && raw_next(t, want_off, &next) && frame_at(t, next, want + 1, &f) == A0_OK) {
      to = want;
      to_off = want_off;
    }
    /* Decided on bytes reached from `from` on: only if that frame is still
     * live were they the committed ones. */
    bool live;
    err = still_live(t, from, &live);
    if (err) return err;
    if (!live) continue;
    if (t->cur_seq && want > t->cur_seq + 1) t->missed += want - t->cur_seq - 1;
    if (!placed && t->cur_seq && want > t->cur_seq + 1) t->lapped = 1;
    t->cur_seq = to;
    t->cur_off = to_off; /* the skipped frame: the next read follows its link, or the tail walk */
    *first = want;
    *last = to;
    return A0_OK;
  }
  return A0_ERR_BUSY;
}

/* A fresh snapshot bounds the batch: prev + 1 exists iff a snapshot lists
 * it, and then prev's off_next was written before the commit that did. */
a0_err_t a0_transport_read_after(a0_transport_t* t, const a0_read_t* prev, a0_read_t* r) {
  a0_state_t s;
  a0_err_t err = a0_transport_snapshot(t, &s);
  if (err) return err;
  t->snap_high = s.seq_high;
  t->snap_relayed = s.relayed_frames;
  if (state_empty(&s) || prev->seq >= s.seq_high) return A0_ERR_NO_FRAME;
  a0_frame_hdr_t p, f;
  err = frame_at(t, prev->off, prev->seq, &p);
  if (!err) err = frame_at(t, p.off_next, prev->seq + 1, &f);
  if (err) return failed_check(t, prev->link_seq);
  fill_read(t, &f, p.off_next, prev->link_seq, prev->snap_low, r);
  return A0_OK;
}

a0_err_t a0_transport_read_end(a0_transport_t* t, const a0_read_t* first, const a0_read_t* last) {
  a0_state_t s;
  a0_err_t err = recheck(t, &s);
  if (err) return err;
  note_pace(t, s.seq_low > first->snap_low ? s.seq_low - first->snap_low : 0);
  if (!live_in(&s, first->link_seq)) return A0_ERR_EVICTED;
  t->missed += first->gap;
  t->cur_seq = last->seq;
  t->cur_off = last->off;
  return A0_OK;
}

a0_err_t a0_transport_read_live(const a0_transport_t* t, const a0_read_t* r, bool* live) {
  return still_live(t, r->link_seq, live);
}

a0_err_t a0_transport_read_ready(const a0_transport_t* t, bool* ready) {
  a0_state_t s;
  a0_err_t err = a0_transport_snapshot(t, &s);
  if (err) return err;
  *ready = readable_in(t, &s);
  return A0_OK;
}

/* ---- waiting (the spin before a sleep: a0_spin.c) ----------------------------- */

a0_err_t a0_transport_wait_change(a0_transport_t* t, uint32_t seen, const struct timespec* deadline) {
  uint32_t* word = notify_word(t);
  uint64_t cap_ns = UINT64_MAX; /* a spin never runs past the deadline */
  uint64_t start = a0_spin_now_ns();
  if (deadline) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!a0_timespec_before(&now, deadline)) return A0_ERR_TIMEOUT;
    cap_ns = (uint64_t)(deadline->tv_sec - now.tv_sec) * 1000000000u + (uint64_t)deadline->tv_nsec -
             (uint64_t)now.tv_nsec;
  }
  if (a0_spin_before_sleep(t, word, seen, start, cap_ns)) return A0_OK;
  uint32_t armed;
  if (!a0_notify_arm(word, seen, &armed)) return A0_OK; /* moved meanwhile */
  t->sleeps++;
  int rc = a0_futex_wait(word, armed, deadline);
  if (rc == ETIMEDOUT || (deadline && a0_deadline_passed(deadline))) return A0_ERR_TIMEOUT;
  if (rc == EINTR) return A0_ERR_INTERRUPTED;
  a0_spin_after_wake(t, start);
  return A0_OK;
}

a0_err_t a0_transport_wait_readable(a0_transport_t* t, const struct timespec* deadline) {
  for (;;) {
    /* The word before the state: a publish after this load moves the word,
     * so the wait below cannot sleep through it. */
    uint32_t seen = a0_notify_load(notify_word(t));
    bool ready;
    a0_err_t err = a0_transport_read_ready(t, &ready);
    if (err) return err;
    if (ready) return A0_OK;
    err = a0_transport_wait_change(t, seen, deadline);
    if (err == A0_ERR_TIMEOUT || err == A0_ERR_INTERRUPTED) {
      a0_err_t again = a0_transport_read_ready(t, &ready);
      if (again) return again;
      return ready ? A0_OK : err;
    }
    if (err) return err;
  }
}

a0_err_t a0_transport_wait_step(a0_locked_t lk, const struct timespec* deadline) {
  a0_transport_t* t = lk.t;
  if (!t->locked) return A0_ERR_NOT_LOCKED;
  if (t->pending) return A0_ERR_PENDING;
  a0_arena_hdr_t* h = HDR(t);
  /* Read under the lock, after the predicate was tested on this state. */
  uint32_t seen = a0_notify_load(notify_word(t));
  a0_transport_unlock(lk);

  a0_err_t waited = a0_transport_wait_change(t, seen, deadline);

  int recovered;
  a0_locked_t relocked;
  a0_err_t err = a0_robust_lock(&h->lock.mutex, NULL, &recovered);
  if (!err) err = after_lock(t, recovered, &relocked);
  if (err) return err;
  if (waited == A0_ERR_TIMEOUT || (deadline && a0_deadline_passed(deadline))) return A0_ERR_TIMEOUT;
  return waited == A0_ERR_INTERRUPTED ? A0_ERR_INTERRUPTED : A0_OK;
}

a0_err_t a0_transport_wait(a0_locked_t lk, a0_pred_fn pred, void* ctx,
                           const struct timespec* deadline) {
  for (;;) {
    if (pred(lk, ctx)) return A0_OK;
    a0_err_t err = a0_transport_wait_step(lk, deadline);
    if (err == A0_ERR_TIMEOUT || err == A0_ERR_INTERRUPTED) return pred(lk, ctx) ? A0_OK : err;
    if (err) return err;
  }
}

bool a0_pred_has_next(a0_locked_t lk, void* ctx) {
  (void)ctx;
  return a0_transport_has_next(lk);
}

bool a0_pred_seq_above(a0_locked_t lk, void* ctx) {
  return lk.t->work.seq_high > *(const uint64_t*)ctx;
}

bool a0_pred_fits(a0_locked_t lk, void* ctx) {
  bool evicts;
  if (a0_transport_alloc_evicts(lk, *(const uint64_t*)ctx, &evicts) != A0_OK) return true;
  return !evicts;
}

uint32_t* a0_transport_notify_word(const a0_transport_t* t) { return notify_word(t); }

uint32_t* a0_transport_notify_local_word(const a0_transport_t* t) { return local_word(t); }

uint32_t a0_transport_notify_local_count(const a0_transport_t* t) {
  return atomic_load(A0_ATOMIC_U32(local_word(t)));
}

uint32_t a0_transport_notify_count(const a0_transport_t* t) {
  return atomic_load(A0_ATOMIC_U32(notify_word(t)));
}

uint32_t a0_transport_waiter_count(const a0_transport_t* t) {
  return a0_transport_notify_count(t) & A0_NOTIFY_SLEEPERS;
}
