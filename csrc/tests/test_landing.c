/* test_landing.c — where a lock-free read goes from a cursor whose frame
 * was evicted (a0_transport.c, "landing"), with the writer stepped by the
 * test: ahead of the oldest by twice the writer's pace, then on the newest
 * while the reader stays lapped, back to the pace rule once it caught up;
 * every frame passed over counted in missed, the order and the contents
 * kept; damaged headers on the way; and a reader slower than a free-running
 * writer thread that never returns a torn frame or loses count.
 *
 * Runs under `make ctest` and `make sanitize`. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "a0_arena.h"
#include "a0_err.h"
#include "a0_transport.h"

#include "check.h"
#include "ring.h"

/* 16 frames of FRAME bytes fill the workspace exactly: from then on every
 * write evicts exactly the oldest frame. */
#define FRAME 100u
#define SPAN 144u /* align16(32 + FRAME) */
#define RING 16u
#define SIZE (A0_HEADER_SIZE + RING * SPAN)

static void write_n(a0_transport_t* w, int n) {
  for (int i = 0; i < n; i++) CHECK_ERR(write_commit(w, FRAME), A0_OK);
}

/* Reads one frame and checks its contents; returns its seq (0 on failure). */
static uint64_t read_one(a0_transport_t* r) {
  uint8_t buf[FRAME];
  uint64_t seq = 0, n = 0;
  CHECK_ERR(read_copy(r, buf, sizeof buf, &seq, &n), A0_OK);
  CHECK(n == FRAME && filled_with(buf, n, fill_byte(seq)));
  return seq;
}

/* A new arena full of RING frames, a writer w and a reader r on it that has
 * read frame 1 (its cursor placed: from here on whatever it skips counts). */
static uint8_t* full_ring_read_once(a0_transport_t* w, a0_transport_t* r) {
  uint8_t* base = new_arena(SIZE);
  a0_transport_init(w, base, SIZE);
  a0_transport_init(r, base, SIZE);
  write_n(w, RING);
  CHECK(read_one(r) == 1);
  return base;
}

static void test_a_reader_that_saw_no_eviction_lands_on_the_oldest(void) {
  uint8_t* base = new_arena(SIZE);
  a0_transport_t w, r;
  a0_transport_init(&w, base, SIZE);
  a0_transport_init(&r, base, SIZE);
  write_n(&w, 20); /* 5..20 live */
  CHECK(read_one(&r) == 5 && r.missed == 0); /* a fresh reader: the oldest, nothing counted */
  write_n(&w, 16); /* 21..36: the cursor's frame is gone, no read saw an eviction */
  CHECK(r.pace == 0 && !r.lapped);
  CHECK(read_one(&r) == 21 && r.missed == 15 && r.lapped);
  free(base);
}

/* The whole story of one reader, the writer stepped between its steps. */
static void test_a_lapped_reader_lands_where_it_can_finish(void) {
  uint8_t* base = new_arena(SIZE);
  a0_transport_t w, r;
  a0_transport_init(&w, base, SIZE);
  a0_transport_init(&r, base, SIZE);
  uint8_t buf[FRAME];
  write_n(&w, RING);
  CHECK(read_one(&r) == 1);

  /* Overtaken: three frames written (1..3 evicted) while it copied 2. */
  a0_read_t rd;
  CHECK_ERR(a0_transport_read_begin(&r, &rd), A0_OK);
  CHECK(rd.seq == 2);
  memcpy(buf, rd.data, rd.size);
  write_n(&w, 3);
  CHECK_ERR(a0_transport_read_end(&r, &rd, &rd), A0_ERR_EVICTED);
  CHECK(r.pace == 3 && r.cur_seq == 1 && r.missed == 0);

  /* It lands twice that pace after the oldest (4): on 10, relying on 10
   * alone. The writer writes three more during this copy, evicting 4..6:
   * the oldest would have been lost again; 10 is not. */
  CHECK_ERR(a0_transport_read_begin(&r, &rd), A0_OK);
  CHECK(rd.seq == 10 && rd.link_seq == 10 && rd.gap == 8);
  memcpy(buf, rd.data, rd.size);
  write_n(&w, 3);
  CHECK(committed(base)->seq_low == 7);
  CHECK_ERR(a0_transport_read_end(&r, &rd, &rd), A0_OK);
  CHECK(filled_with(buf, FRAME, fill_byte(10)));
  CHECK(r.cur_seq == 10 && r.missed == 8 && r.lapped && r.pace == 3);

  /* On from there, in order; a read with no eviction lowers the pace. */
  CHECK(read_one(&r) == 11 && r.pace == 2);

  /* Lapped again before it caught up: it is slower than the writer, so it
   * lands on the newest, a whole ring ahead of the writer. */
  write_n(&w, 5); /* 23..27; 12..27 live */
  CHECK(read_one(&r) == 27 && r.missed == 8 + 15);
  CHECK(r.pace == 1);

  /* Caught up: nothing left to read clears the flag... */
  CHECK_ERR(a0_transport_read_begin(&r, &rd), A0_ERR_NO_FRAME);
  CHECK(!r.lapped);

  /* ...so the next lap (a stall) lands by the pace again: 2 after 32. */
  write_n(&w, 20); /* 28..47; 32..47 live */
  CHECK(read_one(&r) == 34 && r.missed == 23 + 6 && r.lapped && r.pace == 0);
  for (uint64_t want = 35; want <= 47; want++) CHECK(read_one(&r) == want);
  CHECK(r.missed == 29);
  CHECK_ERR(a0_transport_read_begin(&r, &rd), A0_ERR_NO_FRAME);

  /* Pace 0 now: the next landing is the oldest, nothing passed over that
   * was not evicted. */
  write_n(&w, 20); /* 48..67; 52..67 live */
  CHECK(read_one(&r) == 52 && r.missed == 29 + 4);
  free(base);
}

