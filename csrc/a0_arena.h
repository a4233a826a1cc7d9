/* a0_arena.h — the byte layout of an a0py arena, and how to create and check one.
 *
 * An arena is one flat region (POSIX shm, a file, or heap memory) that many
 * processes may map at different addresses. Everything in it is therefore
 * addressed by offsets from the start, in fixed-width little-endian fields
 * with explicit padding; docs/format.md describes it byte by byte.
 *
 *   [0, 512)            header (a0_arena_hdr_t)
 *   [512, arena_size)   workspace: frames, each 16-byte aligned
 *
 * Invariants (kept by a0_transport.c, checked on every read):
 *  - hdr->pages[hdr->state_version & 1] is the committed state; the other
 *    page is scratch, written fully before state_version is incremented
 *    (release store), so a process dying mid-write never exposes a torn
 *    state. Readers without the lock copy the committed page between two
 *    loads of state_version and keep the copy only if both are equal (a
 *    seqlock whose odd/even states are the two pages).
 *  - A state is empty iff seq_low == seq_high + 1. Seqs start at 1.
 *  - relayed_frames <= seq_high: seq_high counts every frame ever committed
 *    (seqs are never reused), relayed_frames those of relayed writers.
 *  - Live frames occupy a circular band from off_head to the end of the tail
 *    frame; no two live frames overlap; frames never move once written.
 *  - Every offset read from the arena is bounds-checked before use. */
#ifndef A0_ARENA_H
#define A0_ARENA_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "a0_err.h"

#define A0_ARENA_MAGIC UINT64_C(0x4E45524159503041) /* the bytes "A0PYAREN" */
#define A0_FORMAT_VERSION 3u
#define A0_HEADER_SIZE 512u
#define A0_FRAME_ALIGN 16u
#define A0_FRAME_HDR_SIZE 32u
#define A0_MIN_ARENA_SIZE (A0_HEADER_SIZE + 64u)

/* One committed (or scratch) view of the ring. 64 bytes. */
typedef struct a0_state_s {
  uint64_t seq_low;         /* seq of the oldest live frame */
  uint64_t seq_high;        /* seq of the newest live frame (0: none yet) */
  uint64_t off_head;        /* offset of the oldest frame (0 when empty) */
  uint64_t off_tail;        /* offset of the newest frame (0 when empty) */
  uint64_t high_water_mark; /* largest used_space ever committed */
  uint64_t relayed_frames;  /* frames ever committed by relayed writers (see notify_local) */
  uint64_t _reserved[2];
} a0_state_t;

/* A frame header; the frame's data follows at offset +32. */
typedef struct a0_frame_hdr_s {
  uint64_t seq;
  uint64_t off_prev; /* offset of the previous (older) frame; 0 for none */
  uint64_t off_next; /* offset of the next (newer) frame; only meaningful if seq < seq_high */
  uint64_t data_size;
} a0_frame_hdr_t;

typedef union a0_mutex_slot_u {
  pthread_mutex_t mutex;
  uint8_t _raw[64];
} a0_mutex_slot_t;

typedef struct a0_arena_hdr_s {
  /* 0: identity — checked on every open */
  uint64_t magic;
  uint32_t version;
  uint32_t header_size;
  uint64_t arena_size;
  uint64_t flags;
  uint8_t _pad0[32];
  /* 64: the transport lock (robust, process-shared, error-checking) */
  a0_mutex_slot_t lock;
  /* 128: wait/notify, and which state page is committed */
  uint32_t notify;        /* futex word: bit 0 sleepers flag, +2 per publish (a0_sync.h) */
  uint32_t recoveries;    /* times a locker found the previous owner dead */
  uint64_t state_version; /* publishes so far; pages[state_version & 1] is committed */
  /* 144: the second futex word: moves on every publish except those of a
   * relayed writer (a0_transport_t.relayed), same protocol as notify */
  uint32_t notify_local;
  uint8_t _pad1[44];
  /* 192: the deadman (liveness) lock — held by one process for its life */
  a0_mutex_slot_t deadman;
  /* 256: deadman bookkeeping */
  uint32_t deadman_notify; /* futex word: bumped on every take and release */
  uint32_t deadman_pid;    /* pid of the holder, 0 when free */
  uint8_t _pad2[56];
  /* 320: the two state pages */
  a0_state_t pages[2];
  /* 448: reserved to the end of the header */
  uint8_t _reserved[64];
} a0_arena_hdr_t;

