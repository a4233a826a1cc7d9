/* test_multiwait.c — a0_multiwait in both modes (futex_waitv where the
 * kernel has it, and the polling fallback): wakes from a commit on any of
 * many arenas, from the private control word, deadlines, a word changed
 * before the call, the waiter counts restored, bad arguments; the
 * notify_local word: a sleeper on it not woken by relayed commits, woken by
 * an ordinary one, and one killed asleep costing one wake.
 *
 * Plain C, no framework: CHECK() counts, the last line is "N passed, M
 * failed", the exit status is non-zero on any failure. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "a0_arena.h"
#include "a0_multiwait.h"
#include "a0_sync.h"
#include "a0_transport.h"

#include "check.h"

#define N_ARENAS 40
#define ARENA_SIZE 4096

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct timespec in_ms(long ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_nsec += ms * 1000000L;
  ts.tv_sec += ts.tv_nsec / 1000000000L;
  ts.tv_nsec %= 1000000000L;
  return ts;
}

static uint8_t* new_arena(void) {
  uint8_t* base = aligned_alloc(64, ARENA_SIZE);
  if (!base) abort();
  memset(base, 0, ARENA_SIZE);
  if (a0_arena_init(base, ARENA_SIZE) != A0_OK) abort();
  return base;
}

static void commit_one(uint8_t* base) {
  a0_transport_t t;
  a0_locked_t lk;
  uint8_t* data;
  a0_transport_init(&t, base, ARENA_SIZE);
  a0_transport_lock(&t, &lk);
  a0_transport_alloc(lk, 8, &data);
  memset(data, 1, 8);
  a0_transport_commit_unlock(lk);
}

typedef struct writer_s {
  uint8_t* base;
  uint32_t* ctl; /* or, if set, bump this control word instead */
  long delay_ms;
} writer_t;

static void* writer_main(void* arg) {
  writer_t* w = arg;
  usleep((useconds_t)(w->delay_ms * 1000));
  if (w->ctl)
    a0_multiwait_wake_private(w->ctl);
  else
    commit_one(w->base);
  return NULL;
}

static uint32_t ctl_word;

/* entries[0]: the control word; entries[1..]: the arenas' notify words. */
static uint32_t fill(a0_multiwait_entry_t* e, uint8_t** arenas) {
  e[0].word = &ctl_word;
  e[0].arm = 0;
  e[0].expected = atomic_load((_Atomic uint32_t*)&ctl_word);
  e[0].shared = 0;
  for (int i = 0; i < N_ARENAS; i++) a0_multiwait_arena_entry(arenas[i], &e[i + 1]);
  return N_ARENAS + 1;
}

/* Arenas whose notify word has the SLEEPERS flag set (a0_sync.h). */
static uint32_t flagged(uint8_t** arenas) {
  uint32_t sum = 0;
  for (int i = 0; i < N_ARENAS; i++) sum += ((a0_arena_hdr_t*)arenas[i])->notify & A0_NOTIFY_SLEEPERS;
  return sum;
}

/* The flag stays set on an arena nobody published to after a sleep (as a
 * transport waiter leaves it); one publish wakes and clears it. */
static void clear_flags(uint8_t** arenas) {
  for (int i = 0; i < N_ARENAS; i++)
    if (((a0_arena_hdr_t*)arenas[i])->notify & A0_NOTIFY_SLEEPERS) commit_one(arenas[i]);
}

