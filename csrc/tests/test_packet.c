/* test_packet.c — the packet codec on its own: round trip, layout, lookup,
 * and that every corruption (truncation at every length, every single-byte
 * flip, random garbage, hostile offsets) is refused or read in bounds.
 *
 * Plain C, no framework: CHECK() counts, the last line is "N passed, M
 * failed", the exit status is non-zero on any failure. Under `make sanitize`
 * ASan turns any out-of-bounds read of a corrupt packet into a failure: the
 * buffers are malloc'ed to their exact size for that reason. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "a0_packet.h"

#include "check.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Du;
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Du;
}

static a0_packet_header_t hdr(const char* k, const char* v) {
  a0_packet_header_t h = {k, (uint32_t)strlen(k), v, (uint32_t)strlen(v)};
  return h;
}

/* Encodes a packet (with standard block `std`, may be NULL) into an exactly
 * sized malloc'ed buffer. */
static uint8_t* encode_std(const a0_packet_std_t* std, const a0_packet_header_t* hs, uint32_t n,
                           const void* payload, uint64_t payload_size, uint64_t* size_out) {
  uint64_t meta, total;
  if (a0_packet_encoded_size(hs, n, payload_size, &meta, &total) != A0_OK) abort();
  uint8_t* buf = malloc(total ? total : 1);
  if (!buf) abort();
  uint8_t id[A0_PACKET_ID_SIZE];
  for (int i = 0; i < 16; i++) id[i] = (uint8_t)(i * 17);
  a0_packet_encode_meta(buf, meta, id, std, hs, n, payload_size);
  memcpy(buf + meta, payload, payload_size);
  *size_out = total;
  return buf;
}

static uint8_t* encode(const a0_packet_header_t* hs, uint32_t n, const void* payload,
                       uint64_t payload_size, uint64_t* size_out) {
  return encode_std(NULL, hs, n, payload, payload_size, size_out);
}

static void test_round_trip_and_layout(void) {
  a0_packet_header_t hs[3] = {hdr("a", "1"), hdr("key", "value"), hdr("a", "2")};
  uint64_t size;
  uint8_t* buf = encode(hs, 3, "payload!", 8, &size);
  a0_packet_view_t v;
  a0_check_info_t info = {0};
  CHECK_ERR(a0_packet_view(buf, size, &v, &info), A0_OK);
  CHECK(memcmp(buf, "A0PK", 4) == 0);
  CHECK(v.header_count == 3);
  CHECK(v.meta_size % A0_PACKET_ALIGN == 0);
  CHECK(v.payload == buf + v.meta_size && v.payload_size == 8);
  CHECK(memcmp(v.payload, "payload!", 8) == 0);
  CHECK(size == v.meta_size + 8);
  CHECK(v.id[1] == 17 && v.id[15] == 255);
  /* 96 + 3*16 index + "a\0" "1\0" "key\0" "value\0" "a\0" "2\0" = 162 -> 176 */
  CHECK(v.meta_size == 176);
  CHECK(!v.has_std && v.std.writer_seq == 0 && v.std.time_mono == 0);

  a0_packet_header_t got;
  CHECK_ERR(a0_packet_header(&v, 1, &got, NULL), A0_OK);
  CHECK(got.key_len == 3 && memcmp(got.key, "key", 3) == 0 && got.key[3] == 0);
  CHECK(got.val_len == 5 && memcmp(got.val, "value", 5) == 0 && got.val[5] == 0);
  CHECK_ERR(a0_packet_header(&v, 3, &got, NULL), A0_ERR_NO_FRAME);

  uint32_t idx;
  CHECK_ERR(a0_packet_find(&v, "a", 1, 0, &idx), A0_OK);
  CHECK(idx == 0);
  CHECK_ERR(a0_packet_find(&v, "a", 1, idx + 1, &idx), A0_OK);
  CHECK(idx == 2);
  CHECK_ERR(a0_packet_find(&v, "a", 1, idx + 1, &idx), A0_ERR_NO_FRAME);
  CHECK_ERR(a0_packet_find(&v, "ke", 2, 0, &idx), A0_ERR_NO_FRAME);

  /* The metadata alone decodes the headers, without the payload. */
  a0_packet_view_t m;
  CHECK_ERR(a0_packet_view_meta(buf, v.meta_size, &m, NULL), A0_OK);
  CHECK(m.payload == NULL && m.payload_size == 8 && m.header_count == 3);
  CHECK_ERR(a0_packet_header(&m, 2, &got, NULL), A0_OK);
  CHECK(got.val_len == 1 && got.val[0] == '2');
  CHECK_ERR(a0_packet_view_meta(buf, v.meta_size - 1, &m, &info), A0_ERR_CORRUPT);
  CHECK(info.field && strcmp(info.field, "payload_off") == 0);
  free(buf);

  /* Empty packet: no headers, no payload. */
  buf = encode(NULL, 0, "", 0, &size);
  CHECK(size == A0_PACKET_INDEX_OFF);
  CHECK_ERR(a0_packet_view(buf, size, &v, NULL), A0_OK);
  CHECK(v.header_count == 0 && v.payload_size == 0);
  free(buf);

  /* Embedded NULs in values are kept: the lengths are authoritative. */
  a0_packet_header_t nul = {"k", 1, "x\0y", 3};
  buf = encode(&nul, 1, "", 0, &size);
  CHECK_ERR(a0_packet_view(buf, size, &v, NULL), A0_OK);
  CHECK_ERR(a0_packet_header(&v, 0, &got, NULL), A0_OK);
  CHECK(got.val_len == 3 && memcmp(got.val, "x\0y", 3) == 0);
  free(buf);
}

