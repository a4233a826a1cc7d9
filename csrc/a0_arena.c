/* a0_arena.c — arena header: creation, open checks, lock repair. */
#include "a0_arena.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

#include "a0_sync.h"

/* The layout is a file format: pin every offset so a compiler or ABI change
 * that would move a field fails the build instead of corrupting arenas. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "a0py arenas are little-endian; this target is not"
#endif
_Static_assert(sizeof(pthread_mutex_t) <= 64, "pthread_mutex_t must fit its 64-byte slot");
_Static_assert(sizeof(a0_state_t) == 64, "state page is 64 bytes");
_Static_assert(sizeof(a0_frame_hdr_t) == A0_FRAME_HDR_SIZE, "frame header is 32 bytes");
_Static_assert(A0_FRAME_HDR_SIZE % A0_FRAME_ALIGN == 0, "frame data stays 16-byte aligned");
_Static_assert(A0_FRAME_ALIGN >= _Alignof(max_align_t), "frames aligned to max_align_t");
_Static_assert(sizeof(a0_arena_hdr_t) == A0_HEADER_SIZE, "header is 512 bytes");
_Static_assert(offsetof(a0_arena_hdr_t, magic) == 0, "layout");
_Static_assert(offsetof(a0_arena_hdr_t, version) == 8, "layout");
_Static_assert(offsetof(a0_arena_hdr_t, header_size) == 12, "layout");
_Static_assert(offsetof(a0_arena_hdr_t, arena_size) == 16, "layout");
_Static_assert(offsetof(a0_arena_hdr_t, flags) == 24, "layout");
_Static_assert(offsetof(a0_arena_hdr_t, lock) == 64, "layout");
_Static_assert(offsetof(a0_arena_hdr_t, notify) == 128, "layout");
_Static_assert(offsetof(a0_arena_hdr_t, recoveries) == 132, "layout");
_Static_assert(offsetof(a0_arena_hdr_t, state_version) == 136, "layout");
_Static_assert(offsetof(a0_arena_hdr_t, notify_local) == 144, "layout");
_Static_assert(offsetof(a0_arena_hdr_t, notify_local) / 64 == offsetof(a0_arena_hdr_t, notify) / 64,
               "both notify words share a cache line (a publish bumps both)");
_Static_assert(offsetof(a0_arena_hdr_t, state_version) % 8 == 0, "state_version is 8-aligned");
_Static_assert(offsetof(a0_arena_hdr_t, pages) % 64 == 0, "state pages are cache-line aligned");
_Static_assert(offsetof(a0_arena_hdr_t, deadman) == 192, "layout");
_Static_assert(offsetof(a0_arena_hdr_t, deadman_notify) == 256, "layout");
_Static_assert(offsetof(a0_arena_hdr_t, deadman_pid) == 260, "layout");
_Static_assert(offsetof(a0_arena_hdr_t, pages) == 320, "layout");
_Static_assert(offsetof(a0_state_t, seq_low) == 0 && offsetof(a0_state_t, seq_high) == 8 &&
                   offsetof(a0_state_t, off_head) == 16 && offsetof(a0_state_t, off_tail) == 24 &&
                   offsetof(a0_state_t, high_water_mark) == 32 &&
                   offsetof(a0_state_t, relayed_frames) == 40,
               "state layout");
_Static_assert(offsetof(a0_frame_hdr_t, seq) == 0 && offsetof(a0_frame_hdr_t, off_prev) == 8 &&
                   offsetof(a0_frame_hdr_t, off_next) == 16 &&
                   offsetof(a0_frame_hdr_t, data_size) == 24,
               "frame layout");

static const char* const a0_err_names[A0_ERR__COUNT] = {
    [A0_OK] = "ok",
    [A0_ERR_SYS] = "system call failed",
    [A0_ERR_BAD_MAGIC] = "not an a0py arena (bad magic)",
    [A0_ERR_BAD_VERSION] = "unsupported arena format version",
    [A0_ERR_BAD_HEADER_SIZE] = "unexpected arena header size",
    [A0_ERR_SIZE_MISMATCH] = "recorded arena size does not match the mapping",
    [A0_ERR_TOO_SMALL] = "arena too small",
    [A0_ERR_CORRUPT] = "arena state is corrupt",
    [A0_ERR_FRAME_TOO_LARGE] = "frame larger than the arena workspace",
    [A0_ERR_EMPTY] = "arena is empty",
    [A0_ERR_NO_FRAME] = "no frame at or next to the cursor",
    [A0_ERR_SEQ_NOT_FOUND] = "seq not written yet",
    [A0_ERR_TIMEOUT] = "timed out",
    [A0_ERR_BUSY] = "lock is held",
    [A0_ERR_DEADLOCK] = "lock already held by this thread",
    [A0_ERR_NOT_RECOVERABLE] = "lock not recoverable",
    [A0_ERR_NOT_LOCKED] = "not locked",
    [A0_ERR_PENDING] = "uncommitted frames would be lost",
    [A0_ERR_NOT_OWNER] = "not the owner",
    [A0_ERR_INTERRUPTED] = "interrupted by a signal",
    [A0_ERR_EVICTED] = "frame overwritten while it was being read",
    [A0_ERR_NOT_REGULAR] = "not a regular file",
    [A0_ERR_FOREIGN_OWNER] = "owned by another user",
    [A0_ERR_MODE_TOO_OPEN] = "grants more access than the mode asked for",
};

const char* a0_strerror(a0_err_t err) {
  if ((unsigned)err >= A0_ERR__COUNT || !a0_err_names[err]) return "unknown a0py error";
  return a0_err_names[err];
}

static int a0_init_robust_mutex(pthread_mutex_t* m) {
  pthread_mutexattr_t attr;
  int rc = pthread_mutexattr_init(&attr);
  if (rc) return rc;
  /* Error-checking so a thread that locks twice gets EDEADLK, not a hang. */
  if (!rc) rc = pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
  if (!rc) rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  if (!rc) rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  if (!rc) rc = pthread_mutex_init(m, &attr);
  pthread_mutexattr_destroy(&attr);
  return rc;
}