static void test_mode(a0_multiwait_mode_t mode) {
  uint8_t* arenas[N_ARENAS];
  for (int i = 0; i < N_ARENAS; i++) arenas[i] = new_arena();
  a0_multiwait_entry_t e[A0_MULTIWAIT_MAX];
  int changed;

  /* A commit on one arena among many, from another thread, wakes us. */
  int targets[] = {N_ARENAS - 1, 0, 17};
  for (size_t k = 0; k < sizeof targets / sizeof *targets; k++) {
    uint32_t n = fill(e, arenas);
    writer_t w = {arenas[targets[k]], NULL, 30};
    pthread_t th;
    pthread_create(&th, NULL, writer_main, &w);
    struct timespec deadline = in_ms(5000);
    double t0 = now_s();
    a0_err_t err;
    do {
      err = a0_multiwait(e, n, mode, &deadline, &changed);
    } while (err == A0_OK && a0_multiwait_load(&e[targets[k] + 1]) == e[targets[k] + 1].expected);
    CHECK_ERR(err, A0_OK);
    CHECK(now_s() - t0 < 4.0);
    CHECK(changed == -1 || changed == targets[k] + 1);
    CHECK(a0_multiwait_load(&e[targets[k] + 1]) != e[targets[k] + 1].expected);
    pthread_join(th, NULL);
    /* Every arena was armed for the sleep; the one that was published to is
     * clear again. */
    CHECK(mode == A0_MULTIWAIT_POLL || !(((a0_arena_hdr_t*)arenas[targets[k]])->notify & A0_NOTIFY_SLEEPERS));
    clear_flags(arenas);
    CHECK(flagged(arenas) == 0);
  }

  /* The control word wakes the sleeper. */
  {
    uint32_t n = fill(e, arenas);
    writer_t w = {NULL, &ctl_word, 20};
    pthread_t th;
    pthread_create(&th, NULL, writer_main, &w);
    struct timespec deadline = in_ms(5000);
    a0_err_t err;
    do {
      err = a0_multiwait(e, n, mode, &deadline, &changed);
    } while (err == A0_OK && a0_multiwait_load(&e[0]) == e[0].expected);
    CHECK_ERR(err, A0_OK);
    CHECK(a0_multiwait_load(&e[0]) != e[0].expected);
    pthread_join(th, NULL);
  }

  /* A word that changed before the call: no sleep at all. */
  {
    uint32_t n = fill(e, arenas);
    commit_one(arenas[5]);
    struct timespec deadline = in_ms(5000);
    double t0 = now_s();
    CHECK_ERR(a0_multiwait(e, n, mode, &deadline, &changed), A0_OK);
    CHECK(changed == 6);
    CHECK(now_s() - t0 < 1.0);
  }

  /* Nothing changes: the deadline ends the wait, counts restored. */
  {
    uint32_t n = fill(e, arenas);
    struct timespec deadline = in_ms(40);
    double t0 = now_s();
    CHECK_ERR(a0_multiwait(e, n, mode, &deadline, &changed), A0_ERR_TIMEOUT);
    CHECK(now_s() - t0 >= 0.039);
    /* Armed in waitv mode (a publisher would have woken us), never in poll mode. */
    CHECK(flagged(arenas) == (mode == A0_MULTIWAIT_WAITV ? N_ARENAS : 0));
    clear_flags(arenas);
  }

  for (int i = 0; i < N_ARENAS; i++) free(arenas[i]);
}

/* While asleep in waitv mode the words are armed, so writers wake us. */
typedef struct sleeper_s {
  a0_multiwait_entry_t e[2];
  a0_err_t err;
} sleeper_t;

static void* sleeper_main(void* arg) {
  sleeper_t* s = arg;
  struct timespec deadline = in_ms(5000);
  s->err = a0_multiwait(s->e, 2, A0_MULTIWAIT_WAITV, &deadline, NULL);
  return NULL;
}

static void test_words_armed_while_asleep(void) {
  uint8_t* a = new_arena();
  uint8_t* b = new_arena();
  sleeper_t s;
  a0_multiwait_arena_entry(a, &s.e[0]);
  a0_multiwait_arena_entry(b, &s.e[1]);
  pthread_t th;
  pthread_create(&th, NULL, sleeper_main, &s);
  double t0 = now_s();
  while (!(((a0_arena_hdr_t*)b)->notify & A0_NOTIFY_SLEEPERS) && now_s() - t0 < 5.0) usleep(1000);
  CHECK((((a0_arena_hdr_t*)a)->notify & A0_NOTIFY_SLEEPERS) && (((a0_arena_hdr_t*)b)->notify & A0_NOTIFY_SLEEPERS));
  usleep(20000); /* let it reach futex_waitv */
  commit_one(b); /* sees the flag: wakes, then clears it */
  pthread_join(th, NULL);
  CHECK_ERR(s.err, A0_OK);
  CHECK(!(((a0_arena_hdr_t*)b)->notify & A0_NOTIFY_SLEEPERS));
  CHECK(s.e[1].expected != ((a0_arena_hdr_t*)b)->notify); /* b moved since it was armed */
  CHECK(s.e[0].expected == ((a0_arena_hdr_t*)a)->notify); /* a did not */
  free(a);
  free(b);
}


