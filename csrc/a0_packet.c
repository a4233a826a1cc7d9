/* a0_packet.c — the flat packet codec (layout and invariants: a0_packet.h).
 *
 * The decoder trusts nothing it reads: every size is compared against the
 * bytes actually available before it is used, in 64-bit arithmetic that
 * cannot overflow (entry fields are 32-bit), and each header's entry is
 * checked when that header is read. */
#include "a0_packet.h"

#include <stddef.h>
#include <string.h>

_Static_assert(sizeof(a0_packet_hdr_t) == A0_PACKET_HDR_SIZE, "packet header is 48 bytes");
_Static_assert(offsetof(a0_packet_hdr_t, id) == 8, "id at 8");
_Static_assert(offsetof(a0_packet_hdr_t, header_count) == 24, "header_count at 24");
_Static_assert(offsetof(a0_packet_hdr_t, payload_off) == 32, "payload_off at 32");
_Static_assert(offsetof(a0_packet_hdr_t, payload_size) == 40, "payload_size at 40");
_Static_assert(sizeof(a0_packet_std_t) == A0_PACKET_STD_SIZE, "standard block is 48 bytes");
_Static_assert(offsetof(a0_packet_std_t, writer_id) == 16, "writer_id at 48 + 16");
_Static_assert(offsetof(a0_packet_std_t, transport_seq) == 40, "transport_seq at 48 + 40");
_Static_assert(A0_PACKET_INDEX_OFF == A0_PACKET_HDR_SIZE + A0_PACKET_STD_SIZE, "index after the block");
_Static_assert(sizeof(a0_packet_entry_t) == A0_PACKET_ENTRY_SIZE, "index entry is 16 bytes");
_Static_assert(A0_PACKET_INDEX_OFF % A0_PACKET_ALIGN == 0, "index starts aligned");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the packet format is little-endian");

static a0_err_t corrupt(a0_check_info_t* info, const char* field, uint64_t expected,
                        uint64_t found) {
  if (info) {
    info->field = field;
    info->expected = expected;
    info->found = found;
  }
  return A0_ERR_CORRUPT;
}

static inline uint64_t align_packet(uint64_t n) {
  return (n + (A0_PACKET_ALIGN - 1)) & ~(uint64_t)(A0_PACKET_ALIGN - 1);
}

a0_err_t a0_packet_encoded_size(const a0_packet_header_t* headers, uint32_t count,
                                uint64_t payload_size, uint64_t* meta_size, uint64_t* total) {
  /* Every string offset must fit the index's 32-bit fields: the metadata is
   * capped at 4 GiB, so these sums (at most 2^32 entries of 2^33 bytes)
   * cannot overflow 64 bits before the check. */
  uint64_t meta = A0_PACKET_INDEX_OFF + (uint64_t)A0_PACKET_ENTRY_SIZE * count;
  for (uint32_t i = 0; i < count && meta <= UINT32_MAX; i++)
    meta += (uint64_t)headers[i].key_len + 1u + (uint64_t)headers[i].val_len + 1u;
  meta = align_packet(meta);
  if (meta > UINT32_MAX) return A0_ERR_FRAME_TOO_LARGE;
  if (payload_size > UINT64_MAX - meta) return A0_ERR_FRAME_TOO_LARGE;
  *meta_size = meta;
  *total = meta + payload_size;
  return A0_OK;
}

void a0_packet_encode_meta(uint8_t* buf, uint64_t meta_size, const uint8_t id[A0_PACKET_ID_SIZE],
                           const a0_packet_std_t* std, const a0_packet_header_t* headers,
                           uint32_t count, uint64_t payload_size) {
  a0_packet_hdr_t hdr = {
      .magic = A0_PACKET_MAGIC,
      .version = A0_PACKET_VERSION,
      .flags = std ? A0_PACKET_HAS_STD : 0,
      .header_count = count,
      ._reserved = 0,
      .payload_off = meta_size,
      .payload_size = payload_size,
  };
  memcpy(hdr.id, id, A0_PACKET_ID_SIZE);
  memcpy(buf, &hdr, sizeof hdr);
  if (std)
    memcpy(buf + A0_PACKET_HDR_SIZE, std, A0_PACKET_STD_SIZE);
  else
    memset(buf + A0_PACKET_HDR_SIZE, 0, A0_PACKET_STD_SIZE);
  uint32_t pos = A0_PACKET_INDEX_OFF + A0_PACKET_ENTRY_SIZE * count;
  for (uint32_t i = 0; i < count; i++) {
    const a0_packet_header_t* h = &headers[i];
    a0_packet_entry_t e = {.key_off = pos, .key_len = h->key_len};
    memcpy(buf + pos, h->key, h->key_len);
    pos += h->key_len;
    buf[pos++] = 0;
    e.val_off = pos;
    e.val_len = h->val_len;
    memcpy(buf + pos, h->val, h->val_len);
    pos += h->val_len;
    buf[pos++] = 0;
    memcpy(buf + A0_PACKET_INDEX_OFF + (uint64_t)A0_PACKET_ENTRY_SIZE * i, &e, sizeof e);
  }
  memset(buf + pos, 0, meta_size - pos);
}

