/* a0_spin.c — how a waiter spins before it sleeps on an arena's notify word
 * (a0_transport_wait_change): the adaptive budget (the default) or a fixed
 * count of polls, the long spin of a transport whose spin_max_ns is past
 * A0_SPIN_MAX_NS (only with CPUs to spare), and what a wake-up teaches the
 * budget. Policy in a0_transport.h ("Spinning before sleeping"); per
 * transport state in a0_transport_t (spin_*), one thread per transport. */
#include "a0_spin.h"

#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "a0_sync.h"

uint64_t a0_spin_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Online CPUs: with one, a spinning waiter only delays the writer it waits
 * for. (Not this process's affinity: a process pinned to a core of its own
 * is where spinning pays most; two processes pinned to one core are handled
 * by the adaptive budget, whose spins there never hit.) */
static long online_cpus(void) {
  static _Atomic long cached;
  long n = atomic_load_explicit(&cached, memory_order_relaxed);
  if (!n) {
    n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 2; /* unknown: assume spinning may pay */
    atomic_store_explicit(&cached, n, memory_order_relaxed);
  }
  return n;
}

/* Busy-polls the word; true if it moved within the budget. */
static bool spin_fixed(const uint32_t* word, uint32_t seen, uint32_t iterations) {
  for (uint32_t i = 0; i < iterations; i++) {
    if (atomic_load_explicit((_Atomic uint32_t*)word, memory_order_relaxed) != seen) return true;
    a0_cpu_relax();
  }
  return false;
}

/* Polls the word until budget_ns after `start`. After yield_after_ns it
 * also yields the CPU between polls: if the writer it waits for is runnable
 * on this very core, it gets to run (then a shared-core round trip costs two
 * context switches instead of two futex wake-ups); if nothing else is, the
 * yield returns at once. *took_ns: when the hit came, after `start`;
 * *shared: whether it came after a yield that took long enough for another
 * thread to have run in it. */
#define A0_SPIN_YIELD_AFTER_NS 1000u
#define A0_SPIN_SHARED_NS 2000u
static bool spin_for(const uint32_t* word, uint32_t seen, uint64_t start, uint64_t budget_ns,
                     uint64_t yield_after_ns, uint64_t* took_ns, bool* shared) {
  uint64_t now = a0_spin_now_ns();
  bool long_yield = *shared;
  while (now - start < budget_ns) {
    for (int i = 0; i < 16; i++) {
      if (atomic_load_explicit((_Atomic uint32_t*)word, memory_order_relaxed) != seen) {
        *took_ns = a0_spin_now_ns() - start;
        *shared = long_yield;
        return true;
      }
      a0_cpu_relax();
    }
    now = a0_spin_now_ns();
    if (now - start >= yield_after_ns) {
      sched_yield();
      uint64_t after = a0_spin_now_ns();
      long_yield = after - now >= A0_SPIN_SHARED_NS;
      now = after;
    }
  }
  *shared = long_yield;
  return false;
}

/* Whether every runnable task of the machine has a CPU (the running count
 * of /proc/loadavg, this thread included, is at most the online CPUs): then
 * a spin takes time from nobody. False when it cannot be read. The file
 * stays open (pread at 0 makes the kernel write it afresh). */
static bool cpus_to_spare(void) {
  static _Atomic int fd_cached = -1;
  int fd = atomic_load_explicit(&fd_cached, memory_order_relaxed);
  if (fd < 0) {
    fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    int none = -1;
    if (!atomic_compare_exchange_strong(&fd_cached, &none, fd)) {
      close(fd);
      fd = none;
    }
  }
  char buf[128];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) { /* e.g. the process closed it: open it afresh next time */
    atomic_compare_exchange_strong(&fd_cached, &fd, -1);
    return false;
  }
  buf[n] = 0;
  /* "0.50 0.40 0.30 R/T PID": the fourth field */
  const char* p = buf;
  for (int field = 0; field < 3; field++) {
    p = strchr(p, ' ');
    if (!p) return false;
    p++;
  }
  char* end;
  long running = strtol(p, &end, 10);
  if (end == p || *end != '/') return false;
  return running <= online_cpus();
}

/* Spins until `budget` ns after `start`: up to A0_SPIN_MAX_NS whatever the
 * load; the rest only if cpus_to_spare() says then that nobody waits for a
 * CPU. Asked once a wait, not again during the spin: the peer this waiter
 * waits for becomes runnable just before it writes, and a spin that stopped
 * when it saw that would stop exactly when it was about to pay. A spin that
 * goes on while the machine fills up is bounded by spin_max_ns and yields
 * between polls (spin_for), so a task that wants this core gets it. */