static void test_standard_block(void) {
  a0_packet_std_t std = {.time_mono = 123456789, .time_wall = UINT64_C(1795450976850312308),
                         .writer_seq = 7, .transport_seq = 42};
  for (int i = 0; i < 16; i++) std.writer_id[i] = (uint8_t)(0xA0 + i);
  a0_packet_header_t h = hdr("user", "x");
  uint64_t size;
  uint8_t* buf = encode_std(&std, &h, 1, "pl", 2, &size);
  a0_packet_view_t v;
  CHECK_ERR(a0_packet_view(buf, size, &v, NULL), A0_OK);
  CHECK(((a0_packet_hdr_t*)buf)->flags == A0_PACKET_HAS_STD);
  CHECK(v.has_std && v.header_count == 1);
  CHECK(v.std.time_mono == 123456789 && v.std.transport_seq == 42 && v.std.writer_seq == 7);
  CHECK(v.std.time_wall == UINT64_C(1795450976850312308) && v.std.writer_id[15] == 0xAF);
  uint64_t at48;
  memcpy(&at48, buf + 48, 8);
  CHECK(at48 == 123456789); /* the documented offset */
  a0_packet_header_t got;
  CHECK_ERR(a0_packet_header(&v, 0, &got, NULL), A0_OK);
  CHECK(got.key_len == 4 && memcmp(got.key, "user", 4) == 0);
  /* Unaligned buffers decode too: the block is copied out. */
  uint8_t* odd = malloc(size + 1);
  memcpy(odd + 1, buf, size);
  CHECK_ERR(a0_packet_view(odd + 1, size, &v, NULL), A0_OK);
  CHECK(v.std.transport_seq == 42);
  free(odd);
  free(buf);
}

static void test_sizes_refused(void) {
  uint64_t meta, total;
  a0_packet_header_t big = {"k", 1, "v", UINT32_MAX};
  CHECK_ERR(a0_packet_encoded_size(&big, 1, 0, &meta, &total), A0_ERR_FRAME_TOO_LARGE);
  a0_packet_header_t small = hdr("k", "v");
  CHECK_ERR(a0_packet_encoded_size(&small, 1, UINT64_MAX - 10, &meta, &total),
            A0_ERR_FRAME_TOO_LARGE);
  /* A huge count is refused before the (absent) array is read. */
  CHECK_ERR(a0_packet_encoded_size(NULL, UINT32_MAX, 0, &meta, &total), A0_ERR_FRAME_TOO_LARGE);
}

