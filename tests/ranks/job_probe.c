/*
 * job_probe — who may join a job, one scenario per run (test_security.sh):
 *
 *   (no flag)      a job under loomrun: after PROBE_DELAY_MS (rank 1 only,
 *                  when set) init through LOOM_COMM_ID, all-reduce
 *                  JOB_VALUE * (rank + 1) and print the sum beside the one
 *                  this job's own ranks give; exit 0 only when they agree.
 *                  PROBE_PAUSE_MS: every rank waits that long between init
 *                  and the all-reduce (whose first use opens the TCP
 *                  connections), then prints how long the all-reduce took
 *   --fake-root    one process plays a bootstrap root that does not know
 *                  the job's secret and hands out a rank table: init must
 *                  refuse the table (never connect where it says)
 *   --abort-init   a non-blocking init whose other rank never comes:
 *                  loomCommAbort from this thread must return within 1 s
 */
#include "net/auth.h"
#include "bootstrap/wire.h"
#include "core/timeutil.h"
#include "loom.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int rank, nranks;
#define TEST_NAME "job_probe"
#include "rankcheck.h"

static double since_s(uint64_t t0) { return (double)(loom_now_ns() - t0) / 1e9; }

static int job(void) {
  const char *delay = getenv("PROBE_DELAY_MS");
  if (delay != NULL && rank == 1)
    usleep((useconds_t)atoi(delay) * 1000);
  long value = atol(getenv("JOB_VALUE") ? getenv("JOB_VALUE") : "1");
  loomUniqueId id;
  CHECK_LOOM(loomGetUniqueId(&id));
  loomComm_t comm;
  loomResult_t res = loomCommInitRank(&comm, nranks, id, rank);
  if (res != loomSuccess) {
    printf("rank %d: init failed: %s: %s\n", rank, loomGetErrorString(res),
           loomGetLastError(NULL));
    return 3;
  }
  const char *pause = getenv("PROBE_PAUSE_MS");
  if (pause != NULL)
    usleep((useconds_t)atoi(pause) * 1000);
  double x = (double)(value * (rank + 1)), sum = 0;
  uint64_t t0 = loom_now_ns();
  CHECK_LOOM(loomAllReduce(&x, &sum, 1, loomFloat64, loomSum, comm, NULL));
  if (pause != NULL)
    printf("rank %d: the all-reduce took %.1f s\n", rank, since_s(t0));
  double want = (double)value * nranks * (nranks + 1) / 2;
  printf("rank %d: job %ld sum %.0f (expected %.0f)\n", rank, value, sum, want);
  CHECK_LOOM(loomCommFinalize(comm));
  CHECK_LOOM(loomCommDestroy(comm));
  return sum == want ? 0 : 4;
}

/* ---- --fake-root ---------------------------------------------------------- */

struct fake_root {
  int listen_fd;
  int served;
};

/* Answers one rank as a root that knows another secret would: its
 * challenge, then a well-formed placement (pointing at a port of ours) tagged
 * with the wrong key. */
