/*
 * trace_test — the flight recorder through the public API
 * (test_trace.sh).  Every rank runs a fixed prologue of calls, then a
 * scenario; dumps land in LOOM_TRACE_DUMP_DIR, on error by themselves and
 * on demand through loomCommDump.
 *
 *   trace_test record FILE   the prologue, then loomCommDump(comm, FILE.R)
 *                            and "rank R: dumped" (the script checks
 *                            every entry).  The prologue: all-reduce
 *                            (float32 sum, 1024), broadcast (int32, 256,
 *                            root 1), a group of two all-reduces of 8
 *                            floats (fused), a ring send/recv of 64
 *                            bytes, a barrier, and an all-gather of 16
 *                            int64 queued on a stream.
 *   trace_test behind R      rank R stops after the prologue; the others
 *                            call one more all-reduce and time out.  R
 *                            dumps on demand once they have (its call to
 *                            loomCommDump while idle; not with
 *                            TRACE_NO_DUMP set), then every rank exits 0
 *                            having printed what it saw.
 *   trace_test die R         rank R exits mid-job (no dump); the others
 *                            fail their next all-reduce.
 *   trace_test mismatch R    rank R's next all-reduce has count 2048, the
 *                            others' 1024: every rank fails.
 *   trace_test segv R        rank R raises SIGSEGV (LOOM_DUMP_ON_SIGNAL=1
 *                            dumps it first); the others fail.
 *   trace_test args          loomCommDump's bad arguments (one rank).
 */
#include "loom.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;
#define TEST_NAME "trace_test"
#include "rankcheck.h"

static float fbuf[2048];
static int32_t ibuf[256];
static int64_t gbuf[16 * 64];

static void prologue(loomComm_t comm) {
  for (int i = 0; i < 1024; i++)
    fbuf[i] = (float)(rank + i);
  CHECK_LOOM(loomAllReduce(fbuf, fbuf, 1024, loomFloat32, loomSum, comm, NULL));
  if (fbuf[3] != (float)(nranks * 3 + nranks * (nranks - 1) / 2))
    FAIL("all-reduce gave %g", fbuf[3]);
  CHECK_LOOM(loomBroadcast(ibuf, ibuf, 256, loomInt32, 1 % nranks, comm, NULL));
  CHECK_LOOM(loomGroupStart());
  CHECK_LOOM(loomAllReduce(fbuf, fbuf, 8, loomFloat32, loomSum, comm, NULL));
  CHECK_LOOM(loomAllReduce(fbuf + 8, fbuf + 8, 8, loomFloat32, loomSum, comm, NULL));
  CHECK_LOOM(loomGroupEnd());
  char out[64] = {0}, in[64];
  CHECK_LOOM(loomGroupStart());
  CHECK_LOOM(loomSend(out, 64, loomUint8, (rank + 1) % nranks, comm, NULL));
  CHECK_LOOM(loomRecv(in, 64, loomUint8, (rank + nranks - 1) % nranks, comm, NULL));
  CHECK_LOOM(loomGroupEnd());
  CHECK_LOOM(loomBarrier(comm, NULL));
  loomStream_t s;
  CHECK_LOOM(loomStreamCreate(&s));
  int64_t mine[16];
  for (int i = 0; i < 16; i++)
    mine[i] = rank;
  CHECK_LOOM(loomAllGather(mine, gbuf, 16, loomInt64, comm, s));
  CHECK_LOOM(loomStreamSynchronize(s));
  CHECK_LOOM(loomStreamDestroy(s));
}

/* One more all-reduce, expected to fail; prints how. */
static void failing_allreduce(loomComm_t comm, size_t count) {
  loomResult_t r = loomAllReduce(fbuf, fbuf, count, loomFloat32, loomSum, comm, NULL);
  if (r == loomSuccess)
    FAIL("the all-reduce after the scenario succeeded");
  printf("rank %d: failed: %s\n", rank, loomGetErrorString(r));
}

static void args(loomComm_t comm) {
  if (loomCommDump(NULL, "/tmp/x") != loomInvalidArgument)
    FAIL("loomCommDump(NULL comm) is not loomInvalidArgument");
  unsetenv("LOOM_TRACE_DUMP_DIR");
  if (loomCommDump(comm, NULL) != loomInvalidArgument || strstr(loomGetLastError(NULL), "LOOM_TRACE_DUMP_DIR") == NULL)
    FAIL("loomCommDump(comm, NULL) without a directory: %s", loomGetLastError(NULL));
  if (loomCommDump(comm, "/nonexistent-dir/x.json") != loomSystemError ||
      strstr(loomGetLastError(NULL), "/nonexistent-dir/x.json") == NULL)
    FAIL("an unwritable path: %s", loomGetLastError(NULL));
  printf("rank %d: args ok\n", rank);
}

int main(int argc, char **argv) {
  rank = atoi(getenv("LOOM_RANK") ? getenv("LOOM_RANK") : "0");
  nranks = atoi(getenv("LOOM_NRANKS") ? getenv("LOOM_NRANKS") : "1");
  if (argc < 3)
    FAIL("usage: trace_test record FILE | behind R | die R | mismatch R | args -");
  const char *mode = argv[1];
  int who = atoi(argv[2]);
  loomUniqueId id;
  loomComm_t comm;
  CHECK_LOOM(loomGetUniqueId(&id));
  CHECK_LOOM(loomCommInitRank(&comm, nranks, id, rank));
  if (strcmp(mode, "args") == 0) {
    args(comm);
    CHECK_LOOM(loomCommDestroy(comm));
    return 0;
  }
  prologue(comm);
  if (strcmp(mode, "record") == 0) {
    char path[512];
    snprintf(path, sizeof path, "%s.%d", argv[2], rank);
    CHECK_LOOM(loomCommDump(comm, path));
    printf("rank %d: dumped\n", rank);
    CHECK_LOOM(loomCommFinalize(comm));
  } else if (strcmp(mode, "behind") == 0) {
    if (rank == who) {
      /* idle past the others' timeout (test_trace.sh sets it), then dump */
      sleep((unsigned)atoi(getenv("TRACE_IDLE_S") ? getenv("TRACE_IDLE_S") : "4"));
      if (getenv("TRACE_NO_DUMP") == NULL) {
        CHECK_LOOM(loomCommDump(comm, NULL));
        printf("rank %d: dumped while behind\n", rank);
      }
    } else {
      failing_allreduce(comm, 1024);
    }
  } else if (strcmp(mode, "die") == 0) {
    if (rank == who) {
      printf("rank %d: exiting\n", rank);
      fflush(stdout);
      _exit(3);
    }
    failing_allreduce(comm, 1024);
  } else if (strcmp(mode, "segv") == 0) {
    if (rank == who)
      raise(SIGSEGV);
    failing_allreduce(comm, 1024);
  } else if (strcmp(mode, "mismatch") == 0) {
    failing_allreduce(comm, rank == who ? 2048 : 1024);
  } else {
    FAIL("unknown mode %s", mode);
  }
  loomCommDestroy(comm);
  return 0;
}