/* The checks shared by both views; `whole`: the payload must be present too. */
static a0_err_t check(const uint8_t* buf, uint64_t size, bool whole, a0_packet_view_t* out,
                      a0_check_info_t* info) {
  if (size < A0_PACKET_INDEX_OFF) return corrupt(info, "size", A0_PACKET_INDEX_OFF, size);
  a0_packet_hdr_t hdr;
  memcpy(&hdr, buf, sizeof hdr);
  if (hdr.magic != A0_PACKET_MAGIC) return corrupt(info, "magic", A0_PACKET_MAGIC, hdr.magic);
  if (hdr.version != A0_PACKET_VERSION)
    return corrupt(info, "version", A0_PACKET_VERSION, hdr.version);
  if (hdr.flags & ~A0_PACKET_HAS_STD)
    return corrupt(info, "flags", hdr.flags & A0_PACKET_HAS_STD, hdr.flags);
  if (hdr._reserved != 0) return corrupt(info, "reserved", 0, hdr._reserved);
  uint64_t index_end = A0_PACKET_INDEX_OFF + (uint64_t)A0_PACKET_ENTRY_SIZE * hdr.header_count;
  if (hdr.payload_off < index_end)
    return corrupt(info, "payload_off", index_end, hdr.payload_off);
  if (hdr.payload_off % A0_PACKET_ALIGN != 0)
    return corrupt(info, "payload_off", align_packet(hdr.payload_off), hdr.payload_off);
  if (hdr.payload_off > size) return corrupt(info, "payload_off", size, hdr.payload_off);
  if (whole && hdr.payload_size != size - hdr.payload_off)
    return corrupt(info, "payload_size", size - hdr.payload_off, hdr.payload_size);
  out->base = buf;
  out->size = size;
  out->id = buf + offsetof(a0_packet_hdr_t, id);
  /* Copied, not pointed at: the caller's buffer need not be aligned. */
  out->has_std = (hdr.flags & A0_PACKET_HAS_STD) != 0;
  memcpy(&out->std, buf + A0_PACKET_HDR_SIZE, sizeof out->std);
  out->header_count = hdr.header_count;
  out->meta_size = hdr.payload_off;
  out->payload = whole ? buf + hdr.payload_off : NULL;
  out->payload_size = hdr.payload_size;
  return A0_OK;
}

a0_err_t a0_packet_view(const uint8_t* buf, uint64_t size, a0_packet_view_t* out,
                        a0_check_info_t* info) {
  return check(buf, size, true, out, info);
}

a0_err_t a0_packet_view_meta(const uint8_t* buf, uint64_t size, a0_packet_view_t* out,
                             a0_check_info_t* info) {
  return check(buf, size, false, out, info);
}

/* A string of the strings area: [off, off + len) then a NUL, all before the
 * payload. meta_size <= size was checked by the view. */
static a0_err_t check_string(const a0_packet_view_t* v, uint64_t index_end, uint32_t off,
                             uint32_t len, const char* field, a0_check_info_t* info) {
  if (off < index_end) return corrupt(info, field, index_end, off);
  if ((uint64_t)off + len + 1u > v->meta_size)
    return corrupt(info, field, v->meta_size, (uint64_t)off + len + 1u);
  if (v->base[(uint64_t)off + len] != 0) return corrupt(info, field, 0, v->base[(uint64_t)off + len]);
  return A0_OK;
}

a0_err_t a0_packet_header(const a0_packet_view_t* v, uint32_t i, a0_packet_header_t* out,
                          a0_check_info_t* info) {
  if (i >= v->header_count) return A0_ERR_NO_FRAME;
  uint64_t index_end = A0_PACKET_INDEX_OFF + (uint64_t)A0_PACKET_ENTRY_SIZE * v->header_count;
  a0_packet_entry_t e;
  memcpy(&e, v->base + A0_PACKET_INDEX_OFF + (uint64_t)A0_PACKET_ENTRY_SIZE * i, sizeof e);
  a0_err_t err = check_string(v, index_end, e.key_off, e.key_len, "header key", info);
  if (!err) err = check_string(v, index_end, e.val_off, e.val_len, "header value", info);
  if (err) return err;
  out->key = (const char*)v->base + e.key_off;
  out->key_len = e.key_len;
  out->val = (const char*)v->base + e.val_off;
  out->val_len = e.val_len;
  return A0_OK;
}

