/*
 * api_anysource.c — api_test's --any-source case: loomRecvAny.
 *
 * Every rank but 0 sends rank 0 a series of messages in three sizes (one
 * cell, many cells, striped over the sockets); rank 0 takes them all with
 * loomRecvAny and checks each against its sender's pattern, so a message
 * taken twice, from the wrong rank or out of its sender's order fails.
 * The senders go on to a barrier while rank 0 still receives: its
 * messages must be left for the barrier.  Then: a receive queued on a
 * stream; a rank whose collective message waits while another rank's send
 * comes late (3 ranks or more); argument errors; a receive that times out
 * and leaves the communicator usable.
 *
 * With ANY_SOURCE_UNSUPPORTED=1 (every peer over a plugin without probe)
 * rank 0 expects loomInvalidArgument naming the transport's limit
 * instead, and the communicator stays usable.
 */
#include "api_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 4
static const size_t sizes[] = {1, 5000, 100000}; /* int32 elements */

static int32_t val(int src, int k, size_t i) { return (int32_t)(src * 1000003 + k * 7919 + (int)i); }

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Rank 0 takes (nranks - 1) * ROUNDS messages of `count` from any rank;
 * message k of sender s holds val(s, k, i). */
static void fan_in(loomComm_t comm, size_t count, int32_t *buf) {
  int *got = calloc((size_t)nranks, sizeof *got);
  if (got == NULL)
    FAIL("out of memory");
  for (int m = 0; m < (nranks - 1) * ROUNDS; m++) {
    int src = -1;
    memset(buf, 0, count * sizeof *buf);
    CHECK_LOOM(loomRecvAny(buf, count, loomInt32, &src, comm, NULL));
    if (src <= 0 || src >= nranks)
      FAIL("loomRecvAny (count %zu): source %d", count, src);
    int k = got[src]++;
    if (k >= ROUNDS)
      FAIL("loomRecvAny (count %zu): message %d from rank %d, which sent %d", count, k + 1, src,
           ROUNDS);
    for (size_t i = 0; i < count; i++)
      if (buf[i] != val(src, k, i))
        FAIL("loomRecvAny (count %zu): message %d from rank %d: element %zu is %d, expected %d",
             count, k, src, i, buf[i], val(src, k, i));
  }
  free(got);
}

static void send_series(loomComm_t comm, size_t count, int32_t *buf) {
  for (int k = 0; k < ROUNDS; k++) {
    for (size_t i = 0; i < count; i++)
      buf[i] = val(rank, k, i);
    CHECK_LOOM(loomSend(buf, count, loomInt32, 0, comm, NULL));
  }
}

/* A late sender: rank 1's all-reduce message reaches rank 0 first, rank 2's
 * send comes 200 ms later and is the one rank 0's receive takes. */
static void late_sender(loomComm_t comm) {
  int32_t v = 0, x = rank + 1, sum = 0;
  if (rank == 0) {
    int src = -1;
    CHECK_LOOM(loomRecvAny(&v, 1, loomInt32, &src, comm, NULL));
    if (src != 2 || v != 4242)
      FAIL("late sender: got %d from rank %d, expected 4242 from rank 2", v, src);
  } else if (rank == 2) {
    sleep_ms(200);
    v = 4242;
    CHECK_LOOM(loomSend(&v, 1, loomInt32, 0, comm, NULL));
  }
  CHECK_LOOM(loomAllReduce(&x, &sum, 1, loomInt32, loomSum, comm, NULL));
  if (sum != nranks * (nranks + 1) / 2)
    FAIL("late sender: the all-reduce after it gave %d, expected %d", sum,
         nranks * (nranks + 1) / 2);
}

static void expect_error(loomResult_t got, loomResult_t want, const char *what) {
  if (got != want)
    FAIL("%s: %s, expected %s", what, loomGetErrorString(got), loomGetErrorString(want));
  printf("rank %d: %s: %s: %s\n", rank, what, loomGetErrorString(got), loomGetLastError(NULL));
}

/* Argument errors, then a receive nobody answers on a communicator with a
 * 300 ms timeout, which must leave it usable. */