/* ---- the notify_local word ------------------------------------------------ */

/* n frames committed to `base` (of `size` bytes), by a relayed writer or not. */
static void commit_frames(uint8_t* base, uint64_t size, int n, uint32_t relayed) {
  a0_transport_t t;
  a0_locked_t lk;
  uint8_t* data;
  a0_transport_init(&t, base, size);
  t.relayed = relayed;
  for (int i = 0; i < n; i++) {
    a0_transport_lock(&t, &lk);
    a0_transport_alloc(lk, 8, &data);
    memset(data, 2, 8);
    a0_transport_commit_unlock(lk);
  }
}

typedef struct local_sleeper_s {
  a0_multiwait_entry_t e[3];
  uint32_t n;
  a0_multiwait_mode_t mode;
  long ms;
  _Atomic int done;
  a0_err_t err;
  int changed;
} local_sleeper_t;

static void* local_sleeper_main(void* arg) {
  local_sleeper_t* s = arg;
  struct timespec deadline = in_ms(s->ms);
  s->err = a0_multiwait(s->e, s->n, s->mode, &deadline, &s->changed);
  atomic_store(&s->done, 1);
  return NULL;
}

/* A sleeper on two arenas' local words: relayed commits (they wrap the
 * ring, evicting frames) do not end its sleep, nor do they touch the local
 * word or its flag; an ordinary commit on the second arena does, at once,
 * and clears the flag as any publish does. Meanwhile a sleeper on the plain
 * notify word of the same arena is woken by the first relayed commit. */
static void test_local_word(a0_multiwait_mode_t mode) {
  uint8_t* a = new_arena();
  uint8_t* b = new_arena();
  a0_arena_hdr_t* hb = (a0_arena_hdr_t*)b;
  local_sleeper_t loc = {.n = 2, .mode = mode, .ms = 5000};
  a0_multiwait_arena_local_entry(a, &loc.e[0]);
  a0_multiwait_arena_local_entry(b, &loc.e[1]);
  CHECK(loc.e[1].word == &hb->notify_local && loc.e[1].arm == 1 && loc.e[1].shared == 1);
  local_sleeper_t all = {.n = 1, .mode = mode, .ms = 5000};
  a0_multiwait_arena_entry(b, &all.e[0]);
  pthread_t th_loc, th_all;
  pthread_create(&th_loc, NULL, local_sleeper_main, &loc);
  pthread_create(&th_all, NULL, local_sleeper_main, &all);
  double t0 = now_s();
  if (mode == A0_MULTIWAIT_WAITV) {
    while (!((hb->notify_local & A0_NOTIFY_SLEEPERS) && (hb->notify & A0_NOTIFY_SLEEPERS)) &&
           now_s() - t0 < 5.0)
      usleep(1000);
    CHECK(hb->notify_local & A0_NOTIFY_SLEEPERS); /* armed */
  }
  usleep(20000); /* let both reach their sleep */
  uint32_t local_before = atomic_load((_Atomic uint32_t*)&hb->notify_local);
  uint32_t notify_before = atomic_load((_Atomic uint32_t*)&hb->notify);
  commit_frames(b, ARENA_SIZE, 600, 1); /* ~100 ring turns: evictions too */
  pthread_join(th_all, NULL);
  CHECK_ERR(all.err, A0_OK); /* the plain word saw the relayed commits */
  CHECK(atomic_load((_Atomic uint32_t*)&hb->notify) != notify_before);
  CHECK(atomic_load((_Atomic uint32_t*)&hb->notify_local) == local_before); /* untouched */
  usleep(50000); /* a wake, had there been one, would have ended it by now */
  CHECK(!atomic_load(&loc.done));
  a0_state_t s;
  a0_transport_t t;
  a0_transport_init(&t, b, ARENA_SIZE);
  a0_transport_snapshot(&t, &s);
  CHECK(s.relayed_frames == 600 && s.seq_high == 600);
  commit_frames(b, ARENA_SIZE, 1, 0); /* an ordinary commit */
  pthread_join(th_loc, NULL);
  CHECK_ERR(loc.err, A0_OK);
  CHECK(loc.changed == 1 || loc.changed == -1);
  CHECK(atomic_load((_Atomic uint32_t*)&hb->notify_local) != local_before);
  CHECK(!(hb->notify_local & A0_NOTIFY_SLEEPERS)); /* woken, then cleared */
  a0_transport_snapshot(&t, &s);
  CHECK(s.relayed_frames == 600 && s.seq_high == 601);
  /* a word that moved before the call ends it at once, as on notify */
  local_sleeper_t early = {.n = 1, .mode = mode, .ms = 5000};
  a0_multiwait_arena_local_entry(b, &early.e[0]);
  commit_frames(b, ARENA_SIZE, 1, 0);
  local_sleeper_main(&early);
  CHECK_ERR(early.err, A0_OK);
  CHECK(early.changed == 0);
  /* and only relayed commits before the call do not: it times out */
  local_sleeper_t quiet = {.n = 1, .mode = mode, .ms = 30};
  a0_multiwait_arena_local_entry(b, &quiet.e[0]);
  commit_frames(b, ARENA_SIZE, 3, 1);
  local_sleeper_main(&quiet);
  CHECK_ERR(quiet.err, A0_ERR_TIMEOUT);
  free(a);
  free(b);
}