static void test_fields_checked(void) {
  a0_packet_header_t hs[2] = {hdr("alpha", "beta"), hdr("gamma", "delta")};
  uint64_t size;
  uint8_t* buf = encode(hs, 2, "xyz", 3, &size);
  a0_packet_view_t v;
  a0_check_info_t info;
  a0_packet_hdr_t* h = (a0_packet_hdr_t*)buf;

#define EXPECT_FIELD(name)                                          \
  do {                                                              \
    info.field = NULL;                                              \
    CHECK_ERR(a0_packet_view(buf, size, &v, &info), A0_ERR_CORRUPT); \
    CHECK(info.field && strcmp(info.field, name) == 0);             \
  } while (0)

  h->magic ^= 1;
  EXPECT_FIELD("magic");
  h->magic ^= 1;
  h->version = 2;
  EXPECT_FIELD("version");
  h->version = A0_PACKET_VERSION;
  h->flags = 2;
  EXPECT_FIELD("flags");
  h->flags = 0;
  h->_reserved = 7;
  EXPECT_FIELD("reserved");
  h->_reserved = 0;
  h->header_count = 1000; /* the index would run past payload_off */
  EXPECT_FIELD("payload_off");
  h->header_count = UINT32_MAX;
  EXPECT_FIELD("payload_off");
  h->header_count = 2;
  h->payload_off += 16;
  EXPECT_FIELD("payload_off");
  h->payload_off -= 16;
  h->payload_off += 1;
  EXPECT_FIELD("payload_off");
  h->payload_off -= 1;
  h->payload_size += 1;
  EXPECT_FIELD("payload_size");
  h->payload_size = UINT64_MAX;
  EXPECT_FIELD("payload_size");
  h->payload_size = 3;
  CHECK_ERR(a0_packet_view(buf, size, &v, NULL), A0_OK);
  CHECK_ERR(a0_packet_view(buf, A0_PACKET_INDEX_OFF - 1, &v, &info), A0_ERR_CORRUPT);
  CHECK(info.field && strcmp(info.field, "size") == 0);

  /* Entries are checked when read: offsets into the index, past the
   * metadata, lengths that overflow, a missing NUL. */
  a0_packet_entry_t* e = (a0_packet_entry_t*)(buf + A0_PACKET_INDEX_OFF);
  a0_packet_header_t got;
  a0_packet_entry_t saved = e[1];
  uint32_t bad_offs[] = {0, 40, A0_PACKET_HDR_SIZE, (uint32_t)v.meta_size, UINT32_MAX};
  for (size_t i = 0; i < sizeof bad_offs / sizeof *bad_offs; i++) {
    e[1].key_off = bad_offs[i];
    CHECK_ERR(a0_packet_view(buf, size, &v, NULL), A0_OK);
    CHECK_ERR(a0_packet_header(&v, 1, &got, &info), A0_ERR_CORRUPT);
    CHECK(info.field && strcmp(info.field, "header key") == 0);
    CHECK_ERR(a0_packet_header(&v, 0, &got, NULL), A0_OK); /* the others still read */
    e[1] = saved;
  }
  e[1].val_len = UINT32_MAX;
  CHECK_ERR(a0_packet_header(&v, 1, &got, &info), A0_ERR_CORRUPT);
  CHECK(info.field && strcmp(info.field, "header value") == 0);
  e[1] = saved;
  e[1].key_len -= 1; /* no NUL right after the key */
  CHECK_ERR(a0_packet_header(&v, 1, &got, NULL), A0_ERR_CORRUPT);
  uint32_t idx;
  CHECK_ERR(a0_packet_find(&v, "zzz", 3, 0, &idx), A0_ERR_CORRUPT);
  e[1] = saved;
  CHECK_ERR(a0_packet_find(&v, "gamma", 5, 0, &idx), A0_OK);
  CHECK(idx == 1);
  free(buf);
#undef EXPECT_FIELD
}

/* Reads everything a view exposes; under ASan any stray byte is fatal. */
static void read_all(const uint8_t* buf, uint64_t size, int whole) {
  a0_packet_view_t v;
  a0_err_t err = whole ? a0_packet_view(buf, size, &v, NULL) : a0_packet_view_meta(buf, size, &v, NULL);
  if (err) return;
  volatile uint8_t sink = 0;
  for (uint32_t i = 0; i < v.header_count && i < 64; i++) {
    a0_packet_header_t h;
    if (a0_packet_header(&v, i, &h, NULL) != A0_OK) continue;
    for (uint32_t k = 0; k < h.key_len; k++) sink ^= (uint8_t)h.key[k];
    for (uint32_t k = 0; k < h.val_len; k++) sink ^= (uint8_t)h.val[k];
  }
  if (v.payload)
    for (uint64_t k = 0; k < v.payload_size; k++) sink ^= v.payload[k];
  (void)sink;
}

