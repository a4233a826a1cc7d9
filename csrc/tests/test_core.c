/* test_core.c — the C core on its own: arena init/check, alloc/commit and
 * iteration, eviction with mixed sizes (brute-force overlap check over many
 * seeded random operations), corrupt-state detection, deadman, wait timeout.
 *
 * Plain C, no framework: CHECK() counts, the last line is "N passed, M failed",
 * the exit status is non-zero on any failure. Runs under `make ctest` and
 * `make sanitize` (ASan + UBSan, leak checking). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "a0_arena.h"
#include "a0_deadman.h"
#include "a0_err.h"
#include "a0_sync.h"
#include "a0_transport.h"

#include "check.h"
#include "ring.h"

/* xorshift64*: a fixed seed makes every run the same. */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Du;
}

static void test_init_and_check(void) {
  const uint64_t size = 4096;
  uint8_t* base = new_arena(size);
  a0_check_info_t info;
  CHECK_ERR(a0_arena_check(base, size, &info), A0_OK);
  CHECK(HDRP(base)->magic == A0_ARENA_MAGIC && memcmp(base, "A0PYAREN", 8) == 0);
  CHECK(HDRP(base)->version == A0_FORMAT_VERSION);
  CHECK(HDRP(base)->header_size == A0_HEADER_SIZE);
  CHECK(HDRP(base)->arena_size == size);
  CHECK(committed(base)->seq_low == 1 && committed(base)->seq_high == 0);

  HDRP(base)->magic ^= 1;
  CHECK_ERR(a0_arena_check(base, size, &info), A0_ERR_BAD_MAGIC);
  CHECK(info.field && strcmp(info.field, "magic") == 0 && info.expected == A0_ARENA_MAGIC);
  HDRP(base)->magic ^= 1;

  HDRP(base)->version = 99;
  CHECK_ERR(a0_arena_check(base, size, &info), A0_ERR_BAD_VERSION);
  CHECK(info.field && strcmp(info.field, "version") == 0 && info.found == 99);
  HDRP(base)->version = A0_FORMAT_VERSION;

  HDRP(base)->header_size = 256;
  CHECK_ERR(a0_arena_check(base, size, &info), A0_ERR_BAD_HEADER_SIZE);
  CHECK(info.field && strcmp(info.field, "header_size") == 0 && info.found == 256);
  HDRP(base)->header_size = A0_HEADER_SIZE;

  CHECK_ERR(a0_arena_check(base, size - 16, &info), A0_ERR_SIZE_MISMATCH);
  CHECK(info.field && strcmp(info.field, "arena_size") == 0 && info.found == size &&
        info.expected == size - 16);
  CHECK_ERR(a0_arena_check(base, 100, &info), A0_ERR_TOO_SMALL);
  CHECK_ERR(a0_arena_init(base, A0_MIN_ARENA_SIZE - 1), A0_ERR_TOO_SMALL);

  /* state_version selects the committed page: pointing it at a page that
   * fails its checks is refused, naming the field. */
  HDRP(base)->pages[1].seq_low = 0;
  HDRP(base)->state_version = 7;
  CHECK_ERR(a0_arena_check(base, size, &info), A0_ERR_CORRUPT);
  CHECK(info.field && strcmp(info.field, "seq_low") == 0);
  HDRP(base)->state_version = 0;
  CHECK_ERR(a0_arena_check(base, size, NULL), A0_OK);
  free(base);
}

static void test_alloc_commit_iterate(void) {
  const uint64_t size = 4096;
  uint8_t* base = new_arena(size);
  a0_transport_t t;
  a0_locked_t lk;
  CHECK_ERR(a0_transport_init(&t, base, size), A0_OK);
  CHECK_ERR(a0_transport_lock(&t, &lk), A0_OK);
  CHECK(a0_transport_empty(lk));
  CHECK_ERR(a0_transport_jump_head(lk), A0_ERR_EMPTY);
  CHECK_ERR(a0_transport_next(lk), A0_ERR_NO_FRAME);
  CHECK(!a0_transport_has_next(lk) && !a0_transport_iter_valid(lk));

  for (uint64_t i = 0; i < 5; i++) CHECK_ERR(write_frame(lk, i * 10), A0_OK);
  CHECK(a0_transport_seq_low(lk) == 1 && a0_transport_seq_high(lk) == 5);
  CHECK(committed(base)->seq_high == 0); /* nothing published before commit */
  uint32_t notify = a0_transport_notify_count(&t);
  CHECK_ERR(a0_transport_commit(lk), A0_OK);
  CHECK(a0_transport_notify_count(&t) != notify);
  CHECK(committed(base)->seq_high == 5 && committed(base)->off_head == A0_HEADER_SIZE);

  uint64_t used;
  CHECK_ERR(a0_transport_used_space(lk, &used), A0_OK);
  uint64_t expect_used = 0;
  for (uint64_t i = 0; i < 5; i++) expect_used += a0_align_up(A0_FRAME_HDR_SIZE + i * 10);
  CHECK(used == expect_used && a0_transport_high_water_mark(lk) == expect_used);

  /* Walk head to tail, then back. */
  CHECK_ERR(a0_transport_jump_head(lk), A0_OK);
  a0_frame_t f;
  for (uint64_t seq = 1; seq <= 5; seq++) {
    CHECK_ERR(a0_transport_frame(lk, &f), A0_OK);
    CHECK(f.seq == seq && f.size == (seq - 1) * 10);
    CHECK(((uintptr_t)f.data % A0_FRAME_ALIGN) == 0);
    bool intact = true;
    for (uint64_t i = 0; i < f.size; i++) intact = intact && f.data[i] == fill_byte(seq);
    CHECK(intact);
    if (seq < 5) CHECK_ERR(a0_transport_next(lk), A0_OK);
  }
  CHECK(!a0_transport_has_next(lk));
  CHECK_ERR(a0_transport_next(lk), A0_ERR_NO_FRAME);
  for (uint64_t seq = 5; seq > 1; seq--) CHECK_ERR(a0_transport_prev(lk), A0_OK);
  CHECK(!a0_transport_has_prev(lk));
  CHECK_ERR(a0_transport_prev(lk), A0_ERR_NO_FRAME);
  CHECK_ERR(a0_transport_jump(lk, 3), A0_OK);
  CHECK_ERR(a0_transport_frame(lk, &f), A0_OK);
  CHECK(f.seq == 3);
  CHECK_ERR(a0_transport_jump(lk, 6), A0_ERR_SEQ_NOT_FOUND);

  /* Uncommitted frames vanish at unlock; the cursor on one comes back. */
  CHECK_ERR(write_frame(lk, 8), A0_OK);
  CHECK_ERR(a0_transport_jump_tail(lk), A0_OK);
  CHECK(t.cur_seq == 6);
  CHECK_ERR(a0_transport_unlock(lk), A0_OK);
  CHECK(t.cur_seq == 5);
  CHECK_ERR(a0_transport_lock(&t, &lk), A0_OK);
  CHECK(a0_transport_seq_high(lk) == 5 && !a0_transport_has_next(lk));
  CHECK_ERR(a0_transport_lock(&t, &lk), A0_ERR_DEADLOCK);

  /* Too large: nothing changes. */
  uint8_t* data;
  CHECK_ERR(a0_transport_alloc(lk, a0_transport_max_frame_data(&t) + 1, &data), A0_ERR_FRAME_TOO_LARGE);
  bool evicts;
  CHECK_ERR(a0_transport_alloc_evicts(lk, a0_transport_max_frame_data(&t) + 1, &evicts),
            A0_ERR_FRAME_TOO_LARGE);
  CHECK_ERR(a0_transport_alloc_evicts(lk, a0_transport_max_frame_data(&t), &evicts), A0_OK);
  CHECK(evicts);
  CHECK_ERR(a0_transport_alloc_evicts(lk, 0, &evicts), A0_OK);
  CHECK(!evicts);

  /* clear: seqs are never reused, published at once. */
  CHECK_ERR(a0_transport_clear(lk), A0_OK);
  CHECK(a0_transport_empty(lk) && committed(base)->seq_low == 6 && committed(base)->seq_high == 5);
  CHECK_ERR(write_frame(lk, 1), A0_OK);
  CHECK(a0_transport_seq_high(lk) == 6);
  CHECK(a0_transport_has_next(lk)); /* cursor 5 is below seq_low 6 */
  CHECK_ERR(a0_transport_next(lk), A0_OK);
  CHECK(t.cur_seq == 6);
  CHECK_ERR(a0_transport_commit(lk), A0_OK);
  CHECK_ERR(a0_transport_unlock(lk), A0_OK);
  CHECK_ERR(a0_transport_unlock(lk), A0_ERR_NOT_LOCKED);
  free(base);
}

