/* a0_spin.h — the spin before a sleep on the notify word, internal to the
 * core (a0_transport.c's a0_transport_wait_change; code in a0_spin.c). */
#ifndef A0_SPIN_H
#define A0_SPIN_H

#include <stdbool.h>
#include <stdint.h>

#include "a0_transport.h"

/* CLOCK_MONOTONIC now, in ns. */
uint64_t a0_spin_now_ns(void);

/* Spins per t's policy (t->spin_adaptive, t->spin, t->spin_max_ns), at most
 * cap_ns after `start` (when the wait began): true as soon as the word moved
 * from `seen`, false when the spin gave up (or did not spin) and the caller
 * should sleep. Counts t->spins, adapts the budget. */
bool a0_spin_before_sleep(a0_transport_t* t, const uint32_t* word, uint32_t seen, uint64_t start,
                          uint64_t cap_ns);

/* After a sleep of the wait that began at `start` ended with a wake-up: what
 * it teaches the adaptive budget (a wake soon enough counts as a hit). */
void a0_spin_after_wake(a0_transport_t* t, uint64_t start);

#endif
