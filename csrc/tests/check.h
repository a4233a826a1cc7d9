/* The C tests' checks: CHECK(cond) and CHECK_ERR(expr, code) count a pass or
 * print the failing expression with its file, line and function, and go on,
 * so one run reports every failure; each test's main prints the counts. */
#ifndef A0_TESTS_CHECK_H
#define A0_TESTS_CHECK_H

#include <stdio.h>

#include "a0_err.h"

static int passed, failed;

#define CHECK(cond)                                                           \
  do {                                                                        \
    if (cond) {                                                               \
      passed++;                                                               \
    } else {                                                                  \
      failed++;                                                               \
      fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, \
              __func__, #cond);                                               \
    }                                                                         \
  } while (0)

#define CHECK_ERR(expr, code)                                                        \
  do {                                                                               \
    a0_err_t got_ = (expr);                                                          \
    if (got_ == (code)) {                                                            \
      passed++;                                                                      \
    } else {                                                                         \
      failed++;                                                                      \
      fprintf(stderr, "%s:%d: %s: %s returned %d (%s), expected %s\n", __FILE__,     \
              __LINE__, __func__, #expr, (int)got_, a0_strerror(got_), #code);       \
    }                                                                                \
  } while (0)

#endif