/* A live frame as found by walking the ring through the API. */
typedef struct {
  uint64_t seq, start, end;
} span_t;

/* Walks head to tail; checks content, seq order and that no two frames
 * overlap (all pairs). Returns the number of frames, or -1 on a failure. */
static int walk_and_check(a0_locked_t lk, uint8_t* base, uint64_t size, span_t* spans, int cap) {
  if (a0_transport_empty(lk)) return 0;
  if (a0_transport_jump_head(lk)) return -1;
  int n = 0;
  for (;;) {
    a0_frame_t f;
    if (a0_transport_frame(lk, &f) || n >= cap) return -1;
    uint64_t start = (uint64_t)(f.data - base) - A0_FRAME_HDR_SIZE;
    spans[n] = (span_t){f.seq, start, start + a0_align_up(A0_FRAME_HDR_SIZE + f.size)};
    if (spans[n].end > size || start < A0_HEADER_SIZE) return -1;
    for (uint64_t i = 0; i < f.size; i++)
      if (f.data[i] != fill_byte(f.seq)) return -1;
    if (n > 0 && spans[n].seq != spans[n - 1].seq + 1) return -1;
    n++;
    if (!a0_transport_has_next(lk)) break;
    if (a0_transport_next(lk)) return -1;
  }
  if (spans[0].seq != a0_transport_seq_low(lk) || spans[n - 1].seq != a0_transport_seq_high(lk))
    return -1;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (spans[i].start < spans[j].end && spans[j].start < spans[i].end) return -1;
  return n;
}

static void test_eviction_mixed_sizes_never_overlaps(void) {
  static const uint64_t sizes[] = {576, 640, 1000, 1536, 4096};
  span_t spans[256];
  int bad_steps = 0, evictions = 0, wraps = 0;
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    const uint64_t size = sizes[si];
    uint8_t* base = new_arena(size);
    a0_transport_t t;
    a0_transport_init(&t, base, size);
    const uint64_t max = a0_transport_max_frame_data(&t);
    a0_locked_t lk;
    a0_transport_lock(&t, &lk);
    uint64_t last_off = 0;
    int live = 0; /* frames in spans[], from the walk after the previous step */
    for (int op = 0; op < 3000; op++) {
      uint64_t r = rnd();
      uint64_t n;
      switch (r % 4) {
        case 0: n = rnd() % (max < 48 ? max + 1 : 48); break;
        case 1: n = max - rnd() % (max < 40 ? max + 1 : 40); break;
        default: n = rnd() % (max + 1); break;
      }
      bool evicts;
      uint64_t low_before = a0_transport_seq_low(lk);
      a0_transport_alloc_evicts(lk, n, &evicts);
      a0_err_t werr = write_frame(lk, n);
      if (werr != A0_OK) {
        fprintf(stderr, "arena %llu op %d: alloc(%llu): %s\n", (unsigned long long)size, op,
                (unsigned long long)n, a0_strerror(werr));
        bad_steps++;
        continue;
      }
      /* alloc_evicts answers exactly whether the alloc evicted. */
      if (evicts != (a0_transport_seq_low(lk) > low_before)) {
        bad_steps++;
        fprintf(stderr, "arena %llu op %d: alloc_evicts(%llu) said %d\n", (unsigned long long)size, op,
                (unsigned long long)n, (int)evicts);
      }
      evictions += evicts;
      /* Eviction is minimal: the last frame evicted overlapped the new one
       * (else it need not have gone) and no survivor does. */
      const uint64_t new_start = t.work.off_tail;
      const uint64_t new_end = new_start + a0_align_up(A0_FRAME_HDR_SIZE + n);
      const uint64_t low_after = a0_transport_seq_low(lk);
      for (int i = 0; i < live; i++) {
        bool overlaps = spans[i].start < new_end && new_start < spans[i].end;
        bool evicted = spans[i].seq < low_after;
        bool last_evicted = spans[i].seq + 1 == low_after;
        if ((!evicted && overlaps) || (last_evicted && !overlaps)) {
          bad_steps++;
          fprintf(stderr, "arena %llu op %d: frame %llu %s\n", (unsigned long long)size, op,
                  (unsigned long long)spans[i].seq, overlaps ? "overlaps the new frame" : "evicted for nothing");
        }
      }
      uint64_t off = t.work.off_tail;
      wraps += off < last_off;
      last_off = off;
      switch ((r >> 8) % 8) {
        case 0: /* leave it uncommitted: dropped at unlock */
          a0_transport_unlock(lk);
          a0_transport_lock(&t, &lk);
          break;
        case 1:
          a0_transport_commit(lk);
          a0_transport_unlock(lk);
          a0_transport_lock(&t, &lk);
          break;
        case 2:
          if (rnd() % 16 == 0) a0_transport_clear(lk);
          break;
        default:
          a0_transport_commit(lk);
          break;
      }
      live = walk_and_check(lk, base, size, spans, 256);
      if (live < 0) {
        live = 0;
        bad_steps++;
        fprintf(stderr, "arena %llu op %d: walk found overlap or bad content\n", (unsigned long long)size, op);
      }
      /* The committed page passes its own checks after every step. */
      if (a0_arena_check(base, size, NULL) != A0_OK) {
        bad_steps++;
        fprintf(stderr, "arena %llu op %d: committed state fails its check\n", (unsigned long long)size, op);
      }
    }
    a0_transport_unlock(lk);
    free(base);
  }
  CHECK(bad_steps == 0);
  CHECK(evictions > 1000);
  CHECK(wraps > 0);
}