a0_err_t a0_packet_find(const a0_packet_view_t* v, const char* key, uint32_t key_len,
                        uint32_t from, uint32_t* index) {
  a0_packet_header_t h;
  for (uint32_t i = from; i < v->header_count; i++) {
    a0_err_t err = a0_packet_header(v, i, &h, NULL);
    if (err) return err;
    if (h.key_len == key_len && memcmp(h.key, key, key_len) == 0) {
      *index = i;
      return A0_OK;
    }
  }
  return A0_ERR_NO_FRAME;
}

a0_err_t a0_packet_splice_size(const a0_packet_view_t* v, const a0_packet_header_t* extra,
                               uint32_t n_extra, const char* refuse_key, uint32_t refuse_len,
                               bool* refused, uint64_t* meta_size, uint64_t* total,
                               a0_check_info_t* info) {
  *refused = false;
  if (n_extra > UINT32_MAX - v->header_count) return A0_ERR_FRAME_TOO_LARGE;
  uint32_t count = v->header_count + n_extra;
  /* As a0_packet_encoded_size: the sum stops growing once past 4 GiB, so it
   * cannot overflow 64 bits. */
  uint64_t meta = A0_PACKET_INDEX_OFF + (uint64_t)A0_PACKET_ENTRY_SIZE * count;
  a0_packet_header_t h;
  for (uint32_t i = 0; i < v->header_count; i++) {
    a0_err_t err = a0_packet_header(v, i, &h, info);
    if (err) return A0_ERR_CORRUPT;
    if (refuse_key && h.key_len == refuse_len && memcmp(h.key, refuse_key, refuse_len) == 0) {
      *refused = true;
      return A0_OK;
    }
    if (meta <= UINT32_MAX) meta += (uint64_t)h.key_len + 1u + (uint64_t)h.val_len + 1u;
  }
  for (uint32_t i = 0; i < n_extra && meta <= UINT32_MAX; i++)
    meta += (uint64_t)extra[i].key_len + 1u + (uint64_t)extra[i].val_len + 1u;
  meta = align_packet(meta);
  if (meta > UINT32_MAX) return A0_ERR_FRAME_TOO_LARGE;
  if (v->payload_size > UINT64_MAX - meta) return A0_ERR_FRAME_TOO_LARGE;
  *meta_size = meta;
  *total = meta + v->payload_size;
  return A0_OK;
}

/* Appends one header's strings at *pos and its index entry i, if both fit
 * before meta_size; false (nothing written) otherwise. */
static bool put_header(uint8_t* buf, uint64_t meta_size, uint64_t* pos, uint32_t i,
                       const a0_packet_header_t* h) {
  uint64_t p = *pos;
  if ((uint64_t)h->key_len + 1u + (uint64_t)h->val_len + 1u > meta_size - p) return false;
  a0_packet_entry_t e = {.key_off = (uint32_t)p, .key_len = h->key_len};
  memcpy(buf + p, h->key, h->key_len);
  p += h->key_len;
  buf[p++] = 0;
  e.val_off = (uint32_t)p;
  e.val_len = h->val_len;
  memcpy(buf + p, h->val, h->val_len);
  p += h->val_len;
  buf[p++] = 0;
  memcpy(buf + A0_PACKET_INDEX_OFF + (uint64_t)A0_PACKET_ENTRY_SIZE * i, &e, sizeof e);
  *pos = p;
  return true;
}