/* A batch of several frames is one read for the pace: what the writer
 * evicted from read_begin's snapshot to read_end's check. */
static void test_pace_counts_the_evictions_of_a_whole_batch(void) {
  a0_transport_t w, r;
  uint8_t* base = full_ring_read_once(&w, &r);
  a0_read_t first, next;
  CHECK_ERR(a0_transport_read_begin(&r, &first), A0_OK);
  CHECK_ERR(a0_transport_read_after(&r, &first, &next), A0_OK);
  CHECK(first.snap_low == 1 && next.snap_low == 1);
  write_n(&w, 2); /* evicts 1 (the link) and 2 */
  CHECK_ERR(a0_transport_read_after(&r, &next, &next), A0_OK); /* the batch goes on... */
  CHECK_ERR(a0_transport_read_end(&r, &first, &next), A0_ERR_EVICTED); /* ...and fails whole */
  CHECK(r.pace == 2);
  /* Landing 2 * 2 after the oldest (3), then a batch from there is valid. */
  CHECK_ERR(a0_transport_read_begin(&r, &first), A0_OK);
  CHECK(first.seq == 7 && first.gap == 5);
  CHECK_ERR(a0_transport_read_after(&r, &first, &next), A0_OK);
  write_n(&w, 4); /* evicts 3..6: not 7 */
  CHECK_ERR(a0_transport_read_end(&r, &first, &next), A0_OK);
  CHECK(r.cur_seq == 8 && r.missed == 5 && r.pace == 4);
  free(base);
}

/* Damaged headers where a landing goes: on the way from the oldest (the
 * frame is found from the newest back), and the landing frame itself
 * (read_skip passes exactly it, the next read goes on after it). */
