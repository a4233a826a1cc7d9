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

a0_err_t a0_deadman_try_take(void* base) {
  a0_arena_hdr_t* h = DM_HDR(base);
  int recovered;
  a0_err_t err = a0_robust_trylock(&h->deadman.mutex, &recovered);
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
  int recovered;
  a0_err_t err = a0_robust_trylock(&h->deadman.mutex, &recovered);
  *taken = *mine = false;
  *pid = 0;
  switch (err) {
    case A0_OK: /* free (or its owner died: recovered, now free again) */
      atomic_store(A0_ATOMIC_U32(&h->deadman_pid), 0);
      pthread_mutex_unlock(&h->deadman.mutex);
      if (recovered) dm_bump(h);
      return A0_OK;
    case A0_ERR_BUSY:
      *taken = true;
      *pid = atomic_load(A0_ATOMIC_U32(&h->deadman_pid));
      return A0_OK;
    case A0_ERR_DEADLOCK: /* error-checking mutex: this thread holds it */
      *taken = *mine = true;
      *pid = (uint32_t)getpid();
      return A0_OK;
    default:
      return err;
  }
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
    if (a0_futex_wait(&h->deadman_notify, seen, deadline) == ETIMEDOUT) {
      err = a0_deadman_state(base, &taken, &mine, &pid);
      if (err) return err;
      return taken ? A0_OK : A0_ERR_TIMEOUT;
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