static void test_corrupt_state_is_detected(void) {
  const uint64_t size = 2048;
  uint8_t* base = new_arena(size);
  a0_transport_t t;
  a0_locked_t lk;
  a0_transport_init(&t, base, size);
  a0_transport_lock(&t, &lk);
  for (int i = 0; i < 6; i++) write_frame(lk, 40);
  a0_transport_commit(lk);
  a0_transport_unlock(lk);
  a0_state_t saved = *committed(base);
  const uint64_t second = saved.off_head + a0_align_up(A0_FRAME_HDR_SIZE + 40);
  a0_frame_hdr_t* f2 = (a0_frame_hdr_t*)(base + second);
  a0_frame_hdr_t* f5 = (a0_frame_hdr_t*)(base + saved.off_tail - (second - saved.off_head));

  /* State page: offsets outside the workspace, misaligned, seqs inverted. */
  const uint64_t bad_offs[] = {0, 7, 100, size, size - 16, UINT64_MAX - 15};
  for (size_t i = 0; i < sizeof bad_offs / sizeof bad_offs[0]; i++) {
    committed(base)->off_head = bad_offs[i];
    CHECK_ERR(a0_transport_lock(&t, &lk), A0_ERR_CORRUPT);
    CHECK(!t.locked);
    *committed(base) = saved;
  }
  committed(base)->seq_low = saved.seq_high + 2;
  CHECK_ERR(a0_transport_lock(&t, &lk), A0_ERR_CORRUPT);
  *committed(base) = saved;
  committed(base)->seq_low = 0;
  CHECK_ERR(a0_transport_lock(&t, &lk), A0_ERR_CORRUPT);
  *committed(base) = saved;
  const uint64_t version = HDRP(base)->state_version;
  a0_state_t* other = &HDRP(base)->pages[(version + 1) & 1];
  const a0_state_t other_saved = *other;
  other->off_head = 3;
  other->seq_low = 1;
  other->seq_high = 5;
  HDRP(base)->state_version = version + 1; /* a publish of a bad page */
  CHECK_ERR(a0_transport_lock(&t, &lk), A0_ERR_CORRUPT);
  HDRP(base)->state_version = version;
  *other = other_saved;

  /* The lock was released by every failed lock: this one succeeds. */
  CHECK_ERR(a0_transport_lock(&t, &lk), A0_OK);
  CHECK_ERR(a0_transport_jump(lk, 3), A0_OK);
  a0_transport_unlock(lk);

  /* A frame's off_next pointing elsewhere, its seq or data_size wrong. */
  uint64_t saved_next = f2->off_next;
  const uint64_t bad_next[] = {0, 3, size, UINT64_MAX, saved.off_head};
  for (size_t i = 0; i < sizeof bad_next / sizeof bad_next[0]; i++) {
    f2->off_next = bad_next[i];
    a0_transport_lock(&t, &lk);
    CHECK_ERR(a0_transport_jump(lk, 3), A0_ERR_CORRUPT); /* walks 1 -> 2 -> 3 from the head */
    CHECK_ERR(a0_transport_jump_head(lk), A0_OK);
    CHECK_ERR(a0_transport_next(lk), A0_OK);
    CHECK_ERR(a0_transport_next(lk), A0_ERR_CORRUPT);
    a0_transport_unlock(lk);
  }
  f2->off_next = saved_next;

  /* off_prev: jump(4) of 6 walks back from the tail, 6 -> 5 -> 4. */
  uint64_t saved_prev = f5->off_prev;
  CHECK(f5->seq == 5);
  const uint64_t bad_prev[] = {0, 8, size - 8, UINT64_MAX - 15, saved.off_tail};
  for (size_t i = 0; i < sizeof bad_prev / sizeof bad_prev[0]; i++) {
    f5->off_prev = bad_prev[i];
    a0_transport_lock(&t, &lk);
    CHECK_ERR(a0_transport_jump(lk, 4), A0_ERR_CORRUPT);
    CHECK_ERR(a0_transport_jump(lk, 5), A0_OK);
    CHECK_ERR(a0_transport_prev(lk), A0_ERR_CORRUPT);
    a0_transport_unlock(lk);
  }
  f5->off_prev = saved_prev;

  f2->seq = 99;
  a0_transport_lock(&t, &lk);
  CHECK_ERR(a0_transport_jump(lk, 2), A0_ERR_CORRUPT);
  CHECK_ERR(a0_transport_jump_head(lk), A0_OK);
  CHECK_ERR(a0_transport_next(lk), A0_ERR_CORRUPT);
  a0_transport_unlock(lk);
  f2->seq = 2;

  f2->data_size = size;
  a0_transport_lock(&t, &lk);
  CHECK_ERR(a0_transport_jump(lk, 2), A0_ERR_CORRUPT);
  a0_transport_unlock(lk);
  f2->data_size = 40;

  /* The tail frame's data_size: alloc and used_space must not trust it. */
  a0_frame_hdr_t* tail = (a0_frame_hdr_t*)(base + saved.off_tail);
  tail->data_size = UINT64_MAX - 8;
  a0_transport_lock(&t, &lk);
  uint8_t* data;
  uint64_t used;
  CHECK_ERR(a0_transport_alloc(lk, 8, &data), A0_ERR_CORRUPT);
  CHECK_ERR(a0_transport_used_space(lk, &used), A0_ERR_CORRUPT);
  a0_transport_unlock(lk);
  tail->data_size = 40;

  /* A cycle of off_next links is no endless loop: the seq check stops it. */
  f2->off_next = saved.off_head;
  a0_transport_lock(&t, &lk);
  CHECK_ERR(a0_transport_jump(lk, 3), A0_ERR_CORRUPT);
  a0_transport_unlock(lk);
  f2->off_next = saved_next;

  a0_transport_lock(&t, &lk);
  CHECK_ERR(a0_transport_jump(lk, 3), A0_OK);
  CHECK_ERR(write_frame(lk, 16), A0_OK);
  CHECK_ERR(a0_transport_commit(lk), A0_OK);
  a0_transport_unlock(lk);
  free(base);
}