static bool spin_long(a0_transport_t* t, const uint32_t* word, uint32_t seen, uint64_t start,
                      uint64_t budget, uint64_t yield_after, uint64_t* took, bool* shared) {
  uint64_t first = budget < A0_SPIN_MAX_NS ? budget : A0_SPIN_MAX_NS;
  if (spin_for(word, seen, start, first, yield_after, took, shared)) return true;
  if (first >= budget) return false;
  t->spin_refused = !cpus_to_spare();
  if (t->spin_refused) return false;
  return spin_for(word, seen, start, budget, yield_after, took, shared);
}

/* The adaptive budget learns from a wait that the word moved `took` ns after
 * it began: at least twice that (START to the transport's max). */
static void spin_hit(a0_transport_t* t, uint64_t took) {
  uint64_t want = 2 * took > A0_SPIN_START_NS ? 2 * took : A0_SPIN_START_NS;
  if (want > t->spin_max_ns) want = t->spin_max_ns;
  if (want > t->spin_ns) t->spin_ns = (uint32_t)want;
  t->spin_probe = 0;
}

/* The adaptive spin. A hit (the word moved while spinning) keeps the
 * budget at least twice what the hit took (START to MAX); a miss takes a
 * quarter off it, and below MIN it is 0. From then on only every
 * A0_SPIN_PROBE_EVERY-th wait spins, for MAX: long enough to outlast a
 * peer's futex wake-up, which is what breaks the equilibrium of two
 * processes that both sleep because the other one does (each side's probe
 * then finds the other answering fast, and both stay spinning while it
 * pays). Probes are under 1 % of waits, so when spinning never pays (both
 * processes on one core) they stay out of the p99 and cost about
 * MAX / PROBE_EVERY per wait. Misses decay slowly because on a busy machine
 * a peer that usually answers within microseconds is sometimes preempted.
 * A sleep that ends within MAX of the wait's start is a hit too
 * (a0_transport_wait_change): without that, one slow stretch of a peer (a
 * dozen misses in a row) put the waiter to sleep at once for the next
 * PROBE_EVERY waits, each a futex wake-up, whatever the peer did meanwhile:
 * a ping-pong's p99 was that stretch. MAX is t->spin_max_ns. */
static bool spin_adaptive(a0_transport_t* t, const uint32_t* word, uint32_t seen, uint64_t start,
                          uint64_t cap_ns) {
  if (online_cpus() < 2 || t->spin_max_ns == 0) return false;
  uint64_t budget = t->spin_ns < t->spin_max_ns ? t->spin_ns : t->spin_max_ns;
  if (budget == 0) {
    if (++t->spin_probe < A0_SPIN_PROBE_EVERY) return false;
    t->spin_probe = 0;
    budget = t->spin_max_ns;
  }
  t->spins++;
  /* A peer that answered last time while this thread yielded shares its
   * core: polling before yielding would only delay it. */
  uint64_t yield_after = t->spin_yield ? 0 : A0_SPIN_YIELD_AFTER_NS;
  bool shared = false;
  uint64_t took = 0;
  if (budget > cap_ns) /* the deadline's, not a lesson */
    return spin_long(t, word, seen, start, cap_ns, yield_after, &took, &shared);
  if (spin_long(t, word, seen, start, budget, yield_after, &took, &shared)) {
    t->spin_yield = shared;
    spin_hit(t, took);
    return true;
  }
  uint64_t left = t->spin_ns - t->spin_ns / 4;
  t->spin_ns = left < A0_SPIN_MIN_NS ? 0 : (uint32_t)left;
  return false;
}

bool a0_spin_before_sleep(a0_transport_t* t, const uint32_t* word, uint32_t seen, uint64_t start,
                          uint64_t cap_ns) {
  if (t->spin_adaptive) return spin_adaptive(t, word, seen, start, cap_ns);
  if (t->spin) t->spins++;
  return spin_fixed(word, seen, t->spin);
}

void a0_spin_after_wake(a0_transport_t* t, uint64_t start) {
  if (!t->spin_adaptive || online_cpus() < 2) return;
  /* Woken within what a spin of MAX would have waited: a spin would have
   * caught it, so the budget is a hit's (one slow wake does not leave the
   * waiter sleeping at once for the next PROBE_EVERY waits). Later
   * wake-ups, e.g. from a writer that is idle, leave it as it is; so do
   * those past A0_SPIN_MAX_NS while the last long spin found no CPU to
   * spare (a spin would have stopped there): on a busy machine a long
   * spin_max costs what the default does, and a probe finds out when
   * CPUs are free again. */
  uint64_t took = a0_spin_now_ns() - start;
  uint64_t within = t->spin_refused && t->spin_max_ns > A0_SPIN_MAX_NS ? A0_SPIN_MAX_NS : t->spin_max_ns;
  if (took <= within) spin_hit(t, took);
}
