/* breakerbox tests: an LD_PRELOAD shim that moves a redis-server's wall clock.
 *
 * gettimeofday() and clock_gettime(CLOCK_REALTIME*) return the real time plus the offset
 * (microseconds, may be negative) read from the file named by BB_TIME_OFFSET_FILE on every
 * call, so a test steps the server's clock (what Redis TIME and the scripts see) by
 * rewriting that file. Monotonic clocks are left alone. Compiled by the tests themselves
 * (tests/support/time_shift.rs). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
static long long offset_us(void) {
  const char *path = getenv("BB_TIME_OFFSET_FILE");
  if (!path) return 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  char buf[32];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  return atoll(buf);
}
int gettimeofday(struct timeval *tv, void *tz) {
  static int (*real)(struct timeval *, void *);
  if (!real) real = (int (*)(struct timeval *, void *))dlsym(RTLD_NEXT, "gettimeofday");
  int r = real(tv, tz);
  if (r == 0 && tv) {
    long long us = (long long)tv->tv_sec * 1000000LL + tv->tv_usec + offset_us();
    tv->tv_sec = us / 1000000LL;
    tv->tv_usec = us % 1000000LL;
  }
  return r;
}
int clock_gettime(clockid_t id, struct timespec *ts) {
  static int (*real)(clockid_t, struct timespec *);
  if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
  int r = real(id, ts);
  if (r == 0 && ts && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
    long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_us() * 1000LL;
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
  }
  return r;
}