static void test_every_truncation_and_flip(void) {
  a0_packet_header_t hs[4] = {hdr("a0_time_mono", "123456789"), hdr("x", ""), hdr("", "empty key"),
                              hdr("long-ish header key", "and its value")};
  uint64_t size;
  uint8_t* good = encode(hs, 4, "some payload bytes", 18, &size);
  int refused = 0;
  for (uint64_t n = 0; n < size; n++) {
    uint8_t* cut = malloc(n ? n : 1);
    memcpy(cut, good, n);
    a0_packet_view_t v;
    if (a0_packet_view(cut, n, &v, NULL) == A0_ERR_CORRUPT) refused++;
    read_all(cut, n, 0);
    free(cut);
  }
  CHECK(refused == (int)size); /* no proper prefix is a whole packet */

  uint8_t* copy = malloc(size);
  for (uint64_t pos = 0; pos < size; pos++) {
    for (int bit = 0; bit < 8; bit++) {
      memcpy(copy, good, size);
      copy[pos] ^= (uint8_t)(1u << bit);
      read_all(copy, size, 1);
      read_all(copy, size, 0);
    }
  }
  free(copy);

  /* Random garbage and random hostile headers over a valid magic. */
  for (int round = 0; round < 20000; round++) {
    uint64_t n = rnd() % 256;
    uint8_t* junk = malloc(n ? n : 1);
    for (uint64_t k = 0; k < n; k++) junk[k] = (uint8_t)rnd();
    if (n >= A0_PACKET_INDEX_OFF && (round & 1)) {
      a0_packet_hdr_t* h = (a0_packet_hdr_t*)junk;
      h->magic = A0_PACKET_MAGIC;
      h->version = A0_PACKET_VERSION;
      h->flags = (uint16_t)(round & 2 ? A0_PACKET_HAS_STD : 0);
      h->_reserved = 0;
      h->header_count = (uint32_t)(rnd() % 8);
      h->payload_off = (rnd() % (n + 1)) & ~(uint64_t)15;
      h->payload_size = n - h->payload_off;
    }
    read_all(junk, n, 1);
    read_all(junk, n, 0);
    free(junk);
  }
  free(good);
  CHECK(1);
}

/* Splices `src` (size n) with `extra` into an exactly sized buffer (with a
 * canary after it, checked, so a write past `total` fails without ASan too).
 * Returns the size-step error; on A0_OK with a packet, *out holds it. */
static a0_err_t splice_checked(const uint8_t* src, uint64_t n, const a0_packet_header_t* extra,
                               uint32_t n_extra, const char* refuse, uint8_t** out,
                               uint64_t* out_size, bool* refused) {
  a0_packet_view_t v;
  *out = NULL;
  *refused = false;
  if (a0_packet_view(src, n, &v, NULL) != A0_OK) return A0_ERR_CORRUPT;
  uint64_t meta = 0, total = 0;
  a0_err_t err = a0_packet_splice_size(&v, extra, n_extra, refuse, refuse ? (uint32_t)strlen(refuse) : 0,
                                       refused, &meta, &total, NULL);
  if (err || *refused) return err;
  uint8_t* buf = malloc(total + 16);
  memset(buf + total, 0xA5, 16);
  CHECK_ERR(a0_packet_splice(buf, meta, total, &v, extra, n_extra), A0_OK);
  int canary = 0;
  for (int k = 0; k < 16; k++) canary += buf[total + k] == 0xA5;
  CHECK(canary == 16);
  *out = buf;
  *out_size = total;
  return A0_OK;
}