static a0_err_t a0_init_locks(a0_arena_hdr_t* hdr) {
  memset(&hdr->lock, 0, sizeof hdr->lock);
  memset(&hdr->deadman, 0, sizeof hdr->deadman);
  int rc = a0_init_robust_mutex(&hdr->lock.mutex);
  if (!rc) rc = a0_init_robust_mutex(&hdr->deadman.mutex);
  if (rc) {
    errno = rc;
    return A0_ERR_SYS;
  }
  atomic_fetch_and((_Atomic uint32_t*)&hdr->notify, ~(uint32_t)A0_NOTIFY_SLEEPERS);
  atomic_fetch_and((_Atomic uint32_t*)&hdr->notify_local, ~(uint32_t)A0_NOTIFY_SLEEPERS);
  hdr->deadman_pid = 0;
  return A0_OK;
}

a0_err_t a0_arena_init(void* base, uint64_t size) {
  if (!base) return A0_ERR_SYS;
  if (size < A0_MIN_ARENA_SIZE) return A0_ERR_TOO_SMALL;
  a0_arena_hdr_t* hdr = (a0_arena_hdr_t*)base;
  memset(hdr, 0, sizeof *hdr);
  hdr->version = A0_FORMAT_VERSION;
  hdr->header_size = A0_HEADER_SIZE;
  hdr->arena_size = size;
  a0_err_t err = a0_init_locks(hdr);
  if (err) return err;
  for (int i = 0; i < 2; i++) {
    hdr->pages[i].seq_low = 1;
    hdr->pages[i].seq_high = 0;
  }
  /* The magic is written last, with release order: a process that sees it
   * sees a complete header. */
  atomic_store_explicit((_Atomic uint64_t*)&hdr->magic, A0_ARENA_MAGIC, memory_order_release);
  return A0_OK;
}

a0_err_t a0_arena_check_access(int fd, uint32_t owner_uid, uint32_t max_mode,
                               a0_access_info_t* info) {
  struct stat st;
  if (info) *info = (a0_access_info_t){0};
  if (fstat(fd, &st) != 0) return A0_ERR_SYS;
  if (info) *info = (a0_access_info_t){.uid = st.st_uid, .gid = st.st_gid, .mode = st.st_mode};
  if (!S_ISREG(st.st_mode)) return A0_ERR_NOT_REGULAR;
  if (st.st_uid != owner_uid) return A0_ERR_FOREIGN_OWNER;
  if ((st.st_mode & 07777u & ~max_mode) != 0) return A0_ERR_MODE_TOO_OPEN;
  return A0_OK;
}

a0_err_t a0_arena_reset_locks(void* base) {
  return a0_init_locks((a0_arena_hdr_t*)base);
}

#define A0_FAIL(code, name, exp, got) \
  do {                                \
    if (info) {                       \
      info->field = (name);           \
      info->expected = (exp);         \
      info->found = (got);            \
    }                                 \
    return (code);                    \
  } while (0)

