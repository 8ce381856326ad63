/*
 * fault_test — what happens when things go wrong, one scenario per run:
 *
 *   --bad-input        invalid arguments give loomInvalidArgument with a
 *                      message, and the communicator still works after
 *   --kill K           rank K dies mid-run (SIGKILL); every other rank must
 *                      fail promptly with an error naming rank K
 *   --kill-early K     the same, but rank K dies right after init, before
 *                      any collective has connected it
 *   --stall K          rank K stops calling; the others time out
 *                      (timeout_ms) naming rank K
 *   --missing          init with one rank more than launched: every rank
 *                      fails at LOOM_BOOTSTRAP_TIMEOUT naming the missing rank
 *   --stray            junk connections to the bootstrap root are dropped
 *                      and the real rank still joins (one rank)
 *   --mismatch         ranks pass different counts: every rank fails, none
 *                      hangs
 *   --abort            loomCommAbort from another thread ends a blocked
 *                      collective within a second
 *   --abort-rank K     rank K aborts its communicator instead of joining a
 *                      collective; the others fail naming it, promptly
 *   --clean-exit       3 ranks: rank 1 sends to rank 2 and exits cleanly
 *                      while rank 2 waits on rank 0; rank 2 still gets both
 *                      messages (a closed socket of a rank that finished is
 *                      not a death while its data is there to read)
 *   --nonblocking      config.blocking = 0: loomInProgress, then ready; and
 *                      with a missing rank, the error and its text arrive
 *                      through loomCommGetAsyncError on this thread
 * Exit 0 when the scenario behaved as required.
 */
#include "net/auth.h"
#include "bootstrap/wire.h"
#include "core/timeutil.h"
#include "loom.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int rank, nranks;

#define TEST_NAME "fault_test"
#include "rankcheck.h"


static double elapsed_s(uint64_t since) { return (double)(loom_now_ns() - since) / 1e9; }

static loomComm_t init_comm(int timeout_ms) { return rankcheck_init_comm(nranks, timeout_ms); }

/* The error text must name `who` as the failed rank. */
static void expect_names(const char *text, int who) {
  char want[64];
  snprintf(want, sizeof want, "failed: rank %d ", who);
  if (strstr(text, want) == NULL)
    FAIL("error text does not name rank %d as the culprit: \"%s\"", who, text);
}

static void expect_invalid(loomResult_t res, const char *what) {
  if (res != loomInvalidArgument)
    FAIL("%s returned %s, expected loomInvalidArgument", what, loomGetErrorString(res));
  if (strlen(loomGetLastError(NULL)) < 10)
    FAIL("%s gave no useful message: \"%s\"", what, loomGetLastError(NULL));
  printf("rank %d: %s -> invalid argument: %s\n", rank, what, loomGetLastError(NULL));
}

