/*
 * signal.c — the flight recorder on a fatal signal, only when asked
 * (LOOM_DUMP_ON_SIGNAL=1): a library must not change how its host process
 * dies unless told to (tests/ranks/test_modules.sh checks Loom catches no
 * signal by default).  The handler dumps every live recorder into
 * LOOM_TRACE_DUMP_DIR, then restores the handler that was there before and
 * raises the signal again, so the process ends as it would have.
 */
#include "trace/trace.h"

#include "core/config.h"
#include "core/log.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

#define TRACE_REGISTRY 64

static _Atomic(struct loom_trace *) registry[TRACE_REGISTRY];
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NFATAL ((int)(sizeof fatal_signals / sizeof fatal_signals[0]))
static struct sigaction previous[NFATAL];
static char dump_dir[1024];
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static volatile sig_atomic_t in_handler;

static const char *signal_reason(int sig) {
  switch (sig) {
  case SIGSEGV:
    return "signal SIGSEGV";
  case SIGBUS:
    return "signal SIGBUS";
  case SIGFPE:
    return "signal SIGFPE";
  case SIGILL:
    return "signal SIGILL";
  default:
    return "signal SIGABRT";
  }
}

static void on_fatal(int sig) {
  if (!in_handler) { /* a fault while dumping goes straight on */
    in_handler = 1;
    char path[1200];
    for (int i = 0; i < TRACE_REGISTRY; i++) {
      struct loom_trace *t = atomic_load(&registry[i]);
      if (t != NULL)
        loom_trace_dump(t, NULL, dump_dir, signal_reason(sig), "the process received a fatal signal",
                        path, sizeof path);
    }
  }
  for (int i = 0; i < NFATAL; i++)
    if (fatal_signals[i] == sig)
      sigaction(sig, &previous[i], NULL);
  raise(sig);
}

static void install(void) {
  const char *dir = loom_param_str(LOOM_PARAM_TRACE_DUMP_DIR);
  if (dir == NULL || dir[0] == '\0') {
    LOOM_WARN(LOOM_LOG_INIT, "LOOM_DUMP_ON_SIGNAL=1 needs LOOM_TRACE_DUMP_DIR (where the dumps "
                             "go); no handler installed");
    return;
  }
  if (strlen(dir) >= sizeof dump_dir) {
    LOOM_WARN(LOOM_LOG_INIT, "LOOM_TRACE_DUMP_DIR is longer than %zu bytes; no signal handler "
                             "installed", sizeof dump_dir - 1);
    return;
  }
  memcpy(dump_dir, dir, strlen(dir) + 1);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fatal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_NODEFER;
  for (int i = 0; i < NFATAL; i++)
    sigaction(fatal_signals[i], &sa, &previous[i]);
  LOOM_INFO(LOOM_LOG_INIT, "flight recorder: dumps into %s on SIGSEGV, SIGBUS, SIGFPE, SIGILL "
                           "and SIGABRT", dump_dir);
}

void loom_trace_register(struct loom_trace *t) {
  if (loom_param_int(LOOM_PARAM_DUMP_ON_SIGNAL) == 0)
    return;
  pthread_once(&install_once, install);
  for (int i = 0; i < TRACE_REGISTRY; i++) {
    struct loom_trace *none = NULL;
    if (atomic_compare_exchange_strong(&registry[i], &none, t))
      return;
  }
  LOOM_WARN(LOOM_LOG_INIT, "flight recorder: more than %d communicators; this one is not "
                           "dumped on a fatal signal", TRACE_REGISTRY);
}

void loom_trace_unregister(struct loom_trace *t) {
  for (int i = 0; i < TRACE_REGISTRY; i++) {
    struct loom_trace *mine = t;
    if (atomic_compare_exchange_strong(&registry[i], &mine, NULL))
      return;
  }
}