static void test_splice(void) {
  a0_packet_std_t std = {.time_mono = 11, .time_wall = 22, .writer_seq = 33, .transport_seq = 44};
  for (int i = 0; i < 16; i++) std.writer_id[i] = (uint8_t)(200 + i);
  a0_packet_header_t hs[5] = {hdr("a", "1"), hdr("key", "value"), hdr("a", "2"),
                              hdr("x.origin", "o"), hdr("x.seq", "77")};
  uint64_t size, want_size;
  /* The splice gives exactly what encoding all the headers at once gives. */
  for (int with_std = 0; with_std < 2; with_std++) {
    for (uint32_t own = 0; own <= 3; own++) {
      uint8_t* src = encode_std(with_std ? &std : NULL, hs, own, "payload!", 8, &size);
      a0_packet_header_t all[5];
      memcpy(all, hs, own * sizeof hs[0]);
      memcpy(all + own, hs + 3, 2 * sizeof hs[0]);
      uint8_t* want = encode_std(with_std ? &std : NULL, all, own + 2, "payload!", 8, &want_size);
      uint8_t* got;
      uint64_t got_size;
      bool refused;
      CHECK_ERR(splice_checked(src, size, hs + 3, 2, "x.origin", &got, &got_size, &refused), A0_OK);
      CHECK(!refused && got && got_size == want_size && memcmp(got, want, want_size) == 0);
      a0_packet_view_t v;
      CHECK_ERR(a0_packet_view(got, got_size, &v, NULL), A0_OK);
      free(got);
      free(src);
      free(want);
    }
  }
  /* A packet that has the refused key: refused, no sizes. */
  uint8_t* marked = encode(hs + 2, 2, "p", 1, &size);
  uint8_t* got;
  uint64_t got_size;
  bool refused;
  CHECK_ERR(splice_checked(marked, size, hs, 1, "x.origin", &got, &got_size, &refused), A0_OK);
  CHECK(refused && got == NULL);
  CHECK_ERR(splice_checked(marked, size, hs, 1, NULL, &got, &got_size, &refused), A0_OK);
  CHECK(!refused && got != NULL);
  free(got);

  /* Sizes that are not the packet's are refused before anything is written. */
  a0_packet_view_t v;
  CHECK_ERR(a0_packet_view(marked, size, &v, NULL), A0_OK);
  uint64_t meta, total;
  CHECK_ERR(a0_packet_splice_size(&v, hs, 1, NULL, 0, &refused, &meta, &total, NULL), A0_OK);
  uint8_t* buf = malloc(total + 64);
  memset(buf, 0xA5, total + 64);
  CHECK_ERR(a0_packet_splice(buf, meta, total + 1, &v, hs, 1), A0_ERR_CORRUPT);
  CHECK_ERR(a0_packet_splice(buf, meta - 16, total - 16, &v, hs, 1), A0_ERR_CORRUPT);
  CHECK_ERR(a0_packet_splice(buf, meta + 16, total + 16, &v, hs, 1), A0_ERR_CORRUPT);
  CHECK_ERR(a0_packet_splice(buf, meta + 1, total + 1, &v, hs, 1), A0_ERR_CORRUPT);
  CHECK_ERR(a0_packet_splice(buf, meta, total, &v, hs, 2), A0_ERR_CORRUPT); /* more headers */
  int untouched = 0;
  for (uint64_t k = meta; k < total + 64; k++) untouched += buf[k] == 0xA5;
  CHECK(untouched == (int)(total + 64 - meta));
  free(buf);

  /* The source changed between the two steps (a header grew, as a writer of
   * shared memory could make it): refused, nothing written past total. */
  CHECK_ERR(a0_packet_splice_size(&v, hs, 1, NULL, 0, &refused, &meta, &total, NULL), A0_OK);
  buf = malloc(total + 16);
  memset(buf + total, 0xA5, 16);
  a0_packet_entry_t e;
  memcpy(&e, marked + A0_PACKET_INDEX_OFF, sizeof e);
  e.val_len = 0; /* the value is now "" and a NUL is needed at val_off */
  e.key_off = (uint32_t)(A0_PACKET_INDEX_OFF + 2 * A0_PACKET_ENTRY_SIZE);
  e.key_len = (uint32_t)(v.meta_size - e.key_off - 1); /* the whole strings area */
  uint8_t* grown = malloc(size);
  memcpy(grown, marked, size);
  memcpy(grown + A0_PACKET_INDEX_OFF, &e, sizeof e);
  grown[v.meta_size - 1] = 0;
  a0_packet_view_t gv = v;
  gv.base = grown;
  gv.id = grown + 8;
  gv.payload = grown + v.meta_size;
  a0_err_t err = a0_packet_splice(buf, meta, total, &gv, hs, 1);
  CHECK(err == A0_ERR_CORRUPT || err == A0_OK);
  int canary = 0;
  for (int k = 0; k < 16; k++) canary += buf[total + k] == 0xA5;
  CHECK(canary == 16);
  free(grown);
  free(buf);
  free(marked);

  /* Every truncation and bit flip of a source, and random hostile ones: the
   * size step refuses it or the fill writes a packet that reads back, never
   * past its end (the canary; ASan under `make sanitize`). */
  uint8_t* good = encode_std(&std, hs, 3, "some payload bytes", 18, &size);
  int spliced = 0;
  uint8_t* copy = malloc(size);
  for (uint64_t pos = 0; pos < size; pos++) {
    for (int bit = 0; bit < 8; bit++) {
      memcpy(copy, good, size);
      copy[pos] ^= (uint8_t)(1u << bit);
      for (uint64_t n = size; n + 48 >= size && n > 0; n -= 16) {
        if (splice_checked(copy, n, hs + 3, 2, "x.origin", &got, &got_size, &refused) == A0_OK &&
            got) {
          CHECK_ERR(a0_packet_view(got, got_size, &v, NULL), A0_OK);
          spliced++;
          free(got);
        }
      }
    }
  }
  free(copy);
  free(good);
  CHECK(spliced > 0);
  for (int round = 0; round < 20000; round++) {
    uint64_t n = A0_PACKET_INDEX_OFF + rnd() % 200;
    uint8_t* junk = malloc(n);
    for (uint64_t k = 0; k < n; k++) junk[k] = (uint8_t)rnd();
    a0_packet_hdr_t h0 = {.magic = A0_PACKET_MAGIC, .version = A0_PACKET_VERSION,
                          .header_count = (uint32_t)(rnd() % 6)};
    h0.payload_off = (rnd() % (n + 1)) & ~(uint64_t)15;
    if (h0.payload_off < A0_PACKET_INDEX_OFF) h0.payload_off = A0_PACKET_INDEX_OFF;
    h0.payload_size = n - h0.payload_off;
    memcpy(junk, &h0, sizeof h0);
    if (splice_checked(junk, n, hs + 3, 2, NULL, &got, &got_size, &refused) == A0_OK && got) {
      CHECK_ERR(a0_packet_view(got, got_size, &v, NULL), A0_OK);
      free(got);
    }
    free(junk);
  }
}