/* A process killed asleep on the local word leaves its flag set: relayed
 * commits leave it so (they do not touch the word), the next ordinary
 * commit pays one wake and clears it, later ones pay none. */
static void test_local_sleeper_killed(void) {
  uint8_t* base = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) abort();
  if (a0_arena_init(base, ARENA_SIZE) != A0_OK) abort();
  a0_arena_hdr_t* h = (a0_arena_hdr_t*)base;
  pid_t pid = fork();
  if (pid == 0) {
    a0_multiwait_entry_t e;
    a0_multiwait_arena_local_entry(base, &e);
    a0_multiwait(&e, 1, A0_MULTIWAIT_WAITV, NULL, NULL);
    _exit(0);
  }
  double t0 = now_s();
  while (!(atomic_load((_Atomic uint32_t*)&h->notify_local) & A0_NOTIFY_SLEEPERS) && now_s() - t0 < 5.0)
    usleep(1000);
  CHECK(h->notify_local & A0_NOTIFY_SLEEPERS);
  usleep(20000);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  commit_frames(base, ARENA_SIZE, 5, 1);
  CHECK(h->notify_local & A0_NOTIFY_SLEEPERS); /* relayed commits: left as it was */
  commit_frames(base, ARENA_SIZE, 1, 0);
  CHECK(!(h->notify_local & A0_NOTIFY_SLEEPERS)); /* one wake, then clear */
  CHECK(!(h->notify & A0_NOTIFY_SLEEPERS));
  munmap(base, ARENA_SIZE);
}

static void test_bad_arguments(void) {
  a0_multiwait_entry_t e[A0_MULTIWAIT_MAX + 1];
  uint32_t word = 0;
  for (uint32_t i = 0; i <= A0_MULTIWAIT_MAX; i++) {
    e[i].word = &word;
    e[i].arm = 0;
    e[i].expected = 0;
    e[i].shared = 0;
  }
  CHECK_ERR(a0_multiwait(e, 0, A0_MULTIWAIT_WAITV, NULL, NULL), A0_ERR_SYS);
  CHECK_ERR(a0_multiwait(e, A0_MULTIWAIT_MAX + 1, A0_MULTIWAIT_POLL, NULL, NULL), A0_ERR_SYS);
}

int main(void) {
  int has_waitv = a0_multiwait_waitv_available();
  printf("futex_waitv: %s\n", has_waitv ? "available" : "missing (testing the fallback only)");
  if (has_waitv) {
    test_mode(A0_MULTIWAIT_WAITV);
    test_words_armed_while_asleep();
    test_local_word(A0_MULTIWAIT_WAITV);
    test_local_sleeper_killed();
  }
  test_mode(A0_MULTIWAIT_POLL);
  test_local_word(A0_MULTIWAIT_POLL);
  test_bad_arguments();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
