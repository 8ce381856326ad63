/*
 * phase_test — a rank that fails in a phase other than a plain collective
 * (fault_test.c has those), one scenario per run:
 *
 *   --die-in split K   rank K dies (SIGKILL) instead of calling
 *                      loomCommSplit: every other rank's split fails
 *                      naming it, within LOOM_BOOTSTRAP_TIMEOUT + 5 s
 *   --die-in group K   rank K dies after loomGroupStart, before
 *                      loomGroupEnd, while the others' group (three fused
 *                      all-reduces, a large all-reduce and a ring
 *                      send/recv) waits on it: they fail naming it
 *   --sigstop K        rank K stops (SIGSTOP) in the middle of a sweep:
 *                      its process is alive but frozen, its sockets open;
 *                      the others time out (timeout_ms 1500) naming it,
 *                      then rank 0 kills it (its pid came by all-gather)
 *   --shm-fill PATH    /dev/shm fills up mid-run (rank 0 writes PATH until
 *                      ENOSPC): the communicator's segments, reserved at
 *                      init, keep working (verified all-reduces, no
 *                      SIGBUS); a split's new communicator fails on every
 *                      rank saying /dev/shm is full; once PATH is removed
 *                      a split works again.  For a small tmpfs on
 *                      /dev/shm (test_shm.sh mounts one)
 *   --make-id FILE     (not a rank) makes a unique id, so its bootstrap
 *                      root runs in this process, writes the id to FILE and
 *                      waits to be killed
 *   --root-gone FILE PID  the ranks init with FILE's id, then rank 0 kills
 *                      PID, the process hosting the root (its host going
 *                      away after rendezvous): verified all-reduces, a
 *                      barrier and a split still work, since nothing after
 *                      rendezvous needs the root
 * Each surviving rank prints "rank R: <scenario> ok after S s: <error>"
 * (--shm-fill: "rank R: shm-fill ok: <the split's error>").
 */
#include "core/timeutil.h"
#include "loom.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;
#define TEST_NAME "phase_test"
#include "rankcheck.h"

static double elapsed_s(uint64_t since) { return (double)(loom_now_ns() - since) / 1e9; }

static loomComm_t init_comm(int timeout_ms) { return rankcheck_init_comm(nranks, timeout_ms); }

/* The failure must name `who`, come within `limit_s`, and be an error. */
static void expect_failure(loomResult_t res, int who, double waited, double limit_s,
                           const char *what) {
  if (res == loomSuccess)
    FAIL("%s succeeded although rank %d is gone", what, who);
  char want[32];
  snprintf(want, sizeof want, "rank %d ", who);
  if (strstr(loomGetLastError(NULL), want) == NULL)
    FAIL("%s: the error does not name rank %d: %s", what, who, loomGetLastError(NULL));
  if (waited > limit_s)
    FAIL("%s took %.1f s to fail (limit %.1f s)", what, waited, limit_s);
  printf("rank %d: %s ok after %.2f s: %s\n", rank, what, waited, loomGetLastError(NULL));
}

static void die_in_split(int victim) {
  loomComm_t comm = init_comm(20000), sub;
  float x[256] = {0};
  CHECK_LOOM(loomAllReduce(x, x, 256, loomFloat32, loomSum, comm, NULL));
  if (rank == victim) {
    usleep(300000); /* the others have finished the all-reduce and wait in the split */
    raise(SIGKILL);
  }
  uint64_t t0 = loom_now_ns();
  loomResult_t res = loomCommSplit(comm, rank % 2, rank, &sub, NULL);
  int bootstrap_s = atoi(getenv("LOOM_BOOTSTRAP_TIMEOUT") ? getenv("LOOM_BOOTSTRAP_TIMEOUT")
                                                          : "120");
  expect_failure(res, victim, elapsed_s(t0), bootstrap_s + 5.0, "split");
  loomCommAbort(comm);
}