/* What a failed a0_arena_check found, for a precise error message. */
typedef struct a0_check_info_s {
  const char* field; /* name of the offending field, or NULL */
  uint64_t expected;
  uint64_t found;
} a0_check_info_t;

/* Writes a fresh header over the first A0_HEADER_SIZE bytes of base and
 * initializes both locks. The caller must be the only user of the region
 * (the binding holds an exclusive flock while it does this). */
a0_err_t a0_arena_init(void* base, uint64_t size);

/* Checks identity and the committed state of a mapped arena of `size` bytes:
 * magic, version, header size, recorded size, committed page index and the
 * committed state's offsets. `info` (may be NULL) says which field failed. */
a0_err_t a0_arena_check(const void* base, uint64_t size, a0_check_info_t* info);

/* Checks one state page against an arena of `size` bytes: seq order, and
 * that head/tail offsets are aligned and inside the workspace. */
a0_err_t a0_state_check(const a0_state_t* s, uint64_t size, a0_check_info_t* info);

/* Copies the committed state without the lock: loads state_version
 * (acquire), copies pages[version & 1], then (after an acquire fence) loads
 * state_version again and keeps the copy only if it did not move; retries
 * otherwise. A0_ERR_BUSY if publishes kept landing for A0_STATE_READ_TRIES
 * attempts. The copy is consistent but unchecked: run a0_state_check. */
#define A0_STATE_READ_TRIES 4096u
a0_err_t a0_state_read(const void* base, a0_state_t* out, uint64_t* version);

/* Publishes s (lock held): writes it to the scratch page, then increments
 * state_version with a release store, then a release fence, so that bytes
 * the caller writes afterwards (frames an alloc hands out over evicted
 * ones) are never seen by a reader that still sees the older version.
 * Returns the new version. */
uint64_t a0_state_publish(void* base, const a0_state_t* s);

/* Re-initializes both locks and clears both notify words' sleepers flags. Only for a caller
 * that knows no other process has the arena mapped (sole-user open): repairs
 * a lock left held by a process from before a reboot. */
a0_err_t a0_arena_reset_locks(void* base);

/* What a0_arena_check_access found: the object's owner and st_mode. */
typedef struct a0_access_info_s {
  uint32_t uid;  /* owner of the object */
  uint32_t gid;  /* its group */
  uint32_t mode; /* st_mode: the file type and the permission bits */
} a0_access_info_t;

/* May this process attach to an existing shm object or file that it did not
 * create itself (with O_CREAT | O_EXCL)? Such a name may have been taken by
 * anyone beforehand: /dev/shm and shared directories are writable by every
 * user, and a planted object that a0py adopted would hand its owner every
 * frame. The answer comes from fstat of the descriptor the caller opened (not
 * the path, so what is checked is what gets mapped):
 *   - A0_ERR_NOT_REGULAR unless it is a regular file (not a FIFO, device...);
 *   - A0_ERR_FOREIGN_OWNER unless its owner is `owner_uid` (root too must name
 *     another user to trust it);
 *   - A0_ERR_MODE_TOO_OPEN if it has a permission bit outside `max_mode`
 *     (07777 bits: 0600 admits 0600 and 0400, not 0640 or 0666);
 *   - A0_ERR_SYS (errno set) if fstat fails.
 * `info` (may be NULL) gets what fstat found, for the error message. */
a0_err_t a0_arena_check_access(int fd, uint32_t owner_uid, uint32_t max_mode,
                               a0_access_info_t* info);

/* Rounds n up to the frame alignment; returns 0 on overflow. */
static inline uint64_t a0_align_up(uint64_t n) {
  if (n > UINT64_MAX - (A0_FRAME_ALIGN - 1)) return 0;
  return (n + (A0_FRAME_ALIGN - 1)) & ~(uint64_t)(A0_FRAME_ALIGN - 1);
}

#endif /* A0_ARENA_H */
