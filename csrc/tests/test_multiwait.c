/* test_multiwait.c — a0_multiwait in both modes (futex_waitv where the
 * kernel has it, and the polling fallback): wakes from a commit on any of
 * many arenas, from the private control word, deadlines, a word changed
 * before the call, the waiter counts restored, bad arguments.
 *
 * Plain C, no framework: CHECK() counts, the last line is "N passed, M
 * failed", the exit status is non-zero on any failure. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
  }
  test_mode(A0_MULTIWAIT_POLL);
  test_bad_arguments();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
