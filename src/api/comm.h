/*
 * comm.h — the communicator object behind loomComm_t.
 */
#ifndef LOOM_API_COMM_H
#define LOOM_API_COMM_H

#include "bootstrap/bootstrap.h"
#include "engine/engine.h"
#include "loom.h"
#include "transport.h"

#include <pthread.h>

#define LOOM_COMM_MAGIC 0x4c434f4du /* "LCOM": catches stale or bogus handles */

struct loomComm {
  unsigned magic;
  int rank, nranks;
  char name[64];
  int timeout_ms;
  struct loom_bootstrap *bs;
  const struct loom_transport *tp;
  void *tp_ctx;
  void **conns; /* per rank */
  struct loom_engine engine;
  /* schedule storage for one call, sized for nranks at init */
  struct loom_step *sched_steps;
  size_t *sched_blocks; /* 2 * nranks: offsets, then counts */
  volatile int abort_flag;
  int wake_fd;
  /* loomSuccess, loomInProgress (non-blocking init) or the error that broke
   * the communicator; read by loomCommGetAsyncError from any thread. */
  volatile int async_error;
  char async_text[1024];    /* the message of async_error, for any thread */
  pthread_mutex_t op_lock; /* held while a collective runs */
  pthread_t init_thread;
  int init_thread_started;     /* guarded by init_join_lock */
  pthread_mutex_t init_join_lock;
  int finalized;
  /* for a non-blocking init */
  loomUniqueId init_id;
};

/* Checks a comm handle and that the communicator can run a collective. */
loomResult_t loom_comm_check_usable(loomComm_t comm, const char *fn);
/* Marks the communicator broken by `res`, keeping this thread's last error
 * text for other threads and later calls. */
void loom_comm_set_broken(loomComm_t comm, loomResult_t res);

#endif