static void die_in_group(int victim) {
  loomComm_t comm = init_comm(20000);
  size_t big = 1 << 20;
  float small[3][64], *a = calloc(big, sizeof *a), *s = calloc(4096, sizeof *s),
                      *r = calloc(4096, sizeof *r);
  memset(small, 0, sizeof small);
  CHECK_LOOM(loomAllReduce(a, a, big, loomFloat32, loomSum, comm, NULL));
  CHECK_LOOM(loomGroupStart());
  for (int i = 0; i < 3; i++)
    CHECK_LOOM(loomAllReduce(small[i], small[i], 64, loomFloat32, loomSum, comm, NULL));
  CHECK_LOOM(loomAllReduce(a, a, big, loomFloat32, loomSum, comm, NULL));
  CHECK_LOOM(loomSend(s, 4096, loomFloat32, (rank + 1) % nranks, comm, NULL));
  CHECK_LOOM(loomRecv(r, 4096, loomFloat32, (rank + nranks - 1) % nranks, comm, NULL));
  if (rank == victim) {
    usleep(300000); /* the others have finished the all-reduce and wait in the group */
    raise(SIGKILL); /* inside the group, before its end posts anything */
  }
  uint64_t t0 = loom_now_ns();
  loomResult_t res = loomGroupEnd();
  expect_failure(res, victim, elapsed_s(t0), 10.0, "group");
  loomCommAbort(comm);
  free(a);
  free(s);
  free(r);
}

static void sigstop(int victim) {
  loomComm_t comm = init_comm(1500);
  int64_t pid = getpid(), pids[64];
  CHECK_LOOM(loomAllGather(&pid, pids, 1, loomInt64, comm, NULL));
  size_t count = 1 << 16;
  float *a = calloc(count, sizeof *a);
  loomResult_t res = loomSuccess;
  uint64_t last_ok = loom_now_ns();
  for (int it = 0; res == loomSuccess && it < 100000; it++) {
    if (rank == victim && it == 5)
      raise(SIGSTOP); /* frozen, sockets and segments held, until killed */
    res = loomAllReduce(a, a, count, loomFloat32, loomSum, comm, NULL);
    if (res == loomSuccess)
      last_ok = loom_now_ns();
  }
  free(a);
  double waited = elapsed_s(last_ok);
  if (rank == 0 || (victim == 0 && rank == 1))
    kill((pid_t)pids[victim], SIGKILL);
  expect_failure(res, victim, waited, 1.5 + 5.0, "sigstop");
  loomCommAbort(comm);
}

static void sum_check(loomComm_t comm, size_t count, const char *when) {
  int n;
  CHECK_LOOM(loomCommCount(comm, &n));
  float *a = malloc(count * sizeof *a);
  for (size_t i = 0; i < count; i++)
    a[i] = (float)(i % 101);
  CHECK_LOOM(loomAllReduce(a, a, count, loomFloat32, loomSum, comm, NULL));
  for (size_t i = 0; i < count; i++)
    if (a[i] != (float)(n * (int)(i % 101)))
      FAIL("%s: element %zu is %g, expected %d", when, i, a[i], n * (int)(i % 101));
  free(a);
}

static void fill(const char *path) {
  FILE *f = fopen(path, "w");
  if (f == NULL)
    FAIL("cannot create %s", path);
  static char block[1 << 16];
  size_t total = 0;
  while (fwrite(block, 1, sizeof block, f) == sizeof block && fflush(f) == 0)
    total += sizeof block;
  fclose(f);
  printf("rank %d: filled /dev/shm with %zu KiB\n", rank, total >> 10);
}

