/* What every C API test shares: CHECK, which prints one line per failed check and counts it
 * in g_failures (a test exits 1 if any failed), and a monotonic clock for hang guards (never
 * for assertions on time). Include after defining _POSIX_C_SOURCE. */
#ifndef TERN_TESTS_CAPI_CHECK_H
#define TERN_TESTS_CAPI_CHECK_H

#include <stdio.h>
#include <time.h>

static int g_failures;

#define CHECK(cond, ...)                                     \
  do {                                                       \
    if (!(cond)) {                                           \
      ++g_failures;                                          \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                   \
      printf("\n");                                          \
    }                                                        \
  } while (0)

static inline double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