static void test_a_landing_past_damaged_headers(void) {
  a0_transport_t w, r;
  uint8_t* base = full_ring_read_once(&w, &r);
  a0_read_t rd;
  CHECK_ERR(a0_transport_read_begin(&r, &rd), A0_OK);
  write_n(&w, 1); /* evicts 1: pace 1, 2..17 live */
  CHECK_ERR(a0_transport_read_end(&r, &rd, &rd), A0_ERR_EVICTED);
  CHECK(r.pace == 1);

  /* Frame 3 damaged, on the way from the oldest (2) to the landing (4). */
  a0_frame_hdr_t* three = frame_hdr_of(base, 3);
  three->seq = 99;
  CHECK_ERR(a0_transport_read_begin(&r, &rd), A0_OK);
  CHECK(rd.seq == 4 && rd.link_seq == 4 && rd.gap == 2);
  CHECK_ERR(a0_transport_read_end(&r, &rd, &rd), A0_OK);
  three->seq = 3;

  /* The landing frame damaged: lapped, so the newest (33); skipped alone. */
  write_n(&w, 16); /* 18..33 live */
  a0_frame_hdr_t* tail = (a0_frame_hdr_t*)(base + committed(base)->off_tail);
  tail->seq = 99;
  CHECK_ERR(a0_transport_read_begin(&r, &rd), A0_ERR_CORRUPT);
  uint64_t first = 0, last = 0;
  CHECK_ERR(a0_transport_read_skip(&r, &first, &last), A0_OK);
  CHECK(first == 33 && last == 33 && r.cur_seq == 33 && r.missed == 2 + 28);
  tail->seq = 33; /* (a writer cannot append after a damaged tail) */
  CHECK_ERR(a0_transport_read_begin(&r, &rd), A0_ERR_NO_FRAME);
  write_n(&w, 1);
  CHECK(read_one(&r) == 34);

  /* A landing by the pace on a damaged frame in the middle. */
  a0_transport_t r2;
  a0_transport_init(&r2, base, SIZE);
  r2.pace = 3; /* as a reader that saw three evictions a read: lands on seq_low + 6 */
  uint64_t low = committed(base)->seq_low;
  frame_hdr_of(base, low + 6)->seq = 99;
  CHECK_ERR(a0_transport_read_begin(&r2, &rd), A0_ERR_CORRUPT);
  CHECK_ERR(a0_transport_read_skip(&r2, &first, &last), A0_OK);
  CHECK(first == low + 6 && last == low + 6 && r2.missed == 0);
  CHECK(read_one(&r2) == low + 7);
  free(base);
}

/* ---- a reader slower than a free-running writer ------------------------- */

enum { SLOW_READS = 400 };

struct flat_out {
  a0_transport_t w;
  atomic_bool stop;
  uint64_t written;
};

static void* flat_out_writer(void* arg) {
  struct flat_out* f = arg;
  while (!atomic_load(&f->stop)) {
    if (write_commit(&f->w, 64 + f->written % 200) != A0_OK) break;
    f->written++;
  }
  return NULL;
}

/* The reader copies each frame several times over (so it is slower than the
 * writer); every frame it keeps must be whole, in order, and what it did
 * not keep counted: kept + missed == the seq of the last frame kept. */
static void test_a_slow_reader_keeps_order_and_count(void) {
  const uint64_t size = A0_HEADER_SIZE + 64 * 1024;
  uint8_t* base = new_arena(size);
  struct flat_out f = {.stop = false, .written = 0};
  a0_transport_init(&f.w, base, size);
  a0_transport_t r;
  a0_transport_init(&r, base, size);
  write_n(&f.w, 1);
  CHECK(read_one(&r) == 1); /* placed: from here on every frame not read is counted */
  pthread_t th;
  CHECK(pthread_create(&th, NULL, flat_out_writer, &f) == 0);
  static uint8_t buf[4096];
  uint64_t kept = 1, last = 1, rejected = 0, landings = 0;
  bool in_order = true, whole = true;
  for (long tries = 0; kept < SLOW_READS && tries < 1000L * SLOW_READS; tries++) {
    a0_read_t rd;
    a0_err_t err = a0_transport_read_begin(&r, &rd);
    if (err == A0_ERR_NO_FRAME) continue;
    if (err != A0_OK) {
      CHECK_ERR(err, A0_OK);
      break;
    }
    for (int copy = 0; copy < 64; copy++) memcpy(buf, rd.data, rd.size);
    bool landed = rd.gap > 0;
    err = a0_transport_read_end(&r, &rd, &rd);
    if (err == A0_ERR_EVICTED) {
      rejected++;
      continue;
    }
    CHECK_ERR(err, A0_OK);
    in_order = in_order && rd.seq > last;
    whole = whole && filled_with(buf, rd.size, fill_byte(rd.seq));
    landings += landed;
    last = rd.seq;
    kept++;
  }
  atomic_store(&f.stop, true);
  pthread_join(th, NULL);
  CHECK(in_order && whole);
  CHECK(kept + r.missed == last);
  printf("slow reader: %llu kept, %llu rejected, %llu landings, %llu missed, %llu written\n",
         (unsigned long long)kept, (unsigned long long)rejected, (unsigned long long)landings,
         (unsigned long long)r.missed, (unsigned long long)f.written);
  free(base);
}

int main(void) {
  test_a_reader_that_saw_no_eviction_lands_on_the_oldest();
  test_a_lapped_reader_lands_where_it_can_finish();
  test_pace_counts_the_evictions_of_a_whole_batch();
  test_a_landing_past_damaged_headers();
  test_a_slow_reader_keeps_order_and_count();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
