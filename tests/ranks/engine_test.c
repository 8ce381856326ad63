/*
 * engine_test — the engine's post/progress interface under loomrun: three
 * communicators, one 4 MiB ring all-reduce posted on each, and one thread
 * driving all three with loom_engine_wait_all.  The ranks post and list the
 * engines in different orders (rank r starts with communicator r mod 3),
 * so a rank that waited on one task at a time would wait on a peer that
 * waits on another: only driving all at once completes.  Then the same
 * through the public API: one loomGroupStart/End over the three
 * communicators, each with a chain of calls (an all-reduce, a broadcast, a
 * bucket of small all-reduces, a send/recv ring), issued in a different
 * order on each rank; no thread may be created while the group runs.
 * Exact results.
 */
#include "api/comm.h"
#include "engine/engine.h"
#include "engine/fingerprint.h"
#include "sched/schedule.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
#define TEST_NAME "engine_test"
#include "rankcheck.h"

enum { NCOMM = 3, COUNT = 1 << 20, SMALL = 16, NSMALL = 8 };

/* Counts the threads this process creates (the library's calls reach this
 * definition before libc's). */
static atomic_int threads_created;
int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  static create_fn real;
  if (real == NULL)
    *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
  atomic_fetch_add(&threads_created, 1);
  return real(t, attr, fn, arg);
}

struct posted {
  struct loom_step steps[64];
  struct loom_schedule s;
  void *bufs[3];
  struct loom_engine_op op;
  float *in, *out;
};

static void post_allreduce(loomComm_t c, struct posted *p, int which) {
  p->in = malloc(sizeof(float) * COUNT);
  p->out = malloc(sizeof(float) * COUNT);
  if (p->in == NULL || p->out == NULL)
    FAIL("out of memory");
  for (int i = 0; i < COUNT; i++)
    p->in[i] = (float)((rank + 1) * (which + 1) + i % 7);
  loom_sched_init(&p->s, p->steps, 64);
  loom_ring_allreduce(c->rank, c->nranks, COUNT, &p->s);
  p->bufs[0] = p->in;
  p->bufs[1] = p->out;
  p->bufs[2] = NULL;
  p->op = (struct loom_engine_op){.name = "allreduce", .sched = &p->s, .bufs = p->bufs,
                                  .nbufs = 3, .datatype = loomFloat32, .op = loomSum};
  loom_fp_make(p->op.fp, LOOM_COLL_ALLREDUCE, loomFloat32, loomSum, LOOM_FP_NO_ROOT, COUNT,
               1000u + (unsigned)which);
  CHECK_LOOM(loom_engine_post(&c->engine, &p->op));
}

/* Communicator k's buffers in the group test. */
struct chain {
  float big[COUNT / 16], bcast[256], small[NSMALL][SMALL], sendv[64], recvv[64];
};

static void issue_chain(loomComm_t c, struct chain *ch, int k) {
  int r = c->rank, n = c->nranks;
  for (int i = 0; i < COUNT / 16; i++)
    ch->big[i] = (float)(r + k + i % 5);
  for (int i = 0; i < 256; i++)
    ch->bcast[i] = r == k % n ? (float)(1000 * k + i) : -1.0f;
  for (int j = 0; j < NSMALL; j++)
    for (int i = 0; i < SMALL; i++)
      ch->small[j][i] = (float)(r * j + i);
  for (int i = 0; i < 64; i++)
    ch->sendv[i] = (float)(100 * r + i + k);
  CHECK_LOOM(loomAllReduce(ch->big, ch->big, COUNT / 16, loomFloat32, loomSum, c, NULL));
  CHECK_LOOM(loomBroadcast(ch->bcast, ch->bcast, 256, loomFloat32, k % n, c, NULL));
  for (int j = 0; j < NSMALL; j++)
    CHECK_LOOM(loomAllReduce(ch->small[j], ch->small[j], SMALL, loomFloat32, loomSum, c, NULL));
  CHECK_LOOM(loomRecv(ch->recvv, 64, loomFloat32, (r + n - 1) % n, c, NULL));
  CHECK_LOOM(loomSend(ch->sendv, 64, loomFloat32, (r + 1) % n, c, NULL));
}

