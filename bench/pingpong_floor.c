/* pingpong_floor.c — the C floors under bench/transport.py's ping-pong.
 *
 *   pingpong_floor MODE N SPIN PARENT_CPU CHILD_CPU
 *     MODE  futex      raw futex ping-pong on two words (the wake-up floor)
 *           transport  a0py transports in C: lock, alloc, memcpy 64 B,
 *                      commit_unlock / lock, wait(has_next), next, frame
 *     N     timed round trips (2000 more are run first, untimed)
 *     SPIN  a0_transport_t.spin (transport mode only)
 *     CPU   -1 leaves placement to the scheduler
 *
 * Prints one line: p50_us p99_us mean_us. Built and run by
 * `bench/transport.py --only floors` (needs a C compiler). */
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "a0_transport.h"

#define WARMUP 2000
#define MSG 64
#define ARENA (1u << 20)

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof s, &s);
}

/* ---- raw futex: each side bumps the other's word and sleeps on its own. */

static void futex_wait_change(_Atomic uint32_t* w, uint32_t old) {
  while (atomic_load(w) == old) syscall(SYS_futex, w, FUTEX_WAIT, old, NULL, NULL, 0);
}

static void futex_bump(_Atomic uint32_t* w) {
  atomic_fetch_add(w, 1);
  syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* ---- transport: the same calls Transport.write / read_next make. */

static void tr_send(a0_transport_t* t, const uint8_t* msg) {
  a0_locked_t lk;
  uint8_t* d;
  a0_transport_lock(t, &lk);
  a0_transport_alloc(lk, MSG, &d);
  memcpy(d, msg, MSG);
  a0_transport_commit_unlock(lk);
}

static void tr_recv(a0_transport_t* t, uint8_t* out) {
  a0_locked_t lk;
  a0_frame_t f;
  a0_transport_lock(t, &lk);
  a0_transport_wait(lk, a0_pred_has_next, NULL, NULL);
  a0_transport_next(lk);
  a0_transport_frame(lk, &f);
  memcpy(out, f.data, f.size < MSG ? f.size : MSG);
  a0_transport_unlock(lk);
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s futex|transport N SPIN PARENT_CPU CHILD_CPU\n", argv[0]);
    return 2;
  }
  int transport = strcmp(argv[1], "transport") == 0;
  int n = atoi(argv[2]);
  unsigned spin = (unsigned)atoi(argv[3]);
  int parent_cpu = atoi(argv[4]), child_cpu = atoi(argv[5]);
  int total = n + WARMUP;
  uint8_t* a = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  uint8_t* b = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (a == MAP_FAILED || b == MAP_FAILED || n <= 0) return 1;
  if (transport && (a0_arena_init(a, ARENA) || a0_arena_init(b, ARENA))) return 1;
  _Atomic uint32_t* ping = (_Atomic uint32_t*)a;
  _Atomic uint32_t* pong = (_Atomic uint32_t*)b;
  uint8_t msg[MSG] = {0}, in[MSG];

  pid_t child = fork();
  if (child == 0) {
    pin(child_cpu);
    a0_transport_t rx, tx;
    if (transport) {
      a0_transport_init(&rx, a, ARENA);
      a0_transport_init(&tx, b, ARENA);
      rx.spin = spin;
    }
    for (int i = 0; i < total; i++) {
      if (transport) {
        tr_recv(&rx, in);
        tr_send(&tx, in);
      } else {
        futex_wait_change(ping, (uint32_t)i);
        futex_bump(pong);
      }
    }
    _exit(0);
  }
  pin(parent_cpu);
  a0_transport_t tx, rx;
  if (transport) {
    a0_transport_init(&tx, a, ARENA);
    a0_transport_init(&rx, b, ARENA);
    rx.spin = spin;
  }
  uint64_t* lat = malloc(sizeof *lat * (size_t)n);
  if (!lat) return 1;
  for (int i = 0; i < total; i++) {
    uint64_t t0 = now_ns();
    if (transport) {
      tr_send(&tx, msg);
      tr_recv(&rx, in);
    } else {
      futex_bump(ping);
      futex_wait_change(pong, (uint32_t)i);
    }
    if (i >= WARMUP) lat[i - WARMUP] = now_ns() - t0;
  }
  waitpid(child, NULL, 0);
  qsort(lat, (size_t)n, sizeof *lat, cmp_u64);
  double mean = 0;
  for (int i = 0; i < n; i++) mean += (double)lat[i];
  printf("%.3f %.3f %.3f\n", (double)lat[n / 2] / 1e3, (double)lat[(size_t)n * 99 / 100] / 1e3,
         mean / n / 1e3);
  free(lat);
  return 0;
}
