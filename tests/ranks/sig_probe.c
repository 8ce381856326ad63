/*
 * sig_probe.c — for tests/ranks/test_modules.sh: a program that links only
 * the shared libloom, as users' programs do.  It runs loomGetVersion and
 * one all-reduce (one rank, or LOOM_NRANKS ranks under loomrun), prints
 * the signals the process catches (SigCgt of /proc/self/status), then
 * with "term" or "segv" sends itself that signal: a library that installs
 * handlers for them (libinfinipath, through libfabric's psm provider,
 * exits 1 from its handlers) would change how the process ends.  It also
 * names the RDMA libraries mapped into the process (none, unless a
 * transport module was loaded).
 *
 *   sig_probe [print|term|segv]
 *
 * Prints "sig_probe: asan yes" when built with AddressSanitizer, whose own
 * handlers show in SigCgt.  Exit 0 after "print", 1 on a failed call.
 */
#include "loom.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define PROBE_ASAN "yes"
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PROBE_ASAN "yes"
#endif
#endif
#ifndef PROBE_ASAN
#define PROBE_ASAN "no"
#endif

static int env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : fallback;
}

static int fail(const char *call, loomResult_t res) {
  fprintf(stderr, "sig_probe: %s: %s: %s\n", call, loomGetErrorString(res),
          loomGetLastError(NULL));
  return 1;
}

static void print_sigcgt(int rank) {
  char line[256];
  FILE *f = fopen("/proc/self/status", "r");
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "SigCgt:", 7) == 0)
      printf("sig_probe: rank %d: %s", rank, line);
  if (f != NULL)
    fclose(f);
}

/* Which RDMA libraries this process has mapped (/proc/self/maps). */
static void print_rdma_maps(int rank) {
  static const char *const libs[] = {"libfabric", "libibverbs", "librdmacm", "libinfinipath",
                                     "libpsm"};
  int seen[sizeof libs / sizeof libs[0]] = {0}, any = 0;
  char line[1024];
  FILE *f = fopen("/proc/self/maps", "r");
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
      seen[i] |= strstr(line, libs[i]) != NULL;
  if (f != NULL)
    fclose(f);
  printf("sig_probe: rank %d: RDMA libraries mapped:", rank);
  for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
    if (seen[i]) {
      printf(" %s", libs[i]);
      any = 1;
    }
  printf("%s\n", any ? "" : " none");
}

/* Ends this process by sig, as its default action does. */
static int die_by(int sig) {
  fflush(NULL);
  kill(getpid(), sig);
  sleep(10); /* a handler that returned: report it */
  printf("sig_probe: still alive 10 s after signal %d\n", sig);
  return 3;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "print";
  int version = 0, nranks = env_int("LOOM_NRANKS", 1), rank = env_int("LOOM_RANK", 0);
  loomResult_t res = loomGetVersion(&version);
  if (res != loomSuccess)
    return fail("loomGetVersion", res);
  loomUniqueId id;
  loomComm_t comm;
  if ((res = loomGetUniqueId(&id)) != loomSuccess)
    return fail("loomGetUniqueId", res);
  if ((res = loomCommInitRank(&comm, nranks, id, rank)) != loomSuccess)
    return fail("loomCommInitRank", res);
  float mine = (float)(rank + 1), sum = 0;
  res = loomAllReduce(&mine, &sum, 1, loomFloat32, loomSum, comm, NULL);
  if (res != loomSuccess)
    return fail("loomAllReduce", res);
  float want = (float)nranks * (float)(nranks + 1) / 2;
  printf("sig_probe: rank %d: version %d, allreduce %g (expected %g)%s\n", rank, version,
         (double)sum, (double)want, sum == want ? "" : " WRONG");
  printf("sig_probe: asan %s\n", PROBE_ASAN);
  print_sigcgt(rank);
  print_rdma_maps(rank);
  loomCommDestroy(comm);
  if (strcmp(mode, "term") == 0)
    return die_by(SIGTERM);
  if (strcmp(mode, "segv") == 0)
    return die_by(SIGSEGV);
  return sum == want ? 0 : 1;
}