static void bad_input(void) {
  loomComm_t comm = init_comm(0);
  float buf[64], out[64 * 8];
  for (int i = 0; i < 64; i++)
    buf[i] = (float)(i + rank);
  expect_invalid(loomAllReduce(buf, out, 64, loomFloat32, loomSum, NULL, NULL), "NULL comm");
  expect_invalid(loomAllReduce(NULL, out, 64, loomFloat32, loomSum, comm, NULL), "NULL sendbuff");
  expect_invalid(loomAllReduce(buf, NULL, 64, loomFloat32, loomSum, comm, NULL), "NULL recvbuff");
  expect_invalid(loomAllReduce(buf, out, 64, (loomDataType_t)42, loomSum, comm, NULL), "datatype 42");
  expect_invalid(loomAllReduce(buf, out, 64, (loomDataType_t)-1, loomSum, comm, NULL), "datatype -1");
  expect_invalid(loomAllReduce(buf, out, 64, loomFloat32, (loomRedOp_t)9, comm, NULL), "op 9");
  expect_invalid(loomAllReduce(buf, out, SIZE_MAX / 2, loomFloat32, loomSum, comm, NULL),
                 "count overflowing size_t");
  expect_invalid(loomAllReduce(buf, buf + 1, 32, loomFloat32, loomSum, comm, NULL),
                 "partly overlapping buffers");
  expect_invalid(loomAllReduce(buf, out, 64, loomFloat32, loomSum, comm, (loomStream_t)buf),
                 "non-NULL stream");
  expect_invalid(loomAllGather(buf, out, SIZE_MAX / 8, loomFloat32, comm, NULL),
                 "all-gather count x nranks overflowing");
  expect_invalid(loomAllGather(NULL, out, 4, loomFloat32, comm, NULL), "all-gather NULL sendbuff");
  expect_invalid(loomCommCount(comm, NULL), "loomCommCount(NULL)");
  expect_invalid(loomGetUniqueId(NULL), "loomGetUniqueId(NULL)");
  loomComm_t c2;
  loomUniqueId junk;
  memset(&junk, 0x5a, sizeof junk);
  expect_invalid(loomCommInitRank(&c2, 2, junk, 0), "a corrupt unique id");
  expect_invalid(loomCommInitRank(&c2, 0, junk, 0), "nranks 0");
  expect_invalid(loomCommInitRank(&c2, 2, junk, 2), "rank == nranks");
  loomConfig_t bad_cfg = LOOM_CONFIG_INITIALIZER;
  bad_cfg.blocking = 7;
  expect_invalid(loomCommInitRankConfig(&c2, 1, junk, 0, &bad_cfg), "config.blocking 7");
  loomConfig_t raw;
  memset(&raw, 0, sizeof raw);
  expect_invalid(loomCommInitRankConfig(&c2, 1, junk, 0, &raw), "config without initializer");
  /* Nothing was lost: the communicator still computes exact results. */
  CHECK_LOOM(loomAllReduce(buf, out, 64, loomFloat32, loomSum, comm, NULL));
  for (int i = 0; i < 64; i++) {
    float want = (float)(i * nranks + nranks * (nranks - 1) / 2);
    if (out[i] != want)
      FAIL("after bad input, element %d is %g, expected %g", i, out[i], want);
  }
  CHECK_LOOM(loomCommFinalize(comm));
  CHECK_LOOM(loomCommDestroy(comm));
  printf("rank %d: bad input handled, communicator intact\n", rank);
}

/* Loops all-reduces until one fails; returns the failing result. */
static loomResult_t run_until_error(loomComm_t comm, size_t count, int max_iters,
                                    uint64_t *last_ok) {
  float *a = calloc(count, sizeof *a), *b = calloc(count, sizeof *b);
  loomResult_t res = loomSuccess;
  for (int it = 0; it < max_iters && res == loomSuccess; it++) {
    res = loomAllReduce(a, b, count, loomFloat32, loomSum, comm, NULL);
    if (res == loomSuccess)
      *last_ok = loom_now_ns();
  }
  free(a);
  free(b);
  return res;
}

/* early: the victim dies right after init, before any collective, so
 * that connections made on first use find it gone. */
static void kill_rank(int victim, int early) {
  loomComm_t comm = init_comm(20000);
  size_t count = 1 << 20;
  if (rank == victim && early)
    raise(SIGKILL);
  if (rank == victim) {
    float *a = calloc(count, sizeof *a);
    for (int it = 0; it < 3; it++)
      CHECK_LOOM(loomAllReduce(a, a, count, loomFloat32, loomSum, comm, NULL));
    /* Die while the others are inside the next collective. */
    usleep(200000);
    raise(SIGKILL);
  }
  uint64_t last_ok = loom_now_ns();
  loomResult_t res = run_until_error(comm, count, 100000, &last_ok);
  double waited = elapsed_s(last_ok);
  if (res == loomSuccess)
    FAIL("no error although rank %d was killed", victim);
  if (res != loomRemoteError && res != loomTimeout)
    FAIL("got %s, expected loomRemoteError", loomGetErrorString(res));
  char text[1024];
  snprintf(text, sizeof text, "%s", loomGetLastError(NULL));
  expect_names(text, victim);
  if (waited > 10.0)
    FAIL("took %.1f s to notice the dead rank (timeout 20 s; must be prompt)", waited);
  /* The broken communicator refuses further work at once. */
  float x = 1;
  if (loomAllReduce(&x, &x, 1, loomFloat32, loomSum, comm, NULL) == loomSuccess)
    FAIL("a broken communicator accepted another collective");
  loomCommAbort(comm);
  printf("rank %d: noticed rank %d's death after %.3f s: %s\n", rank, victim, waited, text);
}

