/*
 * split.c — communicators made from others: loomCommSplit (a bootstrap
 * allgather of colors and keys over the parent, then a fresh rendezvous
 * per color hosted by its new rank 0) and loomCommInitAll (every rank of a
 * clique in this process, one thread each).
 */
#include "api/comm.h"
#include "trace/trace.h"
#include "api/task.h"
#include "engine/fingerprint.h"
#include "core/error.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct split_entry {
  int color, key, rank;
};

static int by_key_then_rank(const void *a, const void *b) {
  const struct split_entry *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Agrees on every rank's color and key, then on one unique id per color
 * (made by the color's new rank 0).  Runs over the parent's bootstrap
 * ring under op_lock. */
static loomResult_t agree(loomComm_t comm, int color, int key, int *newrank, int *newn,
                          loomUniqueId *id) {
  int n = comm->nranks;
  loomResult_t res = loomSuccess;
  int32_t *ck = malloc(sizeof(int32_t) * 2 * (size_t)n);
  struct split_entry *mine = malloc(sizeof *mine * (size_t)n);
  loomUniqueId *ids = malloc(sizeof *ids * (size_t)n);
  if (ck == NULL || mine == NULL || ids == NULL) {
    res = loom_error(loomSystemError, LOOM_LOG_INIT, "loomCommSplit: out of memory");
    goto out;
  }
  ck[2 * comm->rank] = color;
  ck[2 * comm->rank + 1] = key;
  LOOM_CHECK_GOTO(loom_bootstrap_allgather(comm->bs, ck, 2 * sizeof(int32_t)), res, out);
  int m = 0;
  for (int r = 0; r < n; r++)
    if (color >= 0 && ck[2 * r] == color)
      mine[m++] = (struct split_entry){.color = ck[2 * r], .key = ck[2 * r + 1], .rank = r};
  qsort(mine, (size_t)m, sizeof *mine, by_key_then_rank);
  *newn = m;
  *newrank = -1;
  for (int i = 0; i < m; i++)
    if (mine[i].rank == comm->rank)
      *newrank = i;
  memset(&ids[comm->rank], 0, sizeof ids[0]);
  if (*newrank == 0)
    LOOM_CHECK_GOTO(loom_bootstrap_make_root_id(&ids[comm->rank]), res, out);
  LOOM_CHECK_GOTO(loom_bootstrap_allgather(comm->bs, ids, sizeof ids[0]), res, out);
  if (m > 0)
    *id = ids[mine[0].rank];
out:
  free(ck);
  free(mine);
  free(ids);
  return res;
}

void loom_comm_child_config(const loomComm_t parent, const loomConfig_t *config,
                            const char *suffix, loomConfig_t *cfg, char *name, size_t len) {
  *cfg = (loomConfig_t)LOOM_CONFIG_INITIALIZER;
  if (config != NULL) /* a config of an older, smaller size keeps the newer defaults */
    memcpy(cfg, config, config->size < sizeof *cfg ? config->size : sizeof *cfg);
  cfg->size = sizeof *cfg;
  if (cfg->timeout_ms == LOOM_CONFIG_UNDEF_INT)
    cfg->timeout_ms = parent->timeout_ms;
  if (cfg->commName == NULL) {
    snprintf(name, len, "%.60s.%s", parent->name, suffix);
    cfg->commName = name;
  }
}

loomResult_t loomCommSplit(loomComm_t comm, int color, int key, loomComm_t *newcomm,
                           loomConfig_t *config) {
  static const char fn[] = "loomCommSplit";
  if (newcomm == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: newcomm is NULL", fn);
  *newcomm = NULL;
  LOOM_CHECK(loom_comm_check_usable(comm, fn));
  int blocking, timeout_ms;
  const char *cfg_name;
  /* A bad config must fail before the agreement, not strand the others. */
  LOOM_CHECK(loom_read_config(config, &blocking, &timeout_ms, &cfg_name));
  loom_comm_wait_tasks(comm);
  loom_oplock_lock(&comm->op_lock);
  int newrank = -1, newn = 0;
  loomUniqueId id;
  uint64_t trace_id = loom_comm_trace_op(comm, LOOM_TRACE_SPLIT);
  loomResult_t res = loom_execute_fence(comm, LOOM_FP_SPLIT);
  if (res == loomSuccess)
    res = agree(comm, color < 0 ? -1 : color, key, &newrank, &newn, &id);
  loom_comm_trace_op_ended(comm, trace_id, res);
  if (res != loomSuccess)
    loom_comm_set_broken(comm, res);
  loom_oplock_unlock(&comm->op_lock);
  if (res != loomSuccess || color < 0)
    return res;
  loomConfig_t cfg;
  char suffix[16], name[80];
  snprintf(suffix, sizeof suffix, "%d", color);
  loom_comm_child_config(comm, config, suffix, &cfg, name, sizeof name);
  return loomCommInitRankConfig(newcomm, newn, id, newrank, &cfg);
}

struct init_one {
  loomComm_t *comm;
  int nranks, rank;
  loomUniqueId id;
  loomResult_t res;
  char error[1024];
};

static void *init_one_main(void *arg) {
  struct init_one *a = arg;
  a->res = loomCommInitRank(a->comm, a->nranks, a->id, a->rank);
  if (a->res != loomSuccess)
    strncpy(a->error, loom_last_error(), sizeof a->error - 1);
  return NULL;
}

loomResult_t loomCommInitAll(loomComm_t *comms, int ndev, const int *devlist) {
  static const char fn[] = "loomCommInitAll";
  if (comms == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: comms is NULL", fn);
  if (ndev < 1)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: ndev=%d (must be >= 1)", fn,
                      ndev);
  for (int i = 0; devlist != NULL && i < ndev; i++)
    if (devlist[i] < 0)
      return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: devlist[%d] = %d", fn, i,
                        devlist[i]);
  loomUniqueId id;
  LOOM_CHECK(loom_bootstrap_make_root_id(&id));
  struct init_one *args = calloc((size_t)ndev, sizeof *args);
  pthread_t *threads = calloc((size_t)ndev, sizeof *threads);
  if (args == NULL || threads == NULL) {
    free(args);
    free(threads);
    return loom_error(loomSystemError, LOOM_LOG_INIT, "%s: out of memory", fn);
  }
  int started = 0;
  loomResult_t res = loomSuccess;
  for (int i = 0; i < ndev; i++) {
    comms[i] = NULL;
    args[i] = (struct init_one){
        .comm = &comms[i], .nranks = ndev, .rank = i, .id = id, .res = loomSuccess};
  }
  for (; started < ndev; started++)
    if (pthread_create(&threads[started], NULL, init_one_main, &args[started]) != 0) {
      res = loom_error(loomSystemError, LOOM_LOG_INIT, "%s: cannot start thread %d", fn,
                       started);
      break;
    }
  /* With a thread missing the others fail at the bootstrap timeout. */
  for (int i = 0; i < started; i++)
    loom_check_errnum(pthread_join(threads[i], NULL), LOOM_LOG_INIT, "joining an init thread");
  for (int i = 0; i < started && res == loomSuccess; i++)
    if (args[i].res != loomSuccess) {
      res = args[i].res;
      loom_set_last_error(args[i].error);
    }
  if (res != loomSuccess)
    for (int i = 0; i < ndev; i++) {
      loomCommDestroy(comms[i]);
      comms[i] = NULL;
    }
  free(args);
  free(threads);
  return res;
}
