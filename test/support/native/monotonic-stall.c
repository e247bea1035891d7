/*
 * monotonic-stall: an LD_PRELOAD shim that makes the monotonic clocks of a process stand still
 * while a control file exists, and run on from where they stopped once it is gone, while
 * CLOCK_REALTIME runs on untouched — what a VM pause does to a guest's clocks (CLOCK_MONOTONIC does
 * not count the pause; the wall clock is set right after resume). Node reads both
 * `performance.now()` and its timers' loop time through libuv's uv__hrtime, which calls libc's
 * clock_gettime(CLOCK_MONOTONIC or CLOCK_MONOTONIC_COARSE): interposing clock_gettime catches them.
 *
 * The control file is named by the FP_MONOTONIC_STALL_FILE environment variable. Built by
 * test/support/monotonic-stall.ts; for tests only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
static clock_gettime_fn real_clock_gettime;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* Per clock id: the stall time already taken out (ns), when the current stall began (ns), stalled. */
static long long offset_ns[16], stall_start_ns[16];
static int stalled[16];

static int is_monotonic(clockid_t id) {
  return id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE || id == CLOCK_MONOTONIC_RAW ||
         id == CLOCK_BOOTTIME;
}

int clock_gettime(clockid_t id, struct timespec *tp) {
  if (real_clock_gettime == NULL) real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
  int rc = real_clock_gettime(id, tp);
  if (rc != 0 || !is_monotonic(id) || id < 0 || id >= 16) return rc;
  const char *ctl = getenv("FP_MONOTONIC_STALL_FILE");
  int stall = ctl != NULL && access(ctl, F_OK) == 0;
  long long real = (long long)tp->tv_sec * 1000000000LL + tp->tv_nsec, out;
  pthread_mutex_lock(&mu);
  if (stall && !stalled[id]) {
    stalled[id] = 1;
    stall_start_ns[id] = real;
  } else if (!stall && stalled[id]) {
    stalled[id] = 0;
    offset_ns[id] += real - stall_start_ns[id];
  }
  out = (stalled[id] ? stall_start_ns[id] : real) - offset_ns[id];
  pthread_mutex_unlock(&mu);
  tp->tv_sec = out / 1000000000LL;
  tp->tv_nsec = out % 1000000000LL;
  return rc;
}