static void stall_rank(int victim, int timeout_ms) {
  loomComm_t comm = init_comm(timeout_ms);
  float x = 1, y;
  CHECK_LOOM(loomAllReduce(&x, &y, 1, loomFloat32, loomSum, comm, NULL));
  if (rank == victim) {
    usleep((useconds_t)timeout_ms * 3000u);
    loomCommAbort(comm);
    printf("rank %d: stalled for %d ms and left\n", rank, 3 * timeout_ms);
    return;
  }
  uint64_t start = loom_now_ns();
  loomResult_t res = loomAllReduce(&x, &y, 1, loomFloat32, loomSum, comm, NULL);
  double waited = elapsed_s(start);
  if (res != loomTimeout && res != loomRemoteError)
    FAIL("got %s, expected loomTimeout", loomGetErrorString(res));
  expect_names(loomGetLastError(NULL), victim);
  if (waited > timeout_ms / 1000.0 + 3.0)
    FAIL("took %.1f s with timeout_ms %d", waited, timeout_ms);
  loomCommAbort(comm);
  printf("rank %d: gave up on stalled rank %d after %.2f s: %s\n", rank, victim, waited,
         loomGetLastError(NULL));
}

static void missing_rank(void) {
  loomUniqueId id;
  CHECK_LOOM(loomGetUniqueId(&id));
  loomComm_t comm;
  uint64_t start = loom_now_ns();
  loomResult_t res = loomCommInitRank(&comm, nranks + 1, id, rank);
  double waited = elapsed_s(start);
  if (res != loomTimeout)
    FAIL("init with a missing rank returned %s, expected loomTimeout", loomGetErrorString(res));
  char want[64];
  snprintf(want, sizeof want, "ranks %d (1 of %d) never arrived", nranks, nranks + 1);
  if (strstr(loomGetLastError(NULL), want) == NULL)
    FAIL("message does not say \"%s\": \"%s\"", want, loomGetLastError(NULL));
  /* after the message's check: test_bootstrap.sh's 12 s run counts this
   * failure as proof that every rank's error named the missing rank */
  if (waited > 10.0)
    FAIL("took %.1f s (LOOM_BOOTSTRAP_TIMEOUT should end it)", waited);
  printf("rank %d: init failed after %.1f s as required: %s\n", rank, waited,
         loomGetLastError(NULL));
}

static int connect_to(const union loom_sockaddr *addr) {
  int fd = socket(addr->sa.sa_family, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, &addr->sa, loom_sockaddr_len(addr)) != 0)
    FAIL("cannot connect to the root");
  return fd;
}

