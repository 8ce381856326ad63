/*
 * api_common.c — api_test's shared helpers (see api_test.h) and main, which
 * runs the one case its argument names.
 *
 * api_test — the API beyond single collectives, one case per run:
 *
 *   --group-p2p     sends and receives in groups: a ring posted in opposite
 *                   orders by odd and even ranks (in nested groups); an
 *                   all-pairs exchange issued in a rank-dependent shuffled
 *                   order; several messages between one pair (10 types,
 *                   counts 0 .. 70000) matched in issue order; send/recv to
 *                   itself; a collective mixed in; a Send/Recv pair without
 *                   a group
 *   --group-fusion  1000 in-place and out-of-place all-reduces of 4 KB in one
 *                   group; 100 all-gathers of different counts; calls reading
 *                   an earlier call's output give the sequential result;
 *                   different collectives/types/ops in one group; prints
 *                   (never checks) timings of the fused group
 *   --streams       two communicators, one stream each: ordering that
 *                   deadlocks unless the streams progress at once; events,
 *                   loomStreamQuery, loomStreamWaitEvent; a group queued on a
 *                   stream; an error on a stream surfaces in
 *                   loomStreamSynchronize and loomCommGetAsyncError
 *   --split         loomCommSplit: colors, reversed keys, NOCOLOR, nested
 *   --initall       one process: loomCommInitAll, one thread drives all
 *                   ranks in groups, without a stream, on one shared stream
 *                   and on a stream each (run with one process)
 *   --abort         rank 1 aborts from a thread while blocked; the blocked
 *                   call returns at once, the others fail naming rank 1
 *   --mismatch      different collectives/counts/types/ops, and a group that
 *                   fuses on some ranks only (different aliasing):
 *                   loomInvalidUsage naming both calls on every rank, at that
 *                   call; a send/recv size mismatch: at that call or the next
 *   --mismatch-root, --mismatch-root-big
 *                   broadcasts with different roots (12-element tree, 4 MB
 *                   chain): loomInvalidUsage naming both calls on every rank,
 *                   at that call or, for a rank whose part was done, at its
 *                   next call
 *   --bad-args      invalid arguments of the newer calls: loomInvalidArgument
 *                   with a message, nothing moved
 *   --any-source    loomRecvAny (api_anysource.c)
 *   --straggler     a late rank named by the others' warnings (api_straggler.c)
 * Every rank prints "rank R: <case> ok" when the case passed.
 */
#include "api_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int rank, nranks;

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (p == NULL)
    FAIL("out of memory (%zu bytes)", bytes);
  return p;
}

loomComm_t world_init(int timeout_ms) { return rankcheck_init_comm(nranks, timeout_ms); }

/* A communicator over the same ranks, in the same order. */
loomComm_t dup_comm(loomComm_t parent, int timeout_ms, const char *name) {
  loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
  cfg.timeout_ms = timeout_ms;
  cfg.commName = name;
  loomComm_t c = NULL;
  CHECK_LOOM(loomCommSplit(parent, 0, rank, &c, &cfg));
  if (c == NULL)
    FAIL("loomCommSplit(color 0) gave no communicator");
  return c;
}

void close_comm(loomComm_t c) {
  CHECK_LOOM(loomCommFinalize(c));
  CHECK_LOOM(loomCommDestroy(c));
}

int main(int argc, char **argv) {
  loomLaunchInfo_t li;
  if (loomGetLaunchInfo(&li) != loomSuccess) {
    fprintf(stderr, "api_test: %s\n", loomGetLastError(NULL));
    return 2;
  }
  rank = li.rank;
  nranks = li.nranks;
  setvbuf(stdout, NULL, _IOLBF, 0);
  static const struct {
    const char *flag;
    void (*fn)(void);
  } cases[] = {{"--group-p2p", group_p2p}, {"--group-fusion", group_fusion},
               {"--streams", streams},     {"--split", split},
               {"--initall", initall},     {"--abort", abort_case},
               {"--mismatch", mismatch_calls},
               {"--mismatch-root", mismatch_root}, {"--mismatch-root-big", mismatch_root_big},
               {"--mismatch-matrix", mismatch_matrix},
               {"--bad-args", bad_args}, {"--any-source", any_source},
               {"--straggler", straggler}};
  for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof cases[0]; i++)
    if (strcmp(argv[1], cases[i].flag) == 0) {
      cases[i].fn();
      return 0;
    }
  fprintf(stderr, "usage: api_test --group-p2p | --group-fusion | --streams | --split | "
                  "--initall | --abort | --mismatch | --mismatch-root | --mismatch-root-big | "
                  "--mismatch-matrix | "
                  "--bad-args | --any-source | --straggler\n");
  return 2;
}