static void check_chain(const struct chain *ch, int k) {
  int n = nranks, prev = (rank + n - 1) % n;
  for (int i = 0; i < COUNT / 16; i++) {
    float want = (float)(n * (n - 1) / 2 + n * (k + i % 5));
    if (ch->big[i] != want)
      FAIL("group: communicator %d all-reduce element %d: %g, expected %g", k, i, ch->big[i],
           want);
  }
  for (int i = 0; i < 256; i++)
    if (ch->bcast[i] != (float)(1000 * k + i))
      FAIL("group: communicator %d broadcast element %d: %g", k, i, ch->bcast[i]);
  for (int j = 0; j < NSMALL; j++)
    for (int i = 0; i < SMALL; i++)
      if (ch->small[j][i] != (float)(j * n * (n - 1) / 2 + n * i))
        FAIL("group: communicator %d small all-reduce %d element %d: %g", k, j, i,
             ch->small[j][i]);
  for (int i = 0; i < 64; i++)
    if (ch->recvv[i] != (float)(100 * prev + i + k))
      FAIL("group: communicator %d received element %d: %g", k, i, ch->recvv[i]);
}

/* One group over the three communicators, issued from a different one on
 * each rank; no thread created while it runs. */
static void group_on_one_thread(loomComm_t *comms) {
  static struct chain chains[NCOMM];
  CHECK_LOOM(loomGroupStart());
  for (int j = 0; j < NCOMM; j++) {
    int k = (rank + j) % NCOMM;
    issue_chain(comms[k], &chains[k], k);
  }
  int before = atomic_load(&threads_created);
  CHECK_LOOM(loomGroupEnd());
  int made = atomic_load(&threads_created) - before;
  if (made != 0)
    FAIL("loomGroupEnd over %d communicators created %d threads", NCOMM, made);
  for (int k = 0; k < NCOMM; k++)
    check_chain(&chains[k], k);
  printf("rank %d: engine_test: a group over 3 communicators ran on this thread: exact\n", rank);
}

int main(void) {
  loomLaunchInfo_t li;
  if (loomGetLaunchInfo(&li) != loomSuccess)
    return 2;
  rank = li.rank;
  nranks = li.nranks;
  setvbuf(stdout, NULL, _IOLBF, 0);
  loomUniqueId id;
  CHECK_LOOM(loomGetUniqueId(&id));
  loomComm_t world, comms[NCOMM];
  CHECK_LOOM(loomCommInitRank(&world, nranks, id, rank));
  for (int k = 0; k < NCOMM; k++)
    CHECK_LOOM(loomCommSplit(world, 0, rank, &comms[k], NULL));
  static struct posted posted[NCOMM];
  struct loom_engine *engines[NCOMM];
  for (int j = 0; j < NCOMM; j++) {
    int k = (rank + j) % NCOMM; /* every rank starts elsewhere */
    post_allreduce(comms[k], &posted[k], k);
    engines[j] = &comms[k]->engine;
  }
  loomResult_t each[NCOMM];
  CHECK_LOOM(loom_engine_wait_all(engines, NCOMM, each));
  for (int k = 0; k < NCOMM; k++)
    for (int i = 0; i < COUNT; i++) {
      float want = (float)((k + 1) * nranks * (nranks + 1) / 2 + nranks * (i % 7));
      if (posted[k].out[i] != want)
        FAIL("communicator %d element %d: %g, expected %g", k, i, posted[k].out[i], want);
    }
  group_on_one_thread(comms);
  for (int k = 0; k < NCOMM; k++) {
    free(posted[k].in);
    free(posted[k].out);
    CHECK_LOOM(loomCommFinalize(comms[k]));
    CHECK_LOOM(loomCommDestroy(comms[k]));
  }
  CHECK_LOOM(loomCommFinalize(world));
  CHECK_LOOM(loomCommDestroy(world));
  printf("rank %d: engine_test: 3 all-reduces of 4 MiB on 3 communicators, one thread: exact\n",
         rank);
  return 0;
}