static void stray_connections(void) {
  if (nranks != 1)
    FAIL("--stray runs with one rank");
  unsetenv("LOOM_COMM_ID");
  loomUniqueId id;
  CHECK_LOOM(loomGetUniqueId(&id));
  struct loom_id_fields f;
  if (loom_id_decode(&id, &f) != 0)
    FAIL("cannot decode our own id");
  int idle = connect_to(&f.root); /* connects and never speaks */
  int junk = connect_to(&f.root);
  if (write(junk, "GET / HTTP/1.0\r\n\r\n", 18) != 18)
    FAIL("write");
  int huge = connect_to(&f.root);
  uint8_t hdr[LOOM_FRAME_HDR_BYTES];
  struct loom_frame_hdr h = {LOOM_FRAME_HELLO, 1u << 30};
  loom_frame_hdr_encode(&h, hdr);
  if (write(huge, hdr, sizeof hdr) != (ssize_t)sizeof hdr)
    FAIL("write");
  /* A client that speaks the protocol but proves another secret. */
  int wrong = connect_to(&f.root);
  uint8_t hello[LOOM_FRAME_HDR_BYTES + LOOM_HELLO_BYTES], bad_secret[LOOM_SECRET_BYTES];
  uint8_t raw[LOOM_AUTH_CHALLENGE_BYTES], proof[LOOM_AUTH_PROOF_BYTES], challenge[16];
  memset(bad_secret, 7, sizeof bad_secret);
  struct loom_peer_info info;
  memset(&info, 0, sizeof info);
  info.rank = 0;
  info.pid = getpid();
  info.listen_addr = f.root;
  struct loom_frame_hdr hh = {LOOM_FRAME_HELLO, LOOM_HELLO_BYTES};
  loom_frame_hdr_encode(&hh, hello);
  struct loom_hello hb = {.nranks = 1, .nroots = 1, .root = 0, .role = LOOM_HELLO_MEMBER,
                         .info = info};
  loom_hello_encode(&hb, hello + LOOM_FRAME_HDR_BYTES);
  if (read(wrong, raw, sizeof raw) != (ssize_t)sizeof raw ||
      loom_auth_challenge_decode(raw, challenge) != 0)
    FAIL("the root sent no challenge");
  memset(proof, 3, LOOM_AUTH_NONCE_BYTES);
  loom_auth_tag(bad_secret, LOOM_ROOT_LABEL, 'c', challenge, proof, hello, sizeof hello,
                proof + LOOM_AUTH_NONCE_BYTES);
  if (write(wrong, proof, sizeof proof) != (ssize_t)sizeof proof ||
      write(wrong, hello, sizeof hello) != (ssize_t)sizeof hello)
    FAIL("write");
  uint64_t start = loom_now_ns();
  loomComm_t comm;
  CHECK_LOOM(loomCommInitRank(&comm, 1, id, 0));
  double waited = elapsed_s(start);
  if (waited > 5.0)
    FAIL("init took %.1f s with stray connections around", waited);
  float x = 3, y = 0;
  CHECK_LOOM(loomAllReduce(&x, &y, 1, loomFloat32, loomSum, comm, NULL));
  if (y != 3)
    FAIL("1-rank all-reduce gave %g", y);
  CHECK_LOOM(loomCommDestroy(comm));
  close(idle);
  close(junk);
  close(huge);
  close(wrong);
  printf("rank 0: joined in %.3f s past 4 stray connections\n", waited);
}

static void mismatch(void) {
  loomComm_t comm = init_comm(5000);
  size_t count = rank == 0 ? 1000 : 2000;
  float *a = calloc(2000, sizeof *a);
  uint64_t start = loom_now_ns();
  loomResult_t res = loomAllReduce(a, a, count, loomFloat32, loomSum, comm, NULL);
  if (res != loomInvalidUsage)
    FAIL("mismatched counts (1000 vs 2000) gave %s, expected loomInvalidUsage: %s",
         loomGetErrorString(res), loomGetLastError(NULL));
  printf("rank %d: mismatch detected after %.2f s: %s: %s\n", rank, elapsed_s(start),
         loomGetErrorString(res), loomGetLastError(NULL));
  loomCommAbort(comm);
  free(a);
}

static void abort_rank(int victim) {
  loomComm_t comm = init_comm(20000);
  size_t count = 1 << 20;
  float *a = calloc(count, sizeof *a);
  CHECK_LOOM(loomAllReduce(a, a, count, loomFloat32, loomSum, comm, NULL));
  if (rank == victim) {
    usleep(300000);
    loomCommAbort(comm);
    printf("rank %d: aborted\n", rank);
    free(a);
    return;
  }
  uint64_t start = loom_now_ns();
  loomResult_t res = loomAllReduce(a, a, count, loomFloat32, loomSum, comm, NULL);
  double waited = elapsed_s(start);
  if (res != loomRemoteError)
    FAIL("got %s, expected loomRemoteError", loomGetErrorString(res));
  expect_names(loomGetLastError(NULL), victim);
  if (strstr(loomGetLastError(NULL), "aborted its communicator") == NULL)
    FAIL("the error does not say rank %d aborted: %s", victim, loomGetLastError(NULL));
  if (waited > 5.0)
    FAIL("took %.1f s to learn of the abort", waited);
  loomCommAbort(comm);
  free(a);
  printf("rank %d: learned of rank %d's abort after %.2f s: %s\n", rank, victim, waited,
         loomGetLastError(NULL));
}

