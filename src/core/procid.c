/*
 * procid.c — this process's PID namespace (procid.h).
 */
#include "core/procid.h"

#include <pthread.h>
#include <sys/stat.h>

static uint32_t pid_ns;
static pthread_once_t pid_ns_once = PTHREAD_ONCE_INIT;

static void read_pid_namespace(void) {
  struct stat st;
  pid_ns = stat("/proc/self/ns/pid", &st) == 0 ? (uint32_t)st.st_ino : 0;
}

uint32_t loom_pid_namespace(void) {
  pthread_once(&pid_ns_once, read_pid_namespace);
  return pid_ns;
}

int loom_same_pid_namespace(uint32_t theirs) {
  uint32_t mine = loom_pid_namespace();
  return mine != 0 && theirs == mine;
}
