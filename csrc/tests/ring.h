/* The C tests' ring helpers: a heap arena, frames written and read back
 * with contents that tell their seq, and the raw state and frame headers. */
#ifndef A0_TESTS_RING_H
#define A0_TESTS_RING_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "a0_arena.h"
#include "a0_transport.h"

#define HDRP(base) ((a0_arena_hdr_t*)(base))

static inline uint8_t* new_arena(uint64_t size) {
  uint8_t* base = aligned_alloc(64, (size + 63) & ~(uint64_t)63);
  if (!base) abort();
  memset(base, 0, size);
  if (a0_arena_init(base, size) != A0_OK) abort();
  return base;
}

static inline a0_state_t* committed(uint8_t* base) {
  return &HDRP(base)->pages[HDRP(base)->state_version & 1];
}

/* What every byte of frame `seq` holds. */
static inline uint8_t fill_byte(uint64_t seq) { return (uint8_t)(seq * 31u + 7u); }

static inline bool filled_with(const uint8_t* p, uint64_t n, uint8_t byte) {
  for (uint64_t i = 0; i < n; i++)
    if (p[i] != byte) return false;
  return true;
}

/* Allocates a frame of n bytes under lk, filled with its fill_byte. */
static inline a0_err_t write_frame(a0_locked_t lk, uint64_t n) {
  uint8_t* data;
  a0_err_t err = a0_transport_alloc(lk, n, &data);
  if (err) return err;
  memset(data, fill_byte(a0_transport_seq_high(lk)), n);
  return A0_OK;
}

/* One frame of n bytes, locked, written and committed. */
static inline a0_err_t write_commit(a0_transport_t* t, uint64_t n) {
  a0_locked_t lk;
  a0_err_t err = a0_transport_lock(t, &lk);
  if (err) return err;
  err = write_frame(lk, n);
  if (!err) err = a0_transport_commit(lk);
  a0_transport_unlock(lk);
  return err;
}

/* Copies a frame read without the lock and validates it. */
static inline a0_err_t read_copy(a0_transport_t* t, uint8_t* out, uint64_t cap, uint64_t* seq,
                                 uint64_t* n) {
  a0_read_t r;
  a0_err_t err = a0_transport_read_begin(t, &r);
  if (err) return err;
  if (r.size > cap) return A0_ERR_FRAME_TOO_LARGE;
  memcpy(out, r.data, r.size);
  err = a0_transport_read_end(t, &r, &r);
  if (!err) {
    *seq = r.seq;
    *n = r.size;
  }
  return err;
}

/* The header of live frame `seq`, walked to from the committed head. */
static inline a0_frame_hdr_t* frame_hdr_of(uint8_t* base, uint64_t seq) {
  const a0_state_t* s = committed(base);
  uint64_t off = s->off_head;
  for (uint64_t q = s->seq_low; q < seq; q++) off = ((a0_frame_hdr_t*)(base + off))->off_next;
  return (a0_frame_hdr_t*)(base + off);
}

#endif