/* Rank 1, the bootstrap predecessor of rank 2, sends its message and
 * leaves (loomCommDestroy closes its bootstrap sockets), then says so in
 * a file named after the launcher's pid; rank 0 sends only once it sees
 * that file, so rank 2, sleeping in the kernel on rank 0, always sees
 * rank 1's socket close first, and waits well within the engine's grace. */
static void clean_exit(void) {
  if (nranks != 3)
    FAIL("--clean-exit needs 3 ranks, got %d", nranks);
  char mark[64];
  snprintf(mark, sizeof mark, "/tmp/loom-fault-clean-exit.%d", (int)getppid());
  loomComm_t comm = init_comm(20000);
  int32_t v = 100 + rank, got[2] = {-1, -1};
  if (rank == 1) {
    CHECK_LOOM(loomSend(&v, 1, loomInt32, 2, comm, NULL));
    CHECK_LOOM(loomCommDestroy(comm));
    FILE *f = fopen(mark, "w");
    if (f == NULL || fclose(f) != 0)
      FAIL("cannot create %s", mark);
    printf("rank 1: sent and left\n");
    return;
  }
  if (rank == 0) {
    uint64_t start = loom_now_ns();
    while (access(mark, F_OK) != 0) {
      if (elapsed_s(start) > 20.0)
        FAIL("rank 1 did not leave within 20 s (no %s)", mark);
      usleep(1000);
    }
    unlink(mark);
    usleep(20000); /* rank 2 is asleep in the kernel by now */
    CHECK_LOOM(loomSend(&v, 1, loomInt32, 2, comm, NULL));
  } else {
    CHECK_LOOM(loomRecv(&got[0], 1, loomInt32, 0, comm, NULL));
    CHECK_LOOM(loomRecv(&got[1], 1, loomInt32, 1, comm, NULL));
    if (got[0] != 100 || got[1] != 101)
      FAIL("received %d and %d, expected 100 and 101", got[0], got[1]);
  }
  CHECK_LOOM(loomCommDestroy(comm));
  printf("rank %d: clean exit of rank 1 ok\n", rank);
}

static void *abort_later(void *arg) {
  usleep(500000);
  loomCommAbort((loomComm_t)arg);
  return NULL;
}

static void abort_blocked(void) {
  loomComm_t comm = init_comm(60000);
  float x = 1, y;
  CHECK_LOOM(loomAllReduce(&x, &y, 1, loomFloat32, loomSum, comm, NULL));
  if (rank != 0) {
    sleep(3); /* never joins the second collective */
    loomCommAbort(comm);
    return;
  }
  pthread_t t;
  pthread_create(&t, NULL, abort_later, comm);
  uint64_t start = loom_now_ns();
  loomResult_t res = loomAllReduce(&x, &y, 1, loomFloat32, loomSum, comm, NULL);
  double waited = elapsed_s(start);
  pthread_join(t, NULL);
  if (res == loomSuccess)
    FAIL("a collective blocked on an absent peer succeeded");
  if (waited > 1.5)
    FAIL("abort took %.2f s to end the blocked collective", waited);
  printf("rank 0: abort ended the blocked collective after %.2f s\n", waited);
}

/* Polls loomCommGetAsyncError until it leaves loomInProgress (bounded). */
static loomResult_t wait_ready(loomComm_t comm, double limit_s) {
  uint64_t start = loom_now_ns();
  loomResult_t state = loomInProgress;
  while (state == loomInProgress && elapsed_s(start) < limit_s) {
    CHECK_LOOM(loomCommGetAsyncError(comm, &state));
    usleep(1000);
  }
  return state;
}

