/* a0_packet.h — the flat packet codec: id, headers (a multimap str -> str),
 * payload, laid out with offsets so any part is read in place.
 *
 * Layout (little-endian, offsets from the start of the packet; docs/pubsub.md
 * "Packet format" has the table):
 *
 *   [0, 48)               fixed header (a0_packet_hdr_t)
 *   [48, 96)              standard block (a0_packet_std_t): the five standard
 *                         headers every writer adds, as fixed-width numbers;
 *                         meaningful iff flags has A0_PACKET_HAS_STD (else zero)
 *   [96, 96 + 16 n)       header index: n entries (a0_packet_entry_t), the
 *                         other headers in order
 *   [.., payload_off)     strings: each key and value, each followed by a NUL
 *                         (the lengths are authoritative; the NUL is a check
 *                         and a convenience for C readers); then zero padding
 *   [payload_off, size)   payload; payload_off is a multiple of 16, so the
 *                         payload of a packet in a frame can be cast to a struct
 *
 * Why the standard headers are numbers and not strings: a writer fills 48
 * bytes under the arena lock instead of formatting four decimals and a UUID
 * (which cost as much as the rest of a publish), every packet is about 190
 * bytes smaller, and tools that want times and seqs of many packets (the
 * recorder, the Spark reader) read them at fixed offsets without parsing.
 * Readers present them as ordinary str headers, first, in the order of
 * a0_packet_std_t.
 *
 * Invariants a0_packet_view() checks before anything is followed, so a
 * corrupt, truncated or hostile packet yields A0_ERR_CORRUPT (with the field
 * that failed), never a read outside [buf, buf + size):
 *  - magic and version are this build's; the reserved fields are zero;
 *  - the index lies inside the metadata, the metadata inside the packet, and
 *    payload_off + payload_size == size exactly;
 *  - a0_packet_header() checks entry i (offsets inside the strings area, the
 *    NUL after each string, a non-empty key) when it is read, so reading one
 *    header never walks the others.
 *
 * No allocation: the writer sizes a buffer with a0_packet_encoded_size, the
 * caller provides it (typically a frame from a0_transport_alloc). */
#ifndef A0_PACKET_H
#define A0_PACKET_H

#include <stdbool.h>
#include <stdint.h>

#include "a0_arena.h"
#include "a0_err.h"

#define A0_PACKET_MAGIC UINT32_C(0x4B503041) /* the bytes "A0PK" */
#define A0_PACKET_VERSION 1u
#define A0_PACKET_HDR_SIZE 48u
#define A0_PACKET_STD_SIZE 48u
#define A0_PACKET_INDEX_OFF 96u /* fixed header + standard block */
#define A0_PACKET_HAS_STD 1u    /* flags: the standard block is filled in */
#define A0_PACKET_ENTRY_SIZE 16u
#define A0_PACKET_ALIGN 16u
#define A0_PACKET_ID_SIZE 16u
/* Longest decimal rendering of a uint64_t. */
#define A0_U64_DEC_MAX 20u
/* Length of a UUID in its 8-4-4-4-12 text form (without the NUL). */
#define A0_UUID_STR_LEN 36u

typedef struct a0_packet_hdr_s {
  uint32_t magic;
  uint16_t version;
  uint16_t flags; /* A0_PACKET_HAS_STD or 0; other bits reserved (0) */
  uint8_t id[A0_PACKET_ID_SIZE];
  uint32_t header_count;
  uint32_t _reserved; /* 0 */
  uint64_t payload_off;
  uint64_t payload_size;
} a0_packet_hdr_t;

/* The standard headers (keys a0_time_mono, a0_time_wall, a0_writer_id,
 * a0_writer_seq, a0_transport_seq). */
typedef struct a0_packet_std_s {
  uint64_t time_mono;     /* ns of CLOCK_MONOTONIC when written */
  uint64_t time_wall;     /* ns since the Unix epoch (UTC) when written */
  uint8_t writer_id[16];  /* the writer's UUID */
  uint64_t writer_seq;    /* 1, 2, 3... per writer */
  uint64_t transport_seq; /* the seq of the frame holding the packet */
} a0_packet_std_t;

typedef struct a0_packet_entry_s {
  uint32_t key_off;
  uint32_t key_len;
  uint32_t val_off;
  uint32_t val_len;
} a0_packet_entry_t;

/* One header to encode (or one decoded: pointers into the packet). */
typedef struct a0_packet_header_s {
  const char* key;
  uint32_t key_len;
  const char* val;
  uint32_t val_len;
} a0_packet_header_t;

/* A checked packet: pointers into the caller's buffer. */
typedef struct a0_packet_view_s {
  const uint8_t* base;
  uint64_t size;        /* bytes available at base (the whole packet, or its metadata) */
  const uint8_t* id;    /* 16 bytes */
  bool has_std;         /* flags has A0_PACKET_HAS_STD */
  a0_packet_std_t std;  /* a copy of the standard block (zero without has_std) */
  uint32_t header_count; /* headers in the index (the standard ones not counted) */
  uint64_t meta_size;   /* == payload_off: fixed header, index and strings */
  const uint8_t* payload; /* NULL for a metadata-only view */
  uint64_t payload_size;
} a0_packet_view_t;