static void test_helpers(void) {
  char out[A0_U64_DEC_MAX + 1];
  uint32_t n = a0_u64_to_dec(0, out);
  out[n] = 0;
  CHECK(strcmp(out, "0") == 0);
  n = a0_u64_to_dec(UINT64_MAX, out);
  out[n] = 0;
  CHECK(n == 20 && strcmp(out, "18446744073709551615") == 0);
  n = a0_u64_to_dec(1000000007u, out);
  out[n] = 0;
  CHECK(strcmp(out, "1000000007") == 0);
  /* Every length boundary and random values agree with printf. */
  int mismatches = 0;
  char want[32];
  uint64_t p10 = 1;
  for (int k = 0; k < 20; k++, p10 *= 10) {
    uint64_t vs[3] = {p10 - 1, p10, p10 + 1};
    for (int j = 0; j < 3; j++) {
      n = a0_u64_to_dec(vs[j], out);
      out[n] = 0;
      snprintf(want, sizeof want, "%llu", (unsigned long long)vs[j]);
      mismatches += strcmp(out, want) != 0;
    }
  }
  for (int k = 0; k < 100000; k++) {
    uint64_t v = rnd() >> (rnd() % 64);
    n = a0_u64_to_dec(v, out);
    out[n] = 0;
    snprintf(want, sizeof want, "%llu", (unsigned long long)v);
    mismatches += strcmp(out, want) != 0;
  }
  CHECK(mismatches == 0);

  a0_packet_idgen_t g;
  a0_packet_idgen_seed(&g, 42);
  uint8_t a[16], b[16];
  a0_packet_id_next(&g, a);
  a0_packet_id_next(&g, b);
  CHECK(memcmp(a, b, 16) != 0);
  CHECK((a[6] >> 4) == 4 && (a[8] & 0xC0) == 0x80);
  char s[A0_UUID_STR_LEN + 1];
  a0_uuid_format(a, s);
  s[A0_UUID_STR_LEN] = 0;
  CHECK(s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' && s[14] == '4');
  uint8_t fixed[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                       0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
  a0_uuid_format(fixed, s);
  CHECK(strcmp(s, "12345678-9abc-def0-0123-456789abcdef") == 0);
}

int main(void) {
  test_splice();
  test_round_trip_and_layout();
  test_standard_block();
  test_sizes_refused();
  test_fields_checked();
  test_every_truncation_and_flip();
  test_helpers();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