static void nonblocking(void) {
  loomUniqueId id;
  CHECK_LOOM(loomGetUniqueId(&id));
  loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "nb";
  loomComm_t comm;
  loomResult_t res = loomCommInitRankConfig(&comm, nranks, id, rank, &cfg);
  if (res != loomInProgress)
    FAIL("non-blocking init returned %s, expected loomInProgress", loomGetErrorString(res));
  loomResult_t state = wait_ready(comm, 30);
  if (state != loomSuccess)
    FAIL("non-blocking init ended with %s: %s", loomGetErrorString(state),
         loomGetLastError(NULL));
  int64_t x = rank + 1, y = 0;
  CHECK_LOOM(loomAllReduce(&x, &y, 1, loomInt64, loomSum, comm, NULL));
  if (y != (int64_t)nranks * (nranks + 1) / 2)
    FAIL("sum after non-blocking init is %lld", (long long)y);
  CHECK_LOOM(loomCommFinalize(comm));
  if (loomAllReduce(&x, &y, 1, loomInt64, loomSum, comm, NULL) != loomInvalidUsage)
    FAIL("a collective after loomCommFinalize was not refused");
  CHECK_LOOM(loomCommDestroy(comm));
  /* Now one rank too many: the failure and its text reach this thread. */
  CHECK_LOOM(loomGetUniqueId(&id));
  res = loomCommInitRankConfig(&comm, nranks + 1, id, rank, &cfg);
  if (res != loomInProgress)
    FAIL("second non-blocking init returned %s", loomGetErrorString(res));
  state = wait_ready(comm, 30);
  if (state != loomTimeout || strstr(loomGetLastError(NULL), "never arrived") == NULL)
    FAIL("non-blocking init with a missing rank: %s, \"%s\"", loomGetErrorString(state),
         loomGetLastError(NULL));
  CHECK_LOOM(loomCommDestroy(comm));
  printf("rank %d: non-blocking init ready, then failed as required: %s\n", rank,
         loomGetLastError(NULL));
}

int main(int argc, char **argv) {
  loomLaunchInfo_t li;
  if (loomGetLaunchInfo(&li) != loomSuccess) {
    fprintf(stderr, "fault_test: %s\n", loomGetLastError(NULL));
    return 2;
  }
  rank = li.rank;
  nranks = li.nranks;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc >= 2 && strcmp(argv[1], "--bad-input") == 0)
    bad_input();
  else if (argc >= 3 && strcmp(argv[1], "--kill") == 0)
    kill_rank(atoi(argv[2]), 0);
  else if (argc >= 3 && strcmp(argv[1], "--kill-early") == 0)
    kill_rank(atoi(argv[2]), 1);
  else if (argc >= 4 && strcmp(argv[1], "--stall") == 0)
    stall_rank(atoi(argv[2]), atoi(argv[3]));
  else if (argc >= 2 && strcmp(argv[1], "--missing") == 0)
    missing_rank();
  else if (argc >= 2 && strcmp(argv[1], "--stray") == 0)
    stray_connections();
  else if (argc >= 2 && strcmp(argv[1], "--mismatch") == 0)
    mismatch();
  else if (argc >= 2 && strcmp(argv[1], "--abort") == 0)
    abort_blocked();
  else if (argc >= 3 && strcmp(argv[1], "--abort-rank") == 0)
    abort_rank(atoi(argv[2]));
  else if (argc >= 2 && strcmp(argv[1], "--clean-exit") == 0)
    clean_exit();
  else if (argc >= 2 && strcmp(argv[1], "--nonblocking") == 0)
    nonblocking();
  else {
    fprintf(stderr, "usage: fault_test --bad-input | --kill K | --kill-early K | --stall K MS | --missing | "
                    "--stray | --mismatch | --abort | --abort-rank K | --clean-exit | --nonblocking\n");
    return 2;
  }
  return 0;
}
