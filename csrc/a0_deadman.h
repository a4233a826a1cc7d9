/* a0_deadman.h — liveness by lock ownership.
 *
 * A deadman is a robust, process-shared mutex in the arena header that one
 * thread takes and holds for as long as its process lives. When the process
 * exits or is killed, the kernel's robust-futex cleanup marks the mutex
 * owner-dead at once, so every other process can tell "alive" from "gone"
 * without timeouts or heartbeats. The deadman must be taken by a thread that
 * lives as long as the process (the main thread in Python): a robust mutex
 * is released when its owning *thread* exits. */
#ifndef A0_DEADMAN_H
#define A0_DEADMAN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "a0_err.h"

/* deadline: absolute CLOCK_MONOTONIC, NULL for none. */
a0_err_t a0_deadman_take(void* arena_base, const struct timespec* deadline);
a0_err_t a0_deadman_try_take(void* arena_base); /* A0_ERR_BUSY if held */
a0_err_t a0_deadman_release(void* arena_base);   /* A0_ERR_NOT_OWNER if not ours */
/* *taken: some live thread holds it (this one included); *pid: its pid or 0.
 * *mine: this thread holds it. Reads the lock's futex word without taking
 * the lock, so observing never disturbs a taker. */
a0_err_t a0_deadman_state(void* arena_base, bool* taken, bool* mine, uint32_t* pid);
/* A0_ERR_INTERRUPTED if a signal handler ran while asleep (call again). */
a0_err_t a0_deadman_wait_taken(void* arena_base, const struct timespec* deadline);
a0_err_t a0_deadman_wait_released(void* arena_base, const struct timespec* deadline);

#endif /* A0_DEADMAN_H */