a0_err_t a0_arena_check(const void* base, uint64_t size, a0_check_info_t* info) {
  if (info) *info = (a0_check_info_t){0};
  const a0_arena_hdr_t* hdr = (const a0_arena_hdr_t*)base;
  /* The magic first, whenever there are bytes for it: a short file that is
   * not an arena is "not an arena", not "too small". */
  if (size >= sizeof hdr->magic) {
    uint64_t magic = atomic_load_explicit((_Atomic uint64_t*)&hdr->magic, memory_order_acquire);
    if (magic != A0_ARENA_MAGIC) A0_FAIL(A0_ERR_BAD_MAGIC, "magic", A0_ARENA_MAGIC, magic);
  }
  if (size < sizeof(a0_arena_hdr_t)) A0_FAIL(A0_ERR_TOO_SMALL, "arena_size", A0_MIN_ARENA_SIZE, size);
  if (hdr->version != A0_FORMAT_VERSION)
    A0_FAIL(A0_ERR_BAD_VERSION, "version", A0_FORMAT_VERSION, hdr->version);
  if (hdr->header_size != A0_HEADER_SIZE)
    A0_FAIL(A0_ERR_BAD_HEADER_SIZE, "header_size", A0_HEADER_SIZE, hdr->header_size);
  if (hdr->arena_size != size) A0_FAIL(A0_ERR_SIZE_MISMATCH, "arena_size", size, hdr->arena_size);
  if (size < A0_MIN_ARENA_SIZE) A0_FAIL(A0_ERR_TOO_SMALL, "arena_size", A0_MIN_ARENA_SIZE, size);
  a0_state_t committed;
  a0_err_t err = a0_state_read(base, &committed, NULL);
  if (err) return err;
  return a0_state_check(&committed, size, info);
}

a0_err_t a0_state_check(const a0_state_t* s, uint64_t size, a0_check_info_t* info) {
  if (s->seq_low == 0) A0_FAIL(A0_ERR_CORRUPT, "seq_low", 1, 0);
  if (s->seq_high == UINT64_MAX || s->seq_low > s->seq_high + 1)
    A0_FAIL(A0_ERR_CORRUPT, "seq_low", s->seq_high + 1, s->seq_low);
  if (s->relayed_frames > s->seq_high)
    A0_FAIL(A0_ERR_CORRUPT, "relayed_frames", s->seq_high, s->relayed_frames);
  if (s->seq_low == s->seq_high + 1) return A0_OK; /* empty: offsets unused */
  const uint64_t offs[2] = {s->off_head, s->off_tail};
  const char* const names[2] = {"off_head", "off_tail"};
  for (int i = 0; i < 2; i++) {
    if (offs[i] < A0_HEADER_SIZE || offs[i] % A0_FRAME_ALIGN != 0 ||
        offs[i] > size - A0_FRAME_HDR_SIZE)
      A0_FAIL(A0_ERR_CORRUPT, names[i], A0_HEADER_SIZE, offs[i]);
  }
  if (s->seq_low == s->seq_high && s->off_head != s->off_tail)
    A0_FAIL(A0_ERR_CORRUPT, "off_tail", s->off_head, s->off_tail);
  return A0_OK;
}

/* The pages are read by processes that do not hold the lock, so both sides
 * access their fields as relaxed atomics (plain 8-byte loads and stores on
 * every target we build for); the ordering comes from state_version. */
#define LOAD64(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE64(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

a0_err_t a0_state_read(const void* base, a0_state_t* out, uint64_t* version) {
  const a0_arena_hdr_t* h = (const a0_arena_hdr_t*)base;
  _Atomic uint64_t* ver = (_Atomic uint64_t*)&h->state_version;
  for (unsigned i = 0; i < A0_STATE_READ_TRIES; i++) {
    uint64_t v1 = atomic_load_explicit(ver, memory_order_acquire);
    const a0_state_t* p = &h->pages[v1 & 1];
    *out = (a0_state_t){
        .seq_low = LOAD64(&p->seq_low),
        .seq_high = LOAD64(&p->seq_high),
        .off_head = LOAD64(&p->off_head),
        .off_tail = LOAD64(&p->off_tail),
        .high_water_mark = LOAD64(&p->high_water_mark),
        .relayed_frames = LOAD64(&p->relayed_frames),
    };
    /* The page loads above happen before the second version load. */
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(ver, memory_order_relaxed) == v1) {
      if (version) *version = v1;
      return A0_OK;
    }
    if (i >= 16) sched_yield(); /* a writer publishing back to back: let it finish */
  }
  return A0_ERR_BUSY;
}

uint64_t a0_state_publish(void* base, const a0_state_t* s) {
  a0_arena_hdr_t* h = (a0_arena_hdr_t*)base;
  _Atomic uint64_t* ver = (_Atomic uint64_t*)&h->state_version;
  uint64_t v = atomic_load_explicit(ver, memory_order_relaxed); /* only lock holders write it */
  a0_state_t* p = &h->pages[(v + 1) & 1];
  STORE64(&p->seq_low, s->seq_low);
  STORE64(&p->seq_high, s->seq_high);
  STORE64(&p->off_head, s->off_head);
  STORE64(&p->off_tail, s->off_tail);
  STORE64(&p->high_water_mark, s->high_water_mark);
  STORE64(&p->relayed_frames, s->relayed_frames);
  atomic_store_explicit(ver, v + 1, memory_order_release);
  /* Stores after this (the next publish's page writes, the frame bytes an
   * alloc hands out) are ordered after the version a reader checks. */
  atomic_thread_fence(memory_order_release);
  return v + 1;
}