static void *fake_root_main(void *arg) {
  struct fake_root *fr = arg;
  int fd = accept(fr->listen_fd, NULL, NULL);
  if (fd < 0)
    return NULL;
  uint8_t nonce[LOOM_AUTH_NONCE_BYTES] = {5}, raw[LOOM_AUTH_CHALLENGE_BYTES];
  loom_auth_challenge_encode(nonce, raw);
  uint8_t in[LOOM_AUTH_PROOF_BYTES + LOOM_FRAME_HDR_BYTES + LOOM_HELLO_BYTES];
  if (write(fd, raw, sizeof raw) != (ssize_t)sizeof raw ||
      recv(fd, in, sizeof in, MSG_WAITALL) != (ssize_t)sizeof in) {
    close(fd);
    return NULL;
  }
  struct loom_hello hello;
  loom_hello_decode(in + LOOM_AUTH_PROOF_BYTES + LOOM_FRAME_HDR_BYTES, &hello);
  struct loom_peer_info peer = hello.info;
  /* rank 1 of 2: both neighbours are rank 0; the host holds both ranks */
  int32_t local[2] = {0, 1};
  struct loom_placement pl = {.prev = peer, .next = peer, .nlocal = 2, .local = local};
  pl.prev.rank = pl.next.rank = 0;
  uint8_t frame[LOOM_FRAME_HDR_BYTES + LOOM_PLACEMENT_BYTES(2) + LOOM_AUTH_TAG_BYTES];
  struct loom_frame_hdr h = {LOOM_FRAME_PLACEMENT, LOOM_PLACEMENT_BYTES(2) + LOOM_AUTH_TAG_BYTES};
  loom_frame_hdr_encode(&h, frame);
  loom_placement_encode(&pl, frame + LOOM_FRAME_HDR_BYTES);
  memset(frame + sizeof frame - LOOM_AUTH_TAG_BYTES, 0x77, LOOM_AUTH_TAG_BYTES);
  if (write(fd, frame, sizeof frame) == (ssize_t)sizeof frame)
    fr->served = 1;
  usleep(200000);
  close(fd);
  return NULL;
}

static int fake_root(void) {
  rank = 1;
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 4) != 0 ||
      getsockname(lfd, (struct sockaddr *)&a, &alen) != 0)
    FAIL("cannot listen");
  char id[64];
  snprintf(id, sizeof id, "127.0.0.1:%d", ntohs(a.sin_port));
  setenv("LOOM_COMM_ID", id, 1);
  setenv("LOOM_COMM_SECRET", "the job's own secret", 1);
  struct fake_root fr = {lfd, 0};
  pthread_t t;
  pthread_create(&t, NULL, fake_root_main, &fr);
  loomUniqueId uid;
  CHECK_LOOM(loomGetUniqueId(&uid));
  loomComm_t comm;
  uint64_t t0 = loom_now_ns();
  loomResult_t res = loomCommInitRank(&comm, 2, uid, 1); /* rank 1: does not host the root */
  pthread_join(t, NULL);
  close(lfd);
  if (!fr.served)
    FAIL("the fake root never answered the rank");
  if (res == loomSuccess)
    FAIL("init accepted a placement from a root that does not know the secret");
  if (strstr(loomGetLastError(NULL), "does not carry this job's tag") == NULL)
    FAIL("init failed, but not for the forged placement: %s", loomGetLastError(NULL));
  printf("fake-root: refused after %.2f s: %s\n", since_s(t0), loomGetLastError(NULL));
  return 0;
}

/* ---- --abort-init --------------------------------------------------------- */

static int abort_init(void) {
  unsetenv("LOOM_COMM_ID");
  setenv("LOOM_BOOTSTRAP_TIMEOUT", "60", 1);
  loomUniqueId uid;
  CHECK_LOOM(loomGetUniqueId(&uid));
  loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  loomComm_t comm;
  loomResult_t res = loomCommInitRankConfig(&comm, 2, uid, 0, &cfg);
  if (res != loomSuccess && res != loomInProgress)
    FAIL("non-blocking init: %s", loomGetLastError(NULL));
  usleep(300000); /* it now waits for rank 1, which never comes */
  uint64_t t0 = loom_now_ns();
  CHECK_LOOM(loomCommAbort(comm));
  double took = since_s(t0);
  if (took > 1.0)
    FAIL("loomCommAbort of a pending init took %.2f s", took);
  printf("abort-init: loomCommAbort returned after %.3f s\n", took);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 2 && strcmp(argv[1], "--fake-root") == 0)
    return fake_root();
  if (argc == 2 && strcmp(argv[1], "--abort-init") == 0)
    return abort_init();
  loomLaunchInfo_t li;
  if (argc != 1 || loomGetLaunchInfo(&li) != loomSuccess) {
    fprintf(stderr, "usage: job_probe [--fake-root | --abort-init] (a job: under loomrun)\n");
    return 2;
  }
  rank = li.rank;
  nranks = li.nranks;
  return job();
}
