/* test_spin.c — the waiter's adaptive spin (a0_transport_wait_change), with
 * the writer a thread stepped by the test: a sleep woken soon after the wait
 * began refills the spin budget (one slow stretch does not leave the waiter
 * sleeping at once for the next A0_SPIN_PROBE_EVERY waits), a sleep woken
 * late does not (a waiter whose writer is idle stays asleep), and a
 * spin_max_ns of 0 never spins. Counted with the transport's spins and
 * sleeps; no assertion depends on how fast a thread is scheduled beyond
 * "a wake-up after a 1 ms sleep comes within 50 ms".
 *
 * Runs under `make ctest` and `make sanitize`. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "a0_arena.h"
#include "a0_err.h"
#include "a0_sync.h"
#include "a0_transport.h"

#include "check.h"
#include "ring.h"

#define SIZE 4096u

struct late {
  uint8_t* base;
  useconds_t after_us;
};

/* Writes one frame `after_us` after it starts, through its own transport. */
static void* late_writer(void* arg) {
  struct late* x = arg;
  a0_transport_t w;
  a0_transport_init(&w, x->base, SIZE);
  usleep(x->after_us);
  CHECK_ERR(write_commit(&w, 16), A0_OK);
  return NULL;
}

/* One wait_change on t's notify word, woken by a frame written after_us
 * later by another thread (0: nobody writes, the wait times out after
 * timeout_us). Returns what the wait returned. */
static a0_err_t wait_once(a0_transport_t* t, useconds_t after_us, uint64_t timeout_us) {
  uint32_t seen = a0_notify_load(a0_transport_notify_word(t));
  struct late x = {.base = t->base, .after_us = after_us};
  pthread_t th;
  if (after_us) CHECK(pthread_create(&th, NULL, late_writer, &x) == 0);
  struct timespec dl = a0_deadline_after_ns(timeout_us * 1000u);
  a0_err_t err = a0_transport_wait_change(t, seen, &dl);
  if (after_us) pthread_join(th, NULL);
  return err;
}

/* Misses (waits that time out, nobody writing) until the budget is 0, as a
 * slow stretch of a peer leaves it. */
static void spin_down(a0_transport_t* t) {
  for (int i = 0; i < 40 && t->spin_ns; i++) CHECK_ERR(wait_once(t, 0, 200), A0_ERR_TIMEOUT);
  CHECK(t->spin_ns == 0);
}

static void test_a_quick_wake_refills_the_budget(void) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) return; /* one CPU: never spins */
  uint8_t* base = new_arena(SIZE);
  a0_transport_t t;
  a0_transport_init(&t, base, SIZE);
  CHECK(t.spin_max_ns == A0_SPIN_MAX_NS);
  t.spin_max_ns = 50u * 1000 * 1000; /* "soon" is within 50 ms here */
  spin_down(&t);
  uint64_t probe = t.spin_probe;
  CHECK(probe < A0_SPIN_PROBE_EVERY - 2); /* no probe in the next two waits */

  /* The budget is 0: this wait sleeps at once, and a writer wakes it ~1 ms
   * later, well within spin_max_ns: a spin would have caught that. */
  uint64_t spins = t.spins, sleeps = t.sleeps;
  CHECK_ERR(wait_once(&t, 1000, 5u * 1000 * 1000), A0_OK);
  CHECK(t.spins == spins);
  CHECK(t.sleeps == sleeps + 1);
  CHECK(t.spin_ns >= A0_SPIN_START_NS); /* refilled (the old rule left it 0) */
  CHECK(t.spin_probe == 0);

  /* So the next wait spins first, rather than sleeping at once as it did
   * for the next A0_SPIN_PROBE_EVERY waits before. */
  CHECK_ERR(wait_once(&t, 100, 5u * 1000 * 1000), A0_OK);
  CHECK(t.spins == spins + 1);
  free(base);
}

static void test_a_late_wake_leaves_the_waiter_asleep(void) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) return;
  uint8_t* base = new_arena(SIZE);
  a0_transport_t t;
  a0_transport_init(&t, base, SIZE);
  t.spin_max_ns = 200u * 1000; /* 200 us */
  spin_down(&t);
  /* Woken 20 ms after the wait began, far past spin_max_ns: an idle writer's
   * pace, which spinning would not have caught. */
  uint64_t spins = t.spins, sleeps = t.sleeps;
  CHECK_ERR(wait_once(&t, 20000, 5u * 1000 * 1000), A0_OK);
  CHECK(t.sleeps == sleeps + 1);
  CHECK(t.spin_ns == 0);
  CHECK_ERR(wait_once(&t, 0, 200), A0_ERR_TIMEOUT);
  CHECK(t.spins == spins); /* still sleeping at once */
  free(base);
}

static void test_spin_max_zero_never_spins(void) {
  uint8_t* base = new_arena(SIZE);
  a0_transport_t t;
  a0_transport_init(&t, base, SIZE);
  t.spin_max_ns = 0;
  /* More waits than A0_SPIN_PROBE_EVERY: not even a probe spins; quick
   * wake-ups teach it nothing either. A 50 us wait whose deadline passes
   * before it gets to sleep (the thread preempted: a loaded machine, a
   * sanitizer) returns without sleeping, so the loop's sleeps are at most
   * one a wait, not exactly. */
  for (unsigned i = 0; i < A0_SPIN_PROBE_EVERY + 10; i++) wait_once(&t, 0, 50);
  CHECK(t.spins == 0);
  CHECK(t.sleeps >= 1 && t.sleeps <= A0_SPIN_PROBE_EVERY + 10);
  /* Woken 20 ms after it began (as in test_a_late_wake_leaves_the_waiter_asleep): it slept. */
  uint64_t sleeps = t.sleeps;
  CHECK_ERR(wait_once(&t, 20000, 5u * 1000 * 1000), A0_OK);
  CHECK(t.spins == 0);
  CHECK(t.sleeps == sleeps + 1);
  free(base);
}

int main(void) {
  test_a_quick_wake_refills_the_budget();
  test_a_late_wake_leaves_the_waiter_asleep();
  test_spin_max_zero_never_spins();
  printf("test_spin: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
