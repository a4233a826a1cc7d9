/* a0_deadman.c — liveness by robust-lock ownership (see a0_deadman.h). */
#include "a0_deadman.h"

#include <unistd.h>

#include "a0_arena.h"
#include "a0_sync.h"

#define DM_HDR(base) ((a0_arena_hdr_t*)(base))

static void dm_bump(a0_arena_hdr_t* h) {
  atomic_fetch_add(A0_ATOMIC_U32(&h->deadman_notify), 1);
  a0_futex_wake_all(&h->deadman_notify);
}

static void dm_taken(a0_arena_hdr_t* h) {
  atomic_store(A0_ATOMIC_U32(&h->deadman_pid), (uint32_t)getpid());
  dm_bump(h);
}

a0_err_t a0_deadman_take(void* base, const struct timespec* deadline) {
  a0_arena_hdr_t* h = DM_HDR(base);
  int recovered;
  a0_err_t err = a0_robust_lock(&h->deadman.mutex, deadline, &recovered);
  if (err) return err;
  dm_taken(h);
  return A0_OK;
}

/* A holder that has the lock but has not yet written its pid, or a
 * wait_released() caller passing through the lock: both hold it for
 * nanoseconds. Observers wait that long before answering "taken". */
#define A0_DM_TRANSIENT_SPINS 4096

/* The robust-mutex futex word: the owner's TID, plus FUTEX_OWNER_DIED once
 * the kernel has found the owner dead (the kernel's robust-futex ABI, see
 * linux/futex.h). Reading it observes the lock without taking it, so
 * observers never make a taker's try_take() fail. */
static uint32_t dm_word(const a0_arena_hdr_t* h) {
  return atomic_load((_Atomic uint32_t*)&h->deadman.mutex.__data.__lock);
}

static bool dm_word_taken(uint32_t word) {
  return (word & FUTEX_TID_MASK) != 0 && (word & FUTEX_OWNER_DIED) == 0;
}

a0_err_t a0_deadman_try_take(void* base) {
  a0_arena_hdr_t* h = DM_HDR(base);
  int recovered;
  a0_err_t err = a0_robust_trylock(&h->deadman.mutex, &recovered);
  if (err == A0_ERR_BUSY && atomic_load(A0_ATOMIC_U32(&h->deadman_pid)) == 0) {
    /* Held without a pid: a transient holder (see above). Wait it out. */
    struct timespec soon = a0_deadline_after_ns(2000000);
    err = a0_robust_lock(&h->deadman.mutex, &soon, &recovered);
    if (err == A0_ERR_TIMEOUT) err = A0_ERR_BUSY;
  }
  if (err) return err;
  dm_taken(h);
  return A0_OK;
}

a0_err_t a0_deadman_release(void* base) {
  a0_arena_hdr_t* h = DM_HDR(base);
  bool taken, mine;
  uint32_t pid;
  a0_err_t err = a0_deadman_state(base, &taken, &mine, &pid);
  if (err) return err;
  if (!mine) return A0_ERR_NOT_OWNER;
  atomic_store(A0_ATOMIC_U32(&h->deadman_pid), 0);
  int rc = pthread_mutex_unlock(&h->deadman.mutex);
  if (rc) return A0_ERR_NOT_OWNER;
  dm_bump(h);
  return A0_OK;
}

a0_err_t a0_deadman_state(void* base, bool* taken, bool* mine, uint32_t* pid) {
  a0_arena_hdr_t* h = DM_HDR(base);
  uint32_t word = dm_word(h), owner_pid = 0;
  for (int i = 0; i < A0_DM_TRANSIENT_SPINS && dm_word_taken(word); i++) {
    owner_pid = atomic_load(A0_ATOMIC_U32(&h->deadman_pid));
    if (owner_pid != 0) break;
    a0_cpu_relax();
    word = dm_word(h);
  }
  *taken = dm_word_taken(word);
  *mine = *taken && (word & FUTEX_TID_MASK) == (uint32_t)gettid();
  *pid = *taken ? atomic_load(A0_ATOMIC_U32(&h->deadman_pid)) : 0;
  return A0_OK;
}

a0_err_t a0_deadman_wait_taken(void* base, const struct timespec* deadline) {
  a0_arena_hdr_t* h = DM_HDR(base);
  for (;;) {
    uint32_t seen = atomic_load(A0_ATOMIC_U32(&h->deadman_notify));
    bool taken, mine;
    uint32_t pid;
    a0_err_t err = a0_deadman_state(base, &taken, &mine, &pid);
    if (err) return err;
    if (taken) return A0_OK;
    int rc = a0_futex_wait(&h->deadman_notify, seen, deadline);
    if (rc == ETIMEDOUT || rc == EINTR) {
      err = a0_deadman_state(base, &taken, &mine, &pid);
      if (err) return err;
      return taken ? A0_OK : rc == EINTR ? A0_ERR_INTERRUPTED : A0_ERR_TIMEOUT;
    }
  }
}

a0_err_t a0_deadman_wait_released(void* base, const struct timespec* deadline) {
  a0_arena_hdr_t* h = DM_HDR(base);
  int recovered;
  a0_err_t err = a0_robust_lock(&h->deadman.mutex, deadline, &recovered);
  if (err) return err;
  atomic_store(A0_ATOMIC_U32(&h->deadman_pid), 0);
  pthread_mutex_unlock(&h->deadman.mutex);
  if (recovered) dm_bump(h);
  return A0_OK;
}
