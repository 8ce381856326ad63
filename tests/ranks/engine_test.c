/*
 * engine_test — the engine's post/progress interface under loomrun: three
 * communicators, one 4 MiB ring all-reduce posted on each, and one thread
 * driving all three with loom_engine_wait_all.  The ranks post and list the
 * engines in different orders (rank r starts with communicator r mod 3),
 * so a rank that waited on one task at a time would wait on a peer that
 * waits on another: only driving all at once completes.  Exact results.
 */
#include "api/comm.h"
#include "engine/engine.h"
#include "engine/fingerprint.h"
#include "sched/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
#define TEST_NAME "engine_test"
#include "rankcheck.h"

enum { NCOMM = 3, COUNT = 1 << 20 };

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
  p->s = (struct loom_schedule){.cap = 64, .steps = p->steps};
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
