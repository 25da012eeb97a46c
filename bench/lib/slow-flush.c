/*
 * Preloaded into a benchmark's own PostgreSQL (bench/lib/slow-flush.ts): each fdatasync, the call PostgreSQL
 * flushes its WAL with on Linux (wal_sync_method's default), returns SLOW_FLUSH_US microseconds later, as on a
 * disk slow to flush or with a synchronous standby. The process sleeps meanwhile: it costs no CPU, as such a
 * wait does not.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

static int (*real_fdatasync)(int);
static long delay_us = -1;

int fdatasync(int fd) {
  if (!real_fdatasync) real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  if (delay_us < 0) {
    const char *set = getenv("SLOW_FLUSH_US");
    delay_us = set ? atol(set) : 0;
  }
  int result = real_fdatasync(fd);
  if (delay_us > 0) {
    struct timespec wait = {delay_us / 1000000, (delay_us % 1000000) * 1000};
    nanosleep(&wait, NULL);
  }
  return result;
}