/* Sizes a packet: meta_size (everything before the payload, a multiple of
 * 16) and total (meta_size + payload_size). A0_ERR_FRAME_TOO_LARGE if the
 * metadata would not fit the 32-bit offsets of the index or the total would
 * overflow. */
a0_err_t a0_packet_encoded_size(const a0_packet_header_t* headers, uint32_t count,
                                uint64_t payload_size, uint64_t* meta_size, uint64_t* total);

/* Writes the metadata of a packet (fixed header, standard block, index,
 * strings, padding) into buf[0, meta_size), meta_size as given by
 * a0_packet_encoded_size for the same headers. `std` may be NULL (a packet
 * without standard headers: flags 0, block zeroed). The caller writes the
 * payload at buf + meta_size. */
void a0_packet_encode_meta(uint8_t* buf, uint64_t meta_size, const uint8_t id[A0_PACKET_ID_SIZE],
                           const a0_packet_std_t* std, const a0_packet_header_t* headers,
                           uint32_t count, uint64_t payload_size);

/* Checks a whole packet of `size` bytes and fills *out. A0_ERR_CORRUPT with
 * `info` (may be NULL) naming the field otherwise. */
a0_err_t a0_packet_view(const uint8_t* buf, uint64_t size, a0_packet_view_t* out,
                        a0_check_info_t* info);

/* The same for the metadata alone (buf holds at least payload_off bytes of
 * a packet; the payload is not checked or exposed): how a reader that copied
 * the metadata apart from the payload decodes its headers. */
a0_err_t a0_packet_view_meta(const uint8_t* buf, uint64_t size, a0_packet_view_t* out,
                             a0_check_info_t* info);

/* Header i of a checked view, bounds-checked. A0_ERR_NO_FRAME if i is out
 * of range, A0_ERR_CORRUPT if its entry points outside the strings area. */
a0_err_t a0_packet_header(const a0_packet_view_t* v, uint32_t i, a0_packet_header_t* out,
                          a0_check_info_t* info);

/* Index of the first header at or after `from` whose key equals key[0,
 * key_len): A0_OK and *index, A0_ERR_NO_FRAME if none, A0_ERR_CORRUPT. */
a0_err_t a0_packet_find(const a0_packet_view_t* v, const char* key, uint32_t key_len,
                        uint32_t from, uint32_t* index);

/* Splicing: the packet of checked view `v` (a whole view, a0_packet_view)
 * with `extra` headers after its own, everything else kept byte for byte
 * (id, standard block, its headers in order, payload): exactly the bytes
 * a0_packet_encode_meta writes for v's headers followed by `extra`, then
 * the payload. In two steps, so a caller sizes the result, allocates it
 * where it will live (a frame, under the arena lock) and fills it there,
 * with no copy in between.
 *
 * a0_packet_splice_size checks every header of v (A0_ERR_CORRUPT naming the
 * field in `info`, may be NULL) and gives meta_size and total; if
 * refuse_key is not NULL and v has a header of that key, it sets *refused
 * and gives no sizes (a bridge refuses a packet that crossed a bridge
 * already). A0_ERR_FRAME_TOO_LARGE if the result would not fit the format.
 *
 * a0_packet_splice writes the result into buf[0, total). It reads v's
 * headers again and checks each against the sizes given: if v's buffer
 * changed since it was sized (a writer of shared memory), or the sizes are
 * not the ones a0_packet_splice_size gave, it returns A0_ERR_CORRUPT,
 * having written nothing outside buf[0, total) (the bytes inside are then
 * unspecified). */
a0_err_t a0_packet_splice_size(const a0_packet_view_t* v, const a0_packet_header_t* extra,
                               uint32_t n_extra, const char* refuse_key, uint32_t refuse_len,
                               bool* refused, uint64_t* meta_size, uint64_t* total,
                               a0_check_info_t* info);

a0_err_t a0_packet_splice(uint8_t* buf, uint64_t meta_size, uint64_t total,
                          const a0_packet_view_t* v, const a0_packet_header_t* extra,
                          uint32_t n_extra);

/* Writes v in decimal (no NUL); returns the number of digits (1..20).
 * (Readers render the standard block's numbers with it.) */
uint32_t a0_u64_to_dec(uint64_t v, char out[A0_U64_DEC_MAX]);

/* Packet ids: random version-4 UUIDs from a per-writer generator (splitmix64
 * seeded by the caller from the OS's entropy), so an id costs no syscall. */
typedef struct a0_packet_idgen_s {
  uint64_t state;
} a0_packet_idgen_t;

void a0_packet_idgen_seed(a0_packet_idgen_t* g, uint64_t seed);
void a0_packet_id_next(a0_packet_idgen_t* g, uint8_t out[A0_PACKET_ID_SIZE]);
/* The 8-4-4-4-12 lower-case hex form of a 16-byte id (no NUL). */
void a0_uuid_format(const uint8_t id[A0_PACKET_ID_SIZE], char out[A0_UUID_STR_LEN]);

#endif /* A0_PACKET_H */