static void test_deadman(void) {
  uint8_t* base = new_arena(1024);
  bool taken, mine;
  uint32_t pid;
  CHECK_ERR(a0_deadman_state(base, &taken, &mine, &pid), A0_OK);
  CHECK(!taken && !mine && pid == 0);
  CHECK_ERR(a0_deadman_release(base), A0_ERR_NOT_OWNER);
  uint32_t bumps = HDRP(base)->deadman_notify;
  CHECK_ERR(a0_deadman_try_take(base), A0_OK);
  CHECK(HDRP(base)->deadman_notify != bumps);
  CHECK_ERR(a0_deadman_state(base, &taken, &mine, &pid), A0_OK);
  CHECK(taken && mine && pid == (uint32_t)getpid());
  CHECK(HDRP(base)->deadman_pid == (uint32_t)getpid());
  a0_err_t again = a0_deadman_try_take(base);
  CHECK(again == A0_ERR_DEADLOCK || again == A0_ERR_BUSY);
  CHECK_ERR(a0_deadman_take(base, NULL), A0_ERR_DEADLOCK);
  CHECK_ERR(a0_deadman_wait_taken(base, NULL), A0_OK);
  CHECK_ERR(a0_deadman_release(base), A0_OK);
  CHECK_ERR(a0_deadman_state(base, &taken, &mine, &pid), A0_OK);
  CHECK(!taken && !mine && pid == 0 && HDRP(base)->deadman_pid == 0);
  CHECK_ERR(a0_deadman_release(base), A0_ERR_NOT_OWNER);

  struct timespec deadline;
  deadline = a0_deadline_after_ns(20 * 1000 * 1000);
  CHECK_ERR(a0_deadman_wait_taken(base, &deadline), A0_ERR_TIMEOUT);
  CHECK_ERR(a0_deadman_wait_released(base, NULL), A0_OK);
  CHECK_ERR(a0_deadman_take(base, NULL), A0_OK);
  CHECK_ERR(a0_deadman_release(base), A0_OK);
  free(base);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_wait_timeout(void) {
  const uint64_t size = 1024;
  uint8_t* base = new_arena(size);
  a0_transport_t t;
  a0_locked_t lk;
  a0_transport_init(&t, base, size);
  a0_transport_lock(&t, &lk);

  struct timespec deadline;
  double start = now_s();
  deadline = a0_deadline_after_ns(30 * 1000 * 1000);
  CHECK_ERR(a0_transport_wait(lk, a0_pred_has_next, NULL, &deadline), A0_ERR_TIMEOUT);
  CHECK(now_s() - start >= 0.029);
  CHECK(t.locked); /* returns with the lock held, even on timeout */
  /* The timed-out waiter left its sleepers flag (it cannot know whether
   * others sleep too): the next commit pays one wake and clears it. */
  CHECK(a0_transport_waiter_count(&t) == 1);

  /* A predicate that already holds returns at once; seq_above too. */
  CHECK_ERR(write_frame(lk, 4), A0_OK);
  CHECK_ERR(a0_transport_wait_step(lk, &deadline), A0_ERR_PENDING);
  CHECK_ERR(a0_transport_commit(lk), A0_OK);
  CHECK(a0_transport_waiter_count(&t) == 0);
  CHECK_ERR(a0_transport_wait(lk, a0_pred_has_next, NULL, NULL), A0_OK);
  uint64_t above = 0;
  CHECK_ERR(a0_transport_wait(lk, a0_pred_seq_above, &above, NULL), A0_OK);
  above = 1;
  CHECK_ERR(a0_transport_wait(lk, a0_pred_seq_above, &above, &deadline), A0_ERR_TIMEOUT);
  CHECK(t.locked);
  a0_transport_unlock(lk);
  CHECK_ERR(a0_transport_wait_step(lk, NULL), A0_ERR_NOT_LOCKED);
  free(base);
}

/* Fills the ring with frames of n bytes until the next would evict. */
static uint64_t fill_without_evicting(a0_locked_t lk, uint64_t n) {
  uint64_t written = 0;
  bool evicts = false;
  while (a0_transport_alloc_evicts(lk, n, &evicts) == A0_OK && !evicts) {
    if (write_frame(lk, n) != A0_OK) break;
    written++;
  }
  a0_transport_commit(lk);
  return written;
}

static void test_noevict_alloc_and_drop_through(void) {
  const uint64_t size = 4096;
  uint8_t* base = new_arena(size);
  a0_transport_t t;
  a0_locked_t lk;
  a0_transport_init(&t, base, size);
  a0_transport_lock(&t, &lk);
  uint8_t* data;
  struct timespec deadline = a0_deadline_after_ns(20 * 1000 * 1000);

  CHECK_ERR(a0_transport_alloc_noevict(lk, a0_transport_max_frame_data(&t) + 1, NULL, &data),
            A0_ERR_FRAME_TOO_LARGE);
  uint64_t n = 100, frames = fill_without_evicting(lk, n);
  CHECK(frames > 3 && a0_transport_seq_low(lk) == 1 && a0_transport_seq_high(lk) == frames);
  CHECK(!a0_pred_fits(lk, &n));
  /* Full: waits for room, times out, evicted nothing and allocated nothing. */
  CHECK_ERR(a0_transport_alloc_noevict(lk, n, &deadline, &data), A0_ERR_TIMEOUT);
  CHECK(t.locked && a0_transport_seq_low(lk) == 1 && a0_transport_seq_high(lk) == frames);

  /* Dropping below the head changes nothing; through frame 2 frees two. */
  CHECK_ERR(a0_transport_drop_through(lk, 0), A0_OK);
  CHECK(a0_transport_seq_low(lk) == 1);
  CHECK_ERR(a0_transport_drop_through(lk, 2), A0_OK);
  CHECK(a0_transport_seq_low(lk) == 3 && committed(base)->seq_low == 3);
  CHECK(committed(base)->off_head == A0_HEADER_SIZE + 2 * a0_align_up(A0_FRAME_HDR_SIZE + n));
  CHECK(a0_pred_fits(lk, &n));
  CHECK_ERR(a0_transport_alloc_noevict(lk, n, NULL, &data), A0_OK);
  CHECK(a0_transport_seq_low(lk) == 3 && a0_transport_seq_high(lk) == frames + 1);
  CHECK_ERR(a0_transport_drop_through(lk, 5), A0_ERR_PENDING); /* would commit the alloc */
  CHECK_ERR(a0_transport_commit(lk), A0_OK);

  /* Through the newest (or beyond) empties the ring; seqs keep counting. */
  CHECK_ERR(a0_transport_drop_through(lk, UINT64_MAX), A0_OK);
  CHECK(a0_transport_empty(lk) && committed(base)->seq_low == frames + 2);
  CHECK_ERR(write_frame(lk, 8), A0_OK);
  CHECK(a0_transport_seq_high(lk) == frames + 2);
  CHECK_ERR(a0_transport_commit(lk), A0_OK);

  /* A corrupt link in the walk is refused and leaves the state untouched. */
  fill_without_evicting(lk, n);
  a0_state_t before = *committed(base);
  a0_frame_hdr_t* head = (a0_frame_hdr_t*)(base + before.off_head);
  uint64_t good = head->off_next;
  head->off_next = 3;
  CHECK_ERR(a0_transport_drop_through(lk, before.seq_low + 2), A0_ERR_CORRUPT);
  CHECK(memcmp(committed(base), &before, sizeof before) == 0 &&
        a0_transport_seq_low(lk) == before.seq_low);
  head->off_next = good;
  a0_transport_unlock(lk);
  CHECK_ERR(a0_transport_drop_through(lk, 1), A0_ERR_NOT_LOCKED);
  free(base);
}

struct noevict_writer {
  uint8_t* base;
  uint64_t size, n;
  a0_err_t err;
  uint64_t seq_low_after;
};

static void* noevict_writer_main(void* arg) {
  struct noevict_writer* w = arg;
  a0_transport_t t;
  a0_locked_t lk;
  a0_transport_init(&t, w->base, w->size);
  a0_transport_lock(&t, &lk);
  struct timespec deadline = a0_deadline_after_ns(10ull * 1000 * 1000 * 1000);
  uint8_t* data;
  w->err = a0_transport_alloc_noevict(lk, w->n, &deadline, &data);
  if (!w->err) {
    memset(data, 0x5a, w->n);
    w->seq_low_after = a0_transport_seq_low(lk);
    w->err = a0_transport_commit(lk);
  }
  a0_transport_unlock(lk);
  return NULL;
}

static void test_noevict_alloc_waits_for_a_consumer(void) {
  const uint64_t size = 4096;
  uint8_t* base = new_arena(size);
  a0_transport_t t;
  a0_locked_t lk;
  a0_transport_init(&t, base, size);
  a0_transport_lock(&t, &lk);
  uint64_t frames = fill_without_evicting(lk, 200);
  a0_transport_unlock(lk);

  struct noevict_writer w = {.base = base, .size = size, .n = 200, .err = A0_ERR__COUNT};
  pthread_t th;
  CHECK(pthread_create(&th, NULL, noevict_writer_main, &w) == 0);
  /* The writer goes to sleep (the waiter count rises); nothing was evicted. */
  for (int i = 0; i < 2000 && a0_transport_waiter_count(&t) == 0; i++) usleep(1000);
  CHECK(a0_transport_waiter_count(&t) != 0);
  CHECK(committed(base)->seq_low == 1 && committed(base)->seq_high == frames);
  a0_transport_lock(&t, &lk);
  CHECK_ERR(a0_transport_drop_through(lk, 1), A0_OK); /* the consumer read frame 1 */
  a0_transport_unlock(lk);
  pthread_join(th, NULL);
  CHECK_ERR(w.err, A0_OK);
  CHECK(w.seq_low_after == 2); /* room came from the drop, not from an eviction */
  CHECK(committed(base)->seq_low == 2 && committed(base)->seq_high == frames + 1);
  free(base);
}

/* ---- lock-free reads ------------------------------------------------------ */

static void test_lockfree_reads_in_order_with_gaps(void) {
  const uint64_t size = 4096;
  uint8_t* base = new_arena(size);
  a0_transport_t w, r;
  a0_transport_init(&w, base, size);
  a0_transport_init(&r, base, size);
  uint8_t buf[4096];
  uint64_t seq = 0, n = 0;
  bool ready = true;

  CHECK_ERR(read_copy(&r, buf, sizeof buf, &seq, &n), A0_ERR_NO_FRAME);
  CHECK_ERR(a0_transport_read_ready(&r, &ready), A0_OK);
  CHECK(!ready);
  for (uint64_t i = 1; i <= 5; i++) CHECK_ERR(write_commit(&w, 10 * i), A0_OK);
  CHECK_ERR(a0_transport_read_ready(&r, &ready), A0_OK);
  CHECK(ready);
  for (uint64_t i = 1; i <= 5; i++) {
    CHECK_ERR(read_copy(&r, buf, sizeof buf, &seq, &n), A0_OK);
    CHECK(seq == i && n == 10 * i && filled_with(buf, n, fill_byte(i)));
  }
  CHECK_ERR(read_copy(&r, buf, sizeof buf, &seq, &n), A0_ERR_NO_FRAME);
  CHECK(r.cur_seq == 5 && r.missed == 0);

  /* The cursor is shared with the locked API: next() continues from it. */
  CHECK_ERR(write_commit(&w, 7), A0_OK);
  a0_locked_t lk;
  a0_transport_lock(&r, &lk);
  CHECK_ERR(a0_transport_next(lk), A0_OK);
  CHECK(r.cur_seq == 6);
  a0_transport_unlock(lk);

  /* Frames evicted before the reader got to them are a gap, counted once. */
  for (int i = 0; i < 40; i++) CHECK_ERR(write_commit(&w, 300), A0_OK);
  a0_state_t s;
  CHECK_ERR(a0_transport_snapshot(&r, &s), A0_OK);
  CHECK(s.seq_low > 7);
  CHECK_ERR(read_copy(&r, buf, sizeof buf, &seq, &n), A0_OK);
  CHECK(seq == s.seq_low && r.missed == s.seq_low - 7);
  uint64_t missed = r.missed;
  while (read_copy(&r, buf, sizeof buf, &seq, &n) == A0_OK) CHECK(filled_with(buf, n, fill_byte(seq)));
  CHECK(seq == s.seq_high && r.missed == missed);

  /* A fresh reader starts at the oldest frame and counts nothing before it. */
  a0_transport_t fresh;
  a0_transport_init(&fresh, base, size);
  CHECK_ERR(read_copy(&fresh, buf, sizeof buf, &seq, &n), A0_OK);
  CHECK(seq == s.seq_low && fresh.missed == 0);

  /* clear() removes frames unread: a gap too. */
  a0_transport_lock(&w, &lk);
  CHECK_ERR(a0_transport_clear(lk), A0_OK);
  a0_transport_unlock(lk);
  CHECK_ERR(read_copy(&r, buf, sizeof buf, &seq, &n), A0_ERR_NO_FRAME);
  CHECK_ERR(write_commit(&w, 1), A0_OK);
  CHECK_ERR(read_copy(&fresh, buf, sizeof buf, &seq, &n), A0_OK);
  CHECK(seq == s.seq_high + 1 && fresh.missed == s.seq_high - s.seq_low);
  free(base);
}

/* The interleavings a lock-free reader must survive, driven step by step:
 * a writer evicts the frame (or only the frame whose link the reader
 * followed) between the reader's copy and its check. Each rejected read
 * teaches the reader the writer's pace, so its retry lands ahead (see
 * test_lapped_reader_lands_where_it_can_finish). */
static void test_lockfree_read_rejects_a_frame_evicted_during_the_copy(void) {
  const uint64_t size = 2048; /* 1536-byte workspace: 4 frames of 300 */
  uint8_t* base = new_arena(size);
  a0_transport_t w, r, r1;
  a0_transport_init(&w, base, size);
  a0_transport_init(&r, base, size);
  a0_transport_init(&r1, base, size);
  uint8_t buf[2048];
  uint64_t seq, n;
  for (int i = 0; i < 4; i++) CHECK_ERR(write_commit(&w, 300), A0_OK);

  /* 1. From an unplaced cursor: the head frame 1, evicted before the check.
   * The writer evicted one frame during the read: the retry lands two
   * frames after the new oldest (2), and an unplaced cursor counts nothing. */
  a0_read_t rd;
  CHECK_ERR(a0_transport_read_begin(&r1, &rd), A0_OK);
  CHECK(rd.seq == 1 && rd.link_seq == 1 && rd.gap == 0);
  memcpy(buf, rd.data, rd.size);
  CHECK_ERR(write_commit(&w, 300), A0_OK); /* evicts frame 1 and writes over it */
  CHECK(((const a0_frame_hdr_t*)(rd.data - A0_FRAME_HDR_SIZE))->seq == 5); /* really overwritten */
  CHECK_ERR(a0_transport_read_end(&r1, &rd, &rd), A0_ERR_EVICTED);
  CHECK(r1.cur_seq == 0 && r1.missed == 0 && r1.pace == 1); /* nothing moved; one frame evicted */
  CHECK_ERR(read_copy(&r1, buf, sizeof buf, &seq, &n), A0_OK);
  CHECK(seq == 4 && r1.missed == 0 && !r1.lapped && filled_with(buf, n, fill_byte(4)));

  /* 2. Not evicted during the copy: accepted. read_live says so too,
   * without moving the cursor. */
  bool live = false;
  CHECK_ERR(read_copy(&r, buf, sizeof buf, &seq, &n), A0_OK); /* pace 0: the oldest */
  CHECK(seq == 2 && r.pace == 0);
  CHECK_ERR(a0_transport_read_begin(&r, &rd), A0_OK);
  CHECK(rd.seq == 3 && rd.link_seq == 2);
  CHECK_ERR(a0_transport_read_live(&r, &rd, &live), A0_OK);
  CHECK(live && r.cur_seq == 2);
  CHECK_ERR(a0_transport_read_end(&r, &rd, &rd), A0_OK);

  /* 3. Only the cursor's frame (the link) evicted, the target still live:
   * the link may have been overwritten, so the read is rejected. The writer
   * evicted two frames meanwhile, more than half of what is ahead of the
   * oldest: the retry lands on the newest, the frames passed over missed. */
  CHECK_ERR(a0_transport_read_begin(&r, &rd), A0_OK);
  CHECK(rd.seq == 4 && rd.link_seq == 3);
  CHECK_ERR(write_commit(&w, 300), A0_OK); /* evicts 2 */
  CHECK_ERR(write_commit(&w, 300), A0_OK); /* evicts 3: the link */
  CHECK_ERR(a0_transport_snapshot(&r, &(a0_state_t){0}), A0_OK);
  CHECK_ERR(a0_transport_read_live(&r, &rd, &live), A0_OK);
  CHECK(!live && r.cur_seq == 3);
  CHECK_ERR(a0_transport_read_end(&r, &rd, &rd), A0_ERR_EVICTED);
  CHECK(r.pace == 2);
  CHECK_ERR(read_copy(&r, buf, sizeof buf, &seq, &n), A0_OK);
  CHECK(seq == 7 && r.missed == 3 && r.lapped && filled_with(buf, n, fill_byte(7)));

  /* 4. A batch is valid only as a whole: its first link decides. */
  for (int i = 0; i < 3; i++) CHECK_ERR(write_commit(&w, 300), A0_OK); /* 8..10, evicts 4..6 */
  a0_read_t first, next;
  CHECK_ERR(a0_transport_read_begin(&r, &first), A0_OK);
  CHECK_ERR(a0_transport_read_after(&r, &first, &next), A0_OK);
  CHECK(first.seq == 8 && next.seq == 9 && next.link_seq == first.link_seq && first.link_seq == 7);
  CHECK_ERR(a0_transport_read_after(&r, &next, &rd), A0_OK);
  CHECK_ERR(a0_transport_read_after(&r, &rd, &rd), A0_ERR_NO_FRAME); /* 10 is the newest */
  CHECK_ERR(write_commit(&w, 300), A0_OK); /* evicts 7, the batch's link */
  CHECK_ERR(a0_transport_read_end(&r, &first, &next), A0_ERR_EVICTED);
  CHECK(r.cur_seq == 7 && r.missed == 3);
  /* Lapped again without having caught up: the newest, 11, alone. */
  CHECK_ERR(a0_transport_read_begin(&r, &first), A0_OK);
  CHECK(first.seq == 11 && first.gap == 3);
  CHECK_ERR(a0_transport_read_after(&r, &first, &next), A0_ERR_NO_FRAME);
  CHECK_ERR(a0_transport_read_end(&r, &first, &first), A0_OK);
  CHECK(r.cur_seq == 11 && r.missed == 6);
  CHECK_ERR(a0_transport_read_begin(&r, &rd), A0_ERR_NO_FRAME); /* caught up */
  CHECK(!r.lapped);

  /* 5. A bad header on a frame that is still live is corruption, not a race. */
  CHECK_ERR(write_commit(&w, 300), A0_OK);
  a0_frame_hdr_t* cur = (a0_frame_hdr_t*)(base + r.cur_off);
  a0_frame_hdr_t* target = (a0_frame_hdr_t*)(base + cur->off_next);
  CHECK(target->seq == r.cur_seq + 1);
  uint64_t good = target->data_size;
  target->data_size = size;
  CHECK_ERR(a0_transport_read_begin(&r, &rd), A0_ERR_CORRUPT);
  target->data_size = good;
  CHECK_ERR(a0_transport_read_begin(&r, &rd), A0_OK);
  free(base);
}

/* Reads everything left with r: the seqs read into got[], the seqs skipped
 * into skipped[]. Returns how many of each via *ngot, *nskipped. */
static void drain_skipping(a0_transport_t* r, uint64_t* got, uint64_t* ngot, uint64_t* skipped,
                           uint64_t* nskipped) {
  uint8_t buf[4096];
  uint64_t seq, n, first, last;
  *ngot = *nskipped = 0;
  for (int guard = 0; guard < 1000; guard++) {
    a0_err_t err = read_copy(r, buf, sizeof buf, &seq, &n);
    if (err == A0_ERR_NO_FRAME) return;
    if (err == A0_OK) {
      CHECK(filled_with(buf, n, fill_byte(seq)));
      got[(*ngot)++] = seq;
      continue;
    }
    CHECK_ERR(err, A0_ERR_CORRUPT);
    CHECK_ERR(a0_transport_read_skip(r, &first, &last), A0_OK);
    CHECK(first != 0 && first <= last);
    for (uint64_t q = first; q <= last && first; q++) skipped[(*nskipped)++] = q;
  }
  CHECK(!"drain_skipping did not end");
}

/* A damaged frame header (its seq overwritten) in the middle, at the head,
 * at the tail, and two in a row: every intact frame is still read, in order,
 * and read_skip moves the cursor past exactly the damaged ones. */
static void test_lockfree_reader_skips_a_damaged_frame_header(void) {
  const uint64_t size = 8192;
  uint8_t* base = new_arena(size);
  a0_transport_t w, r;
  a0_transport_init(&w, base, size);
  uint64_t got[64], skipped[64], ngot, nskipped, first, last;
  for (int i = 0; i < 10; i++) CHECK_ERR(write_commit(&w, 40), A0_OK); /* seqs 1..10 */

  /* In the middle: frame 4. */
  frame_hdr_of(base, 4)->seq = 0xdeadbeef;
  a0_transport_init(&r, base, size);
  drain_skipping(&r, got, &ngot, skipped, &nskipped);
  CHECK(ngot == 9 && nskipped == 1 && skipped[0] == 4);
  for (uint64_t i = 0; i < ngot; i++) CHECK(got[i] == (i < 3 ? i + 1 : i + 2));
  CHECK(r.cur_seq == 10 && r.missed == 0);
  /* ...and the reader goes on with frames written after. */
  CHECK_ERR(write_commit(&w, 40), A0_OK);
  drain_skipping(&r, got, &ngot, skipped, &nskipped);
  CHECK(ngot == 1 && got[0] == 11 && nskipped == 0);

  /* Nothing to skip when nothing is damaged: read_skip changes nothing. */
  CHECK_ERR(a0_transport_read_skip(&r, &first, &last), A0_OK);
  CHECK(first == 0 && last == 0 && r.cur_seq == 11);

  /* At the head (a reader from the oldest), and two in a row (7 and 8). */
  frame_hdr_of(base, 4)->seq = 4;
  frame_hdr_of(base, 1)->seq = 99;
  frame_hdr_of(base, 7)->seq = 99;
  frame_hdr_of(base, 8)->seq = 99;
  a0_transport_init(&r, base, size);
  drain_skipping(&r, got, &ngot, skipped, &nskipped);
  CHECK(ngot == 8 && nskipped == 3 && skipped[0] == 1 && skipped[1] == 7 && skipped[2] == 8);
  CHECK(got[0] == 2 && got[4] == 6 && got[5] == 9 && got[7] == 11);

  /* A header zeroed whole (its links too): the frames after it are found
   * from the newest frame back. */
  frame_hdr_of(base, 1)->seq = 1;
  frame_hdr_of(base, 7)->seq = 7;
  frame_hdr_of(base, 8)->seq = 8;
  a0_frame_hdr_t* five = frame_hdr_of(base, 5);
  a0_frame_hdr_t saved = *five;
  memset(five, 0, sizeof *five);
  a0_transport_init(&r, base, size);
  drain_skipping(&r, got, &ngot, skipped, &nskipped);
  CHECK(ngot == 10 && nskipped == 1 && skipped[0] == 5 && got[4] == 6 && got[9] == 11);
  *five = saved;

  /* At the tail: skipped, and nothing to read until a frame comes (a writer
   * cannot append after a damaged tail: the frame before 14 is damaged
   * after 14 was written). */
  a0_transport_init(&r, base, size);
  uint8_t buf[4096];
  uint64_t seq, n;
  for (uint64_t q = 1; q <= 11; q++) CHECK_ERR(read_copy(&r, buf, sizeof buf, &seq, &n), A0_OK);
  CHECK_ERR(write_commit(&w, 40), A0_OK); /* 12 */
  frame_hdr_of(base, 12)->seq = 1234;
  CHECK_ERR(read_copy(&r, buf, sizeof buf, &seq, &n), A0_ERR_CORRUPT);
  CHECK_ERR(a0_transport_read_skip(&r, &first, &last), A0_OK);
  CHECK(first == 12 && last == 12 && r.cur_seq == 12);
  CHECK_ERR(read_copy(&r, buf, sizeof buf, &seq, &n), A0_ERR_NO_FRAME);
  bool ready = true;
  CHECK_ERR(a0_transport_read_ready(&r, &ready), A0_OK);
  CHECK(!ready);
  frame_hdr_of(base, 12)->seq = 12;
  CHECK_ERR(write_commit(&w, 40), A0_OK); /* 13 */
  CHECK_ERR(write_commit(&w, 40), A0_OK); /* 14 */
  frame_hdr_of(base, 13)->seq = 1234;
  CHECK_ERR(read_copy(&r, buf, sizeof buf, &seq, &n), A0_ERR_CORRUPT);
  CHECK_ERR(a0_transport_read_skip(&r, &first, &last), A0_OK);
  CHECK(first == 13 && last == 13);
  CHECK_ERR(read_copy(&r, buf, sizeof buf, &seq, &n), A0_OK);
  CHECK(seq == 14 && filled_with(buf, n, fill_byte(14)) && r.missed == 0);
  free(base);
}

static void test_notify_protocol(void) {
  uint32_t word = 10, armed = 0;
  /* Arm fails when the word moved since it was read. */
  CHECK(!a0_notify_arm(&word, 8, &armed));
  CHECK(a0_notify_arm(&word, 10, &armed) && armed == (12 | A0_NOTIFY_SLEEPERS) && word == armed);
  /* A second sleeper arms on top (the word always moves). */
  uint32_t armed2;
  CHECK(a0_notify_arm(&word, armed, &armed2) && armed2 == (14 | A0_NOTIFY_SLEEPERS));
  /* A publish sees the flag; its wake clears it if nothing moved since. */
  uint32_t before = a0_notify_bump(&word);
  CHECK(before & A0_NOTIFY_SLEEPERS);
  a0_notify_wake(&word, before);
  CHECK(word == 16);
  /* Nobody armed: the bump needs no wake, the word moves by 2. */
  before = a0_notify_bump(&word);
  CHECK(!(before & A0_NOTIFY_SLEEPERS) && word == 18);
  /* An arm between a bump and its wake keeps the flag for the next one. */
  CHECK(a0_notify_arm(&word, 18, &armed) && word == (20 | A0_NOTIFY_SLEEPERS));
  before = a0_notify_bump(&word);
  CHECK(a0_notify_arm(&word, word, &armed));
  a0_notify_wake(&word, before);
  CHECK(word & A0_NOTIFY_SLEEPERS);
  /* Wrap-around is harmless. */
  word = UINT32_MAX - 1;
  CHECK(a0_notify_arm(&word, UINT32_MAX - 1, &armed) && armed == 1);
  before = a0_notify_bump(&word);
  a0_notify_wake(&word, before);
  CHECK(word == 2);
}

/* A waiter killed while asleep leaves the flag set: the next publish pays
 * one wake syscall and clears it, and later publishes pay none. */
static void test_waiter_killed_asleep_costs_one_wake(void) {
  const uint64_t size = 4096;
  uint8_t* base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) abort();
  if (a0_arena_init(base, size) != A0_OK) abort();
  a0_transport_t t;
  a0_transport_init(&t, base, size);
  pid_t pid = fork();
  if (pid == 0) {
    a0_transport_t c;
    a0_transport_init(&c, base, size);
    c.spin_adaptive = 0;
    a0_transport_wait_readable(&c, NULL);
    _exit(0);
  }
  for (int i = 0; i < 5000 && a0_transport_waiter_count(&t) == 0; i++) usleep(1000);
  CHECK(a0_transport_waiter_count(&t) == 1);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  CHECK(a0_transport_waiter_count(&t) == 1); /* left behind */
  CHECK_ERR(write_commit(&t, 8), A0_OK);
  CHECK(a0_transport_waiter_count(&t) == 0); /* one wake, then clear */
  for (int i = 0; i < 10; i++) CHECK_ERR(write_commit(&t, 8), A0_OK);
  CHECK(a0_transport_waiter_count(&t) == 0);
  munmap(base, size);
}