static void shm_fill(const char *path) {
  loomComm_t comm = init_comm(20000), sub = NULL;
  sum_check(comm, 1 << 18, "before");
  if (rank == 0)
    fill(path);
  CHECK_LOOM(loomBarrier(comm, NULL));
  for (int i = 0; i < 20; i++)
    sum_check(comm, 1 << 18, "with /dev/shm full");
  loomResult_t res = loomCommSplit(comm, 0, rank, &sub, NULL);
  if (res == loomSuccess)
    FAIL("a new communicator was made with /dev/shm full");
  char text[1024];
  snprintf(text, sizeof text, "%s", loomGetLastError(NULL));
  if (strstr(text, "/dev/shm") == NULL)
    FAIL("the split's error does not mention /dev/shm: %s", text);
  sum_check(comm, 1000, "after the failed split"); /* the parent is intact */
  if (rank == 0)
    unlink(path);
  CHECK_LOOM(loomBarrier(comm, NULL));
  CHECK_LOOM(loomCommSplit(comm, 0, rank, &sub, NULL));
  sum_check(sub, 1 << 18, "on the split after /dev/shm was freed");
  CHECK_LOOM(loomCommDestroy(sub));
  CHECK_LOOM(loomCommDestroy(comm));
  printf("rank %d: shm-fill ok: %s\n", rank, text);
}

static void make_id(const char *file) {
  loomUniqueId id;
  CHECK_LOOM(loomGetUniqueId(&id));
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%s.tmp", file);
  FILE *f = fopen(tmp, "wb");
  if (f == NULL || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, file) != 0)
    FAIL("cannot write %s", file);
  printf("make-id: the root of %s runs in pid %d\n", file, (int)getpid());
  fflush(stdout);
  for (;;)
    pause();
}

static void root_gone(const char *file, int root_pid) {
  loomUniqueId id;
  FILE *f = fopen(file, "rb");
  if (f == NULL || fread(&id, sizeof id, 1, f) != 1)
    FAIL("cannot read the id from %s", file);
  fclose(f);
  loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
  cfg.timeout_ms = 20000;
  loomComm_t comm, sub;
  CHECK_LOOM(loomCommInitRankConfig(&comm, nranks, id, rank, &cfg));
  if (rank == 0) {
    if (kill(root_pid, SIGKILL) != 0)
      FAIL("cannot kill the root's process %d", root_pid);
    usleep(200000); /* its sockets closed; the test's shell reaps it */
  }
  CHECK_LOOM(loomBarrier(comm, NULL));
  for (int i = 0; i < 10; i++)
    sum_check(comm, 1 << 16, "after the root's process died");
  CHECK_LOOM(loomCommSplit(comm, rank % 2, rank, &sub, NULL));
  sum_check(sub, 1000, "on a split after the root's process died");
  CHECK_LOOM(loomCommDestroy(sub));
  CHECK_LOOM(loomCommFinalize(comm));
  CHECK_LOOM(loomCommDestroy(comm));
  printf("rank %d: root-gone ok\n", rank);
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "--make-id") == 0) {
    make_id(argv[2]);
    return 0;
  }
  rank = atoi(getenv("LOOM_RANK") ? getenv("LOOM_RANK") : "0");
  nranks = atoi(getenv("LOOM_NRANKS") ? getenv("LOOM_NRANKS") : "1");
  if (nranks > 64 || nranks < 2)
    FAIL("2 to 64 ranks");
  if (argc >= 4 && strcmp(argv[1], "--die-in") == 0 && strcmp(argv[2], "split") == 0)
    die_in_split(atoi(argv[3]));
  else if (argc >= 4 && strcmp(argv[1], "--die-in") == 0 && strcmp(argv[2], "group") == 0)
    die_in_group(atoi(argv[3]));
  else if (argc >= 3 && strcmp(argv[1], "--sigstop") == 0)
    sigstop(atoi(argv[2]));
  else if (argc >= 3 && strcmp(argv[1], "--shm-fill") == 0)
    shm_fill(argv[2]);
  else if (argc >= 4 && strcmp(argv[1], "--root-gone") == 0)
    root_gone(argv[2], atoi(argv[3]));
  else
    FAIL("usage: phase_test --die-in split|group K | --sigstop K | --shm-fill PATH | --root-gone FILE PID");
  return 0;
}