a0_err_t a0_packet_splice(uint8_t* buf, uint64_t meta_size, uint64_t total,
                          const a0_packet_view_t* v, const a0_packet_header_t* extra,
                          uint32_t n_extra) {
  if (n_extra > UINT32_MAX - v->header_count) return A0_ERR_CORRUPT;
  uint32_t count = v->header_count + n_extra;
  uint64_t index_end = A0_PACKET_INDEX_OFF + (uint64_t)A0_PACKET_ENTRY_SIZE * count;
  /* The sizes must be a0_packet_splice_size's: the metadata holds the index,
   * fits the 32-bit offsets, is aligned, and the payload fills the rest. */
  if (meta_size < index_end || meta_size > UINT32_MAX || meta_size % A0_PACKET_ALIGN != 0 ||
      total < meta_size || total - meta_size != v->payload_size ||
      (v->payload == NULL && v->payload_size != 0))
    return A0_ERR_CORRUPT;
  a0_packet_hdr_t hdr = {
      .magic = A0_PACKET_MAGIC,
      .version = A0_PACKET_VERSION,
      .flags = v->has_std ? A0_PACKET_HAS_STD : 0,
      .header_count = count,
      ._reserved = 0,
      .payload_off = meta_size,
      .payload_size = v->payload_size,
  };
  memcpy(hdr.id, v->id, A0_PACKET_ID_SIZE);
  memcpy(buf, &hdr, sizeof hdr);
  if (v->has_std)
    memcpy(buf + A0_PACKET_HDR_SIZE, &v->std, A0_PACKET_STD_SIZE);
  else
    memset(buf + A0_PACKET_HDR_SIZE, 0, A0_PACKET_STD_SIZE);
  uint64_t pos = index_end;
  a0_packet_header_t h;
  for (uint32_t i = 0; i < v->header_count; i++) {
    if (a0_packet_header(v, i, &h, NULL) != A0_OK) return A0_ERR_CORRUPT;
    if (!put_header(buf, meta_size, &pos, i, &h)) return A0_ERR_CORRUPT;
  }
  for (uint32_t i = 0; i < n_extra; i++)
    if (!put_header(buf, meta_size, &pos, v->header_count + i, &extra[i])) return A0_ERR_CORRUPT;
  /* Past the strings, only padding: fewer than 16 bytes, else the sizes
   * were not this packet's. */
  if (meta_size - pos >= A0_PACKET_ALIGN) return A0_ERR_CORRUPT;
  memset(buf + pos, 0, meta_size - pos);
  if (v->payload_size) memcpy(buf + meta_size, v->payload, v->payload_size);
  return A0_OK;
}

/* Two digits per table lookup, eight per 64-bit division: the standard
 * headers format four 64-bit numbers per packet under the arena lock, and
 * one digit per division was the largest single cost of a publish (perf:
 * 12 % of it). Digits are written backwards into a scratch buffer. */
static const char two_digits[201] =
    "0001020304050607080910111213141516171819"
    "2021222324252627282930313233343536373839"
    "4041424344454647484950515253545556575859"
    "6061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static char* put_pairs(char* p, uint32_t v, int pairs) {
  for (int i = 0; i < pairs; i++) {
    uint32_t r = v % 100u;
    v /= 100u;
    p -= 2;
    memcpy(p, two_digits + 2 * r, 2);
  }
  return p;
}

uint32_t a0_u64_to_dec(uint64_t v, char out[A0_U64_DEC_MAX]) {
  char tmp[A0_U64_DEC_MAX];
  char* end = tmp + A0_U64_DEC_MAX;
  char* p = end;
  while (v >= 100000000u) {
    uint64_t q = v / 100000000u;
    p = put_pairs(p, (uint32_t)(v - q * 100000000u), 4); /* exactly eight digits */
    v = q;
  }
  uint32_t w = (uint32_t)v;
  while (w >= 100u) {
    p = put_pairs(p, w % 100u, 1);
    w /= 100u;
  }
  if (w >= 10u)
    p = put_pairs(p, w, 1);
  else
    *--p = (char)('0' + w);
  uint32_t n = (uint32_t)(end - p);
  memcpy(out, p, n);
  return n;
}

void a0_packet_idgen_seed(a0_packet_idgen_t* g, uint64_t seed) { g->state = seed; }

/* splitmix64: one multiply-xorshift pass per output; every 64-bit state
 * gives a distinct output, so two ids of one generator never collide within
 * 2^63 draws, and generators seeded from the OS differ with overwhelming
 * probability. */
static uint64_t next64(a0_packet_idgen_t* g) {
  uint64_t z = (g->state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

void a0_packet_id_next(a0_packet_idgen_t* g, uint8_t out[A0_PACKET_ID_SIZE]) {
  uint64_t a = next64(g), b = next64(g);
  memcpy(out, &a, 8);
  memcpy(out + 8, &b, 8);
  out[6] = (uint8_t)((out[6] & 0x0Fu) | 0x40u); /* version 4 (random) */
  out[8] = (uint8_t)((out[8] & 0x3Fu) | 0x80u); /* RFC 4122 variant */
}

void a0_uuid_format(const uint8_t id[A0_PACKET_ID_SIZE], char out[A0_UUID_STR_LEN]) {
  static const char hex[] = "0123456789abcdef";
  uint32_t pos = 0;
  for (uint32_t i = 0; i < A0_PACKET_ID_SIZE; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[pos++] = '-';
    out[pos++] = hex[id[i] >> 4];
    out[pos++] = hex[id[i] & 0x0Fu];
  }
}