/* ---- threads: one writer with mixed sizes, lock-free readers ------------- */

struct torture {
  uint8_t* base;
  uint64_t size;
  uint64_t frames;
  _Atomic int done;
  /* per reader */
  uint64_t got[3], torn[3], disorder[3], missed[3], last[3], errors[3];
};

static uint32_t sum32(const uint8_t* p, uint64_t n) {
  uint32_t h = 2166136261u;
  for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

/* Frame body: seq (8 bytes), then filler, then the checksum of the rest. */
static void* torture_writer(void* arg) {
  struct torture* x = arg;
  a0_transport_t t;
  a0_transport_init(&t, x->base, x->size);
  const uint64_t max = a0_transport_max_frame_data(&t);
  uint64_t rng = 12345;
  for (uint64_t i = 0; i < x->frames; i++) {
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    uint64_t n;
    switch ((rng >> 33) % 8) {
      case 0: n = max - (rng >> 40) % 64; break; /* near the arena size */
      case 1: n = 12 + (rng >> 40) % 2000; break;
      default: n = 12 + (rng >> 40) % 100; break;
    }
    if (n < 12) n = 12;
    a0_locked_t lk;
    uint8_t* d;
    if (a0_transport_lock(&t, &lk) || a0_transport_alloc(lk, n, &d)) abort();
    uint64_t seq = a0_transport_seq_high(lk);
    memcpy(d, &seq, 8);
    for (uint64_t k = 8; k < n - 4; k++) d[k] = (uint8_t)(seq + k);
    uint32_t h = sum32(d, n - 4);
    memcpy(d + n - 4, &h, 4);
    a0_transport_commit_unlock(lk);
  }
  atomic_store(&x->done, 1);
  return NULL;
}

struct reader_arg {
  struct torture* x;
  int id;
};

static void* torture_reader(void* arg) {
  struct reader_arg* ra = arg;
  struct torture* x = ra->x;
  int id = ra->id;
  a0_transport_t t;
  a0_transport_init(&t, x->base, x->size);
  t.spin_adaptive = id != 2; /* reader 2 sleeps at once */
  uint8_t* buf = malloc(x->size);
  uint64_t first = 0;
  for (;;) {
    a0_read_t r, last;
    a0_err_t err = a0_transport_read_begin(&t, &r);
    if (err == A0_ERR_NO_FRAME) {
      if (atomic_load(&x->done)) {
        if (a0_transport_read_begin(&t, &r) == A0_ERR_NO_FRAME) break;
        continue;
      }
      struct timespec dl = a0_deadline_after_ns(1000000);
      a0_transport_wait_readable(&t, &dl);
      continue;
    }
    if (err) {
      x->errors[id]++;
      break;
    }
    /* Reader 1 reads batches (read_after), the others one frame at a time. */
    last = r;
    uint64_t copied = 0, seqs[8], sizes[8];
    uint8_t* dst = buf;
    do {
      if (copied && (uint64_t)(dst - buf) + last.size > x->size) break;
      memcpy(dst, last.data, last.size);
      seqs[copied] = last.seq;
      sizes[copied] = last.size;
      dst += last.size;
      copied++;
    } while (id == 1 && copied < 8 && a0_transport_read_after(&t, &last, &last) == A0_OK);
    err = a0_transport_read_end(&t, &r, &last);
    if (err == A0_ERR_EVICTED) continue;
    if (err) {
      x->errors[id]++;
      break;
    }
    dst = buf;
    for (uint64_t k = 0; k < copied; k++) {
      uint64_t seq, n = sizes[k];
      uint32_t h;
      memcpy(&seq, dst, 8);
      memcpy(&h, dst + n - 4, 4);
      if (n < 12 || seq != seqs[k] || h != sum32(dst, n - 4)) x->torn[id]++;
      if (seqs[k] <= x->last[id]) x->disorder[id]++;
      if (!first) first = seqs[k];
      x->last[id] = seqs[k];
      x->got[id]++;
      dst += n;
    }
  }
  x->missed[id] = t.missed;
  /* Every seq from the first read to the last was either read or counted missed. */
  if (x->got[id] + t.missed != x->last[id] - first + 1) x->errors[id]++;
  free(buf);
  return NULL;
}

static void test_lockfree_readers_never_return_a_torn_frame(void) {
  struct torture x = {.size = 16384, .frames = 60000};
  x.base = new_arena(x.size);
  pthread_t w, rd[3];
  struct reader_arg args[3];
  for (int i = 0; i < 3; i++) {
    args[i] = (struct reader_arg){&x, i};
    pthread_create(&rd[i], NULL, torture_reader, &args[i]);
  }
  pthread_create(&w, NULL, torture_writer, &x);
  pthread_join(w, NULL);
  for (int i = 0; i < 3; i++) pthread_join(rd[i], NULL);
  uint64_t got = 0, missed = 0;
  for (int i = 0; i < 3; i++) {
    CHECK(x.torn[i] == 0);
    CHECK(x.disorder[i] == 0);
    CHECK(x.errors[i] == 0);
    CHECK(x.last[i] == x.frames); /* every reader reached the newest frame */
    got += x.got[i];
    missed += x.missed[i];
  }
  CHECK(got > 0);
  printf("torture: %llu frames read, %llu missed (3 readers)\n", (unsigned long long)got,
         (unsigned long long)missed);
  free(x.base);
}

/* A reader asleep on a fixed spin of 0 and one on the adaptive spin both
 * wake for a writer in another thread. */
static void* late_writer(void* arg) {
  struct torture* x = arg;
  a0_transport_t t;
  a0_transport_init(&t, x->base, x->size);
  usleep(20000);
  write_commit(&t, 16);
  return NULL;
}

static void test_wait_readable_wakes_for_a_writer(void) {
  struct torture x = {.size = 4096};
  x.base = new_arena(x.size);
  for (int round = 0; round < 2; round++) {
    a0_transport_t t;
    a0_transport_init(&t, x.base, x.size);
    t.cur_seq = (uint64_t)round; /* round 1: frame 1 exists already, wait for 2 */
    if (round) {
      a0_state_t s;
      a0_transport_snapshot(&t, &s);
      t.cur_off = s.off_tail;
    }
    t.spin_adaptive = (uint32_t)round;
    pthread_t w;
    pthread_create(&w, NULL, late_writer, &x);
    struct timespec dl = a0_deadline_after_ns(5ull * 1000 * 1000 * 1000);
    CHECK_ERR(a0_transport_wait_readable(&t, &dl), A0_OK);
    pthread_join(w, NULL);
    bool ready;
    CHECK_ERR(a0_transport_read_ready(&t, &ready), A0_OK);
    CHECK(ready);
  }
  a0_transport_t t;
  a0_transport_init(&t, x.base, x.size);
  t.cur_seq = 2;
  a0_state_t s;
  a0_transport_snapshot(&t, &s);
  t.cur_off = s.off_tail;
  struct timespec dl = a0_deadline_after_ns(10 * 1000 * 1000);
  CHECK_ERR(a0_transport_wait_readable(&t, &dl), A0_ERR_TIMEOUT);
  free(x.base);
}

/* ---- relayed writers: notify_local and relayed_frames ----------------------- */

static uint32_t word_of(const uint32_t* w) { return atomic_load((_Atomic uint32_t*)w); }

/* A relayed writer's publishes (commits of one and of two frames, the
 * eviction an alloc publishes, clear) move notify and never notify_local;
 * its commits count in relayed_frames. An ordinary writer's move both. A
 * reader that read to the end stands on the snapshot it last took, whose
 * relayed_frames tells how many of the frames up to there were relayed. A
 * state whose relayed_frames exceeds seq_high is refused. */
static void test_relayed_writer(void) {
  const uint64_t size = 4096;
  uint8_t* base = new_arena(size);
  a0_arena_hdr_t* h = HDRP(base);
  a0_transport_t w, r, plain;
  a0_transport_init(&w, base, size);
  a0_transport_init(&r, base, size);
  a0_transport_init(&plain, base, size);
  CHECK(w.relayed == 0 && a0_transport_notify_local_word(&w) == &h->notify_local);
  w.relayed = 1;

  uint32_t n0 = word_of(&h->notify), l0 = word_of(&h->notify_local);
  CHECK_ERR(write_commit(&w, 100), A0_OK);
  CHECK(word_of(&h->notify) != n0 && word_of(&h->notify_local) == l0);
  CHECK(committed(base)->relayed_frames == 1);
  a0_locked_t lk;
  CHECK_ERR(a0_transport_lock(&w, &lk), A0_OK);
  CHECK_ERR(write_frame(lk, 100), A0_OK);
  CHECK_ERR(write_frame(lk, 100), A0_OK);
  CHECK_ERR(a0_transport_commit_unlock(lk), A0_OK);
  CHECK(word_of(&h->notify_local) == l0 && committed(base)->relayed_frames == 3);

  n0 = word_of(&h->notify);
  CHECK_ERR(write_commit(&plain, 100), A0_OK); /* seq 4 */
  CHECK(word_of(&h->notify) != n0 && word_of(&h->notify_local) != l0);
  CHECK(committed(base)->relayed_frames == 3 && committed(base)->seq_high == 4);

  /* an alloc that evicts publishes the eviction; dropped uncommitted, nothing
   * else is published: the local word stays, the count too */
  l0 = word_of(&h->notify_local);
  n0 = word_of(&h->notify);
  CHECK_ERR(a0_transport_lock(&w, &lk), A0_OK);
  bool evicts = false;
  CHECK_ERR(a0_transport_alloc_evicts(lk, 3000, &evicts), A0_OK);
  CHECK(evicts);
  CHECK_ERR(write_frame(lk, 3000), A0_OK);
  CHECK_ERR(a0_transport_unlock(lk), A0_OK);
  CHECK(committed(base)->seq_low > 1); /* the eviction was published */
  CHECK(word_of(&h->notify) != n0 && word_of(&h->notify_local) == l0);
  CHECK(committed(base)->relayed_frames == 3 && committed(base)->seq_high == 4);
  CHECK_ERR(a0_transport_lock(&w, &lk), A0_OK);
  CHECK_ERR(a0_transport_clear(lk), A0_OK);
  CHECK_ERR(a0_transport_unlock(lk), A0_OK);
  CHECK(word_of(&h->notify_local) == l0 && committed(base)->relayed_frames == 3);

  /* the reader's snapshot: after reading everything, cursor == snap_high */
  for (int i = 0; i < 3; i++) CHECK_ERR(write_commit(&w, 50), A0_OK);   /* 5, 6, 7 relayed */
  CHECK_ERR(write_commit(&plain, 50), A0_OK);                          /* 8 */
  a0_read_t first, cur, next;
  CHECK_ERR(a0_transport_read_begin(&r, &first), A0_OK);
  CHECK(first.seq == 5);
  cur = first;
  while (a0_transport_read_after(&r, &cur, &next) == A0_OK) cur = next;
  CHECK_ERR(a0_transport_read_end(&r, &first, &cur), A0_OK);
  CHECK(r.cur_seq == 8 && r.snap_high == 8 && r.snap_relayed == 6);
  CHECK_ERR(a0_transport_read_begin(&r, &first), A0_ERR_NO_FRAME);
  CHECK(r.cur_seq == r.snap_high);

  a0_check_info_t info;
  a0_state_t bad = *committed(base);
  bad.relayed_frames = bad.seq_high + 1;
  CHECK_ERR(a0_state_check(&bad, size, &info), A0_ERR_CORRUPT);
  CHECK(info.field && strcmp(info.field, "relayed_frames") == 0);
  free(base);
}

/* A writer killed holding the lock may have published without notifying:
 * the next locker bumps and wakes both words, even a relayed one, so a
 * sleeper on notify_local is not left asleep by a local writer's death. */
static void test_recovery_bumps_both_words(void) {
  const uint64_t size = 4096;
  uint8_t* base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) abort();
  if (a0_arena_init(base, size) != A0_OK) abort();
  a0_arena_hdr_t* h = HDRP(base);
  pid_t pid = fork();
  if (pid == 0) {
    a0_transport_t c;
    a0_locked_t lk;
    a0_transport_init(&c, base, size);
    if (a0_transport_lock(&c, &lk) || write_frame(lk, 8)) _exit(1);
    raise(SIGKILL); /* dies holding the lock */
    _exit(2);
  }
  int status;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  uint32_t seen = word_of(&h->notify_local), armed = seen;
  CHECK(a0_notify_arm(&h->notify_local, seen, &armed)); /* as a sleeper would */
  uint32_t n0 = word_of(&h->notify);
  a0_transport_t w;
  a0_transport_init(&w, base, size);
  w.relayed = 1;
  a0_locked_t lk;
  CHECK_ERR(a0_transport_lock(&w, &lk), A0_OK);
  CHECK(w.recovered == 1);
  CHECK(word_of(&h->notify_local) != armed && word_of(&h->notify) != n0);
  CHECK(!(word_of(&h->notify_local) & A0_NOTIFY_SLEEPERS)); /* woken and cleared */
  a0_transport_unlock(lk);
  munmap(base, size);
}

int main(void) {
  test_init_and_check();
  test_alloc_commit_iterate();
  test_eviction_mixed_sizes_never_overlaps();
  test_corrupt_state_is_detected();
  test_lockfree_reader_skips_a_damaged_frame_header();
  test_deadman();
  test_wait_timeout();
  test_noevict_alloc_and_drop_through();
  test_noevict_alloc_waits_for_a_consumer();
  test_lockfree_reads_in_order_with_gaps();
  test_lockfree_read_rejects_a_frame_evicted_during_the_copy();
  test_notify_protocol();
  test_waiter_killed_asleep_costs_one_wake();
  test_lockfree_readers_never_return_a_torn_frame();
  test_wait_readable_wakes_for_a_writer();
  test_relayed_writer();
  test_recovery_bumps_both_words();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