static void errors(loomComm_t comm) {
  int32_t v = 0;
  int src = -1;
  if (rank == 0) {
    expect_error(loomRecvAny(&v, 1, loomInt32, NULL, comm, NULL), loomInvalidArgument,
                 "source NULL");
    expect_error(loomRecvAny(&v, 0, loomInt32, &src, comm, NULL), loomInvalidArgument,
                 "count 0");
    CHECK_LOOM(loomGroupStart());
    expect_error(loomRecvAny(&v, 1, loomInt32, &src, comm, NULL), loomInvalidUsage,
                 "inside a group");
    CHECK_LOOM(loomGroupEnd());
  }
  loomComm_t quick = dup_comm(comm, 300, "quick");
  if (rank == 0) {
    double t0 = now_s();
    expect_error(loomRecvAny(&v, 1, loomInt32, &src, quick, NULL), loomTimeout,
                 "nobody sends");
    double waited = now_s() - t0;
    if (waited < 0.25 || waited > 5)
      FAIL("the receive from any rank gave up after %.2f s, timeout 0.3 s", waited);
  }
  CHECK_LOOM(loomBarrier(comm, NULL)); /* the others wait here, on the long timeout */
  int32_t x = 1, sum = 0;
  CHECK_LOOM(loomAllReduce(&x, &sum, 1, loomInt32, loomSum, quick, NULL));
  if (sum != nranks)
    FAIL("after the timeout: all-reduce gave %d, expected %d", sum, nranks);
  if (rank == 1) {
    v = 77;
    CHECK_LOOM(loomSend(&v, 1, loomInt32, 0, quick, NULL));
  } else if (rank == 0) {
    CHECK_LOOM(loomRecvAny(&v, 1, loomInt32, &src, quick, NULL));
    if (v != 77 || src != 1)
      FAIL("after the timeout: got %d from rank %d, expected 77 from rank 1", v, src);
  }
  close_comm(quick);
}

static void unsupported(loomComm_t comm) {
  int32_t v = 0;
  int src = -1;
  if (rank == 0)
    expect_error(loomRecvAny(&v, 1, loomInt32, &src, comm, NULL), loomInvalidArgument,
                 "over a plugin without probe");
  CHECK_LOOM(loomBarrier(comm, NULL));
}

void any_source(void) {
  loomComm_t comm = world_init(30000);
  const char *e = getenv("ANY_SOURCE_UNSUPPORTED");
  if (e != NULL && strcmp(e, "1") == 0) {
    unsupported(comm);
    close_comm(comm);
    printf("rank %d: any-source ok\n", rank);
    return;
  }
  int32_t *buf = xmalloc(sizes[2] * sizeof *buf);
  for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
    if (rank == 0)
      fan_in(comm, sizes[z], buf);
    else
      send_series(comm, sizes[z], buf);
    CHECK_LOOM(loomBarrier(comm, NULL));
  }
  printf("rank %d: fan-in of %d x %d messages from any rank exact\n", rank, nranks - 1, ROUNDS);

  loomStream_t s;
  CHECK_LOOM(loomStreamCreate(&s));
  int src = -1;
  if (rank == 0) {
    CHECK_LOOM(loomRecvAny(buf, 3, loomInt32, &src, comm, s));
    CHECK_LOOM(loomStreamSynchronize(s));
    if (src != nranks - 1 || buf[0] != val(src, 9, 0) || buf[2] != val(src, 9, 2))
      FAIL("on a stream: got %d from rank %d", buf[0], src);
  } else if (rank == nranks - 1) {
    for (size_t i = 0; i < 3; i++)
      buf[i] = val(rank, 9, i);
    CHECK_LOOM(loomSend(buf, 3, loomInt32, 0, comm, s));
    CHECK_LOOM(loomStreamSynchronize(s));
  }
  CHECK_LOOM(loomStreamDestroy(s));
  if (nranks >= 3)
    late_sender(comm);
  errors(comm);
  free(buf);
  close_comm(comm);
  printf("rank %d: any-source ok\n", rank);
}
