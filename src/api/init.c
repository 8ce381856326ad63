/*
 * init.c — communicator life cycle: unique id, init (blocking or not),
 * finalize, destroy, abort, and the small queries.
 */
#include "api/comm.h"
#include "trace/trace.h"
#include "api/ipc_coll.h"
#include "api/task.h"
#include "core/config.h"
#include "core/error.h"
#include "core/timeutil.h"
#include "device/reduce.h"
#include "engine/fingerprint.h"
#include "plan/plan.h"

#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* The last ids loomGetUniqueId made in this process: a rank other than 0
 * initialising with one of them is, almost always, a rank that made its
 * own id instead of receiving rank 0's (mpirun without a broadcast). */
#define MADE_IDS 16
static struct {
  pthread_mutex_t lock;
  loomUniqueId ids[MADE_IDS];
  int n;
} made = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int made_here(const loomUniqueId *id) {
  int found = 0;
  pthread_mutex_lock(&made.lock);
  for (int i = 0; i < made.n && i < MADE_IDS && !found; i++)
    found = memcmp(&made.ids[i], id, sizeof *id) == 0;
  pthread_mutex_unlock(&made.lock);
  return found;
}

loomResult_t loomGetUniqueId(loomUniqueId *uniqueId) {
  if (uniqueId == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "loomGetUniqueId: uniqueId is NULL");
  LOOM_CHECK(loom_bootstrap_make_id(uniqueId));
  pthread_mutex_lock(&made.lock);
  made.ids[made.n++ % MADE_IDS] = *uniqueId;
  pthread_mutex_unlock(&made.lock);
  return loomSuccess;
}

/* Says at once what a job whose every rank made its own id would
 * otherwise learn only at LOOM_BOOTSTRAP_TIMEOUT. */
static void warn_own_id(const loomUniqueId *id, int rank, int nranks) {
  const char *comm_id = loom_param_str(LOOM_PARAM_COMM_ID);
  if (rank == 0 || nranks < 2 || (comm_id != NULL && *comm_id != '\0') || !made_here(id))
    return;
  LOOM_WARN(LOOM_LOG_INIT,
            "rank %d of %d initialises with an id this process made itself "
            "(loomGetUniqueId): if every rank made its own, each waits for ranks that never "
            "come. Make the id on one rank and give it to the others (MPI_Bcast of the "
            "loomUniqueId, or loomCommInitFromMPI from loom_mpi.h), or set "
            "LOOM_COMM_ID=host:port for the whole job", rank, nranks);
}

loomResult_t loom_comm_check_usable(loomComm_t comm, const char *fn) {
  if (comm == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL, "%s: comm is NULL", fn);
  if (comm->magic != LOOM_COMM_MAGIC)
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "%s: comm is not a live communicator (destroyed, or not "
                      "made by loomCommInitRank)",
                      fn);
  loom_log_set_rank(comm->rank); /* log lines of this call carry its rank */
  if (atomic_load_explicit(&comm->revoked, memory_order_acquire))
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "%s: rank %d: the communicator was revoked; only loomCommShrink, "
                      "loomCommDump, loomCommGetAsyncError, loomCommDestroy or loomCommAbort "
                      "may follow",
                      fn, comm->rank);
  if (atomic_load_explicit(&comm->abort_flag, memory_order_acquire))
    return loom_error(loomRemoteError, LOOM_LOG_COLL,
                      "%s: rank %d: the communicator was aborted", fn, comm->rank);
  int state = atomic_load_explicit(&comm->async_error, memory_order_acquire);
  if (state == loomInProgress)
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "%s: rank %d: the communicator is still initialising (wait until "
                      "loomCommGetAsyncError reports loomSuccess)",
                      fn, comm->rank);
  if (state != loomSuccess)
    return loom_error((loomResult_t)state, LOOM_LOG_COLL,
                      "%s: rank %d: the communicator was broken by an earlier error; "
                      "destroy or abort it.  The error was: %s",
                      fn, comm->rank, comm->async_text);
  if (comm->finalized)
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "%s: rank %d: the communicator was finalized; only "
                      "loomCommDestroy may follow",
                      fn, comm->rank);
  return loomSuccess;
}

void loom_comm_set_broken(loomComm_t comm, loomResult_t res) {
  snprintf(comm->async_text, sizeof comm->async_text, "%s", loom_last_error());
  atomic_store_explicit(&comm->async_error, (int)res, memory_order_release);
  if (res != loomSuccess && res != loomInProgress)
    loom_comm_trace_failed(comm, res, NULL);
}

loomResult_t loom_comm_grow(void **buf, size_t *cap, size_t bytes) {
  if (bytes <= *cap)
    return loomSuccess;
  free(*buf);
  *buf = NULL;
  *cap = 0;
  size_t rounded = (bytes + 63) & ~(size_t)63;
  if (posix_memalign(buf, 64, rounded) != 0) {
    *buf = NULL;
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (%zu bytes of work space)",
                      bytes);
  }
  *cap = rounded;
  return loomSuccess;
}

void loom_comm_task_begin(loomComm_t comm) { atomic_fetch_add(&comm->inflight, 1); }

/* The count changes without the lock.  A waiter registers (waiters + 1)
 * before it reads the count and the last task out reads waiters after it
 * wrote the count (both sequentially consistent), so at least one of them
 * sees the other: either the waiter sees 0, or the task sees the waiter
 * and broadcasts under the lock, which it can only take once the waiter
 * sleeps in pthread_cond_wait. */
void loom_comm_task_end(loomComm_t comm) {
  if (atomic_fetch_sub(&comm->inflight, 1) == 1 && atomic_load(&comm->inflight_waiters) > 0) {
    pthread_mutex_lock(&comm->inflight_lock);
    pthread_cond_broadcast(&comm->inflight_done);
    pthread_mutex_unlock(&comm->inflight_lock);
  }
}

void loom_comm_wait_tasks(loomComm_t comm) {
  if (atomic_load(&comm->inflight) == 0) /* the common case: nothing queued */
    return;
  pthread_mutex_lock(&comm->inflight_lock);
  atomic_fetch_add(&comm->inflight_waiters, 1);
  while (atomic_load(&comm->inflight) > 0)
    pthread_cond_wait(&comm->inflight_done, &comm->inflight_lock);
  atomic_fetch_sub(&comm->inflight_waiters, 1);
  pthread_mutex_unlock(&comm->inflight_lock);
}

static const char *transport_name(const struct loom_engine *e) {
  if (e->tp == NULL)
    return "none (1 rank)";
  return e->tp->ctx_name != NULL ? e->tp->ctx_name(e->tp_ctx) : e->tp->name;
}

/* When the network transport connects its peers, for the init log. */
static const char *connect_when(void) {
  return loom_connect_lazy() == 0 ? "all at init" : "tcp on first use";
}

/* The engine's straggler warning, passed to the user's callback. */
static void comm_on_late(void *arg, int late_rank, const char *text) {
  loomComm_t comm = arg;
  pthread_mutex_lock(&comm->ops_lock);
  loomStragglerCallback_t fn = comm->late_fn;
  void *fn_arg = comm->late_arg;
  pthread_mutex_unlock(&comm->ops_lock);
  if (fn != NULL)
    fn(comm, late_rank, text, fn_arg);
}

static loomResult_t comm_setup(loomComm_t comm) {
  loom_log_set_rank(comm->rank);
  uint64_t t0 = loom_now_ns();
  LOOM_CHECK(loom_bootstrap_init(comm->init_ids, comm->init_nids, comm->rank, comm->nranks,
                                 &comm->bs));
  LOOM_CHECK(loom_comm_shrink_listen(comm)); /* its address travels with the topology */
  uint64_t t_bootstrap = loom_now_ns();
  LOOM_CHECK(loom_comm_transport_start(comm)); /* its addresses travel with the topology */
  uint64_t t_start = loom_now_ns();
  LOOM_CHECK(loom_comm_topo_setup(comm));
  uint64_t t_topo = loom_now_ns();
  LOOM_CHECK(loom_comm_transport_connect(comm));
  uint64_t t_connect = loom_now_ns();
  struct loom_engine *e = &comm->engine;
  e->rank = comm->rank;
  e->nranks = comm->nranks;
  e->peek = e->tp != NULL ? e->tp->peek : NULL;
  e->bs = comm->bs;
  e->abort_flag = &comm->abort_flag;
  e->wake_fd = comm->wake_fd;
  e->timeout_ms = comm->timeout_ms;
  e->spin_us = (int)loom_param_int(LOOM_PARAM_SPIN_US);
  e->straggler_warn_ms = (int)loom_param_int(LOOM_PARAM_STRAGGLER_WARN_MS);
  e->on_late = comm_on_late;
  e->on_late_arg = comm;
  e->busy_wait = e->tp != NULL && loom_transport_busy_wait(e->tp, e->tp_ctx);
  e->chunk_bytes = (size_t)loom_param_int(LOOM_PARAM_CHUNK_BYTES);
  LOOM_CHECK(loom_engine_init(e));
  loom_comm_topo_report(comm);
  loom_comm_trace_open(comm);
  uint64_t t_end = loom_now_ns();
  LOOM_INFO(LOOM_LOG_INIT,
            "comm %s: rank %d of %d ready in %.1f ms (transport %s, timeout %d ms, "
            "chunk %zu bytes); phases: bootstrap %.1f ms, topology and addresses %.1f ms, "
            "transports %.1f ms (connections: %s), engine %.1f ms",
            comm->name, comm->rank, comm->nranks, (double)(t_end - t0) / 1e6,
            transport_name(e), comm->timeout_ms, e->chunk_bytes,
            (double)(t_bootstrap - t0) / 1e6, (double)(t_topo - t_start) / 1e6,
            (double)(t_start - t_bootstrap + t_connect - t_topo) / 1e6, connect_when(),
            (double)(t_end - t_connect) / 1e6);
  return loomSuccess;
}

static void *init_thread_main(void *arg) {
  loomComm_t comm = arg;
  loom_socket_watch_abort(&comm->abort_flag); /* loomCommAbort ends our waits */
  loomResult_t res = comm_setup(comm);
  loom_comm_set_broken(comm, res); /* loomSuccess: ready */
  return NULL;
}

loomResult_t loom_read_config(const loomConfig_t *config, int *blocking, int *timeout_ms,
                              const char **name) {
  *blocking = 1;
  *timeout_ms = (int)loom_param_int(LOOM_PARAM_TIMEOUT_MS);
  *name = NULL;
  if (config == NULL)
    return loomSuccess;
  if (config->magic != LOOM_CONFIG_MAGIC || config->size < LOOM_CONFIG_V1_SIZE)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "loomCommInitRankConfig: config was not initialised with "
                      "LOOM_CONFIG_INITIALIZER");
  if (config->blocking != LOOM_CONFIG_UNDEF_INT) {
    if (config->blocking != 0 && config->blocking != 1)
      return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                        "loomCommInitRankConfig: config.blocking=%d (must be 0 or 1)",
                        config->blocking);
    *blocking = config->blocking;
  }
  if (config->timeout_ms != LOOM_CONFIG_UNDEF_INT) {
    if (config->timeout_ms < 0)
      return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                        "loomCommInitRankConfig: config.timeout_ms=%d (must be >= 0; "
                        "0 = no timeout)",
                        config->timeout_ms);
    *timeout_ms = config->timeout_ms;
  }
  *name = config->commName;
  return loomSuccess;
}

const char *loom_config_algo(const loomConfig_t *config) {
  if (config == NULL || config->size < offsetof(loomConfig_t, algo) + sizeof config->algo)
    return NULL;
  return config->algo;
}

/* config.algo or LOOM_ALGO, parsed per communicator before anything else,
 * so that a bad spec fails at once (what it means for this machine is
 * logged once the topology is known: loom_comm_topo_report). */
static loomResult_t read_algo(const loomConfig_t *config, unsigned algo[LOOM_COLL_COUNT]) {
  char err[256];
  const char *spec = loom_config_algo(config);
  int from_config = spec != NULL;
  if (!from_config)
    spec = loom_param_str(LOOM_PARAM_ALGO);
  if (loom_algo_parse(spec, algo, err, sizeof err) != 0)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "loomCommInitRank: %s%s",
                      from_config ? "config.algo: " : "", err);
  return loomSuccess;
}

static void comm_free(loomComm_t comm) {
  loom_trace_free(comm->trace);
  loom_ipc_state_free(comm);
  if (comm->engine.tp != NULL && comm->engine.tp_ctx != NULL)
    comm->engine.tp->fini(comm->engine.tp_ctx);
  loom_bootstrap_close(comm->bs);
  loom_engine_fini(&comm->engine);
  if (comm->shrink_fd >= 0)
    close(comm->shrink_fd);
  free(comm->shrink_addrs);
  free(comm->tp_addrs); /* set when init failed between transport start and connect */
  if (comm->wake_fd >= 0)
    close(comm->wake_fd);
  pthread_mutex_destroy(&comm->init_join_lock);
  pthread_mutex_destroy(&comm->inflight_lock);
  pthread_mutex_destroy(&comm->ops_lock);
  pthread_cond_destroy(&comm->inflight_done);
  free(comm->engine.conns);
  free(comm->init_ids);
  free(comm->sched_steps);
  loom_plan_cache_free(&comm->plans);
  free(comm->scratch);
  free(comm->premul);
  free(comm->bucket_send);
  free(comm->bucket_recv);
  loom_topo_free(&comm->topo);
  loom_tune_free(&comm->tune);
  comm->magic = 0;
  free(comm);
}

static loomResult_t init_sync(loomComm_t comm) {
  const char *what = "loomCommInitRank: creating the communicator's locks";
  loom_oplock_init(&comm->op_lock);
  LOOM_CHECK(
      loom_check_errnum(pthread_mutex_init(&comm->init_join_lock, NULL), LOOM_LOG_INIT, what));
  LOOM_CHECK(
      loom_check_errnum(pthread_mutex_init(&comm->inflight_lock, NULL), LOOM_LOG_INIT, what));
  LOOM_CHECK(loom_check_errnum(pthread_mutex_init(&comm->ops_lock, NULL), LOOM_LOG_INIT, what));
  return loom_check_errnum(pthread_cond_init(&comm->inflight_done, NULL), LOOM_LOG_INIT, what);
}

/* The arguments every init checks first. */
static loomResult_t check_init_args(loomComm_t *out, int nranks, int rank, const char *fn) {
  if (out == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: comm is NULL", fn);
  *out = NULL;
  if (nranks < 1)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: nranks=%d (must be >= 1)", fn,
                      nranks);
  if (rank < 0 || rank >= nranks)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: rank=%d is outside [0, %d)",
                      fn, rank, nranks);
  return loomSuccess;
}

static loomResult_t comm_init(loomComm_t *out, int nranks, const loomUniqueId *ids, int nids,
                              int rank, loomConfig_t *config) {
  int blocking, timeout_ms;
  const char *name;
  LOOM_CHECK(loom_read_config(config, &blocking, &timeout_ms, &name));
  unsigned algo[LOOM_COLL_COUNT], proto[LOOM_COLL_COUNT];
  LOOM_CHECK(read_algo(config, algo));
  char proto_err[256];
  if (loom_proto_parse(loom_param_str(LOOM_PARAM_PROTO), proto, proto_err, sizeof proto_err) != 0)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "loomCommInitRank: %s", proto_err);
  loomComm_t comm = calloc(1, sizeof *comm);
  if (comm == NULL || (comm->engine.conns = calloc((size_t)nranks, sizeof(void *))) == NULL ||
      (comm->sched_steps = malloc(sizeof(struct loom_step) *
                                  (size_t)LOOM_SCHED_MAX_STEPS(nranks))) == NULL) {
    if (comm != NULL)
      free(comm->engine.conns);
    free(comm);
    return loom_error(loomSystemError, LOOM_LOG_INIT, "out of memory");
  }
  comm->magic = LOOM_COMM_MAGIC;
  comm->sched_cap = LOOM_SCHED_MAX_STEPS(nranks);
  comm->bucket_bytes = (size_t)loom_param_int(LOOM_PARAM_BUCKET_BYTES);
  comm->device_ipc = (int)loom_param_int(LOOM_PARAM_DEVICE_IPC);
  comm->host_ipc_min = (size_t)loom_param_int(LOOM_PARAM_HOST_IPC_MIN);
  memcpy(comm->algo, algo, sizeof comm->algo);
  memcpy(comm->proto, proto, sizeof comm->proto);
  comm->nchannels = (int)loom_param_int(LOOM_PARAM_NCHANNELS);
  comm->rank = rank;
  comm->nranks = nranks;
  comm->timeout_ms = timeout_ms;
  snprintf(comm->name, sizeof comm->name, "%s", name ? name : "loom");
  comm->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  comm->shrink_fd = -1;
  loomResult_t sync = init_sync(comm);
  if (sync != loomSuccess) {
    comm_free(comm);
    return sync;
  }
  comm->init_ids = malloc(sizeof *ids * (size_t)nids);
  if (comm->init_ids == NULL) {
    comm_free(comm);
    return loom_error(loomSystemError, LOOM_LOG_INIT, "out of memory");
  }
  memcpy(comm->init_ids, ids, sizeof *ids * (size_t)nids);
  comm->init_nids = nids;
  if (!blocking) {
    atomic_store_explicit(&comm->async_error, loomInProgress, memory_order_relaxed);
    int err = pthread_create(&comm->init_thread, NULL, init_thread_main, comm);
    if (err != 0) {
      comm_free(comm);
      return loom_error(loomSystemError, LOOM_LOG_INIT, "cannot start the init thread: %s",
                        strerror(err));
    }
    comm->init_thread_started = 1;
    *out = comm;
    return loomInProgress;
  }
  int caller_log_rank = loom_log_get_rank();
  loomResult_t res = comm_setup(comm);
  loom_log_set_rank(caller_log_rank);
  if (res != loomSuccess) {
    comm_free(comm);
    return res;
  }
  atomic_store_explicit(&comm->async_error, loomSuccess, memory_order_relaxed);
  *out = comm;
  return loomSuccess;
}

loomResult_t loomCommInitRankConfig(loomComm_t *out, int nranks, loomUniqueId commId,
                                    int rank, loomConfig_t *config) {
  LOOM_CHECK(check_init_args(out, nranks, rank, "loomCommInitRank[Config]"));
  warn_own_id(&commId, rank, nranks);
  return comm_init(out, nranks, &commId, 1, rank, config);
}

loomResult_t loomCommInitRankScalable(loomComm_t *out, int nranks, int rank, int nIds,
                                      loomUniqueId *commIds, loomConfig_t *config) {
  LOOM_CHECK(check_init_args(out, nranks, rank, "loomCommInitRankScalable"));
  if (commIds == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "loomCommInitRankScalable: commIds is NULL");
  if (nIds < 1 || nIds > nranks)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "loomCommInitRankScalable: nIds=%d is outside [1, nranks=%d]", nIds,
                      nranks);
  return comm_init(out, nranks, commIds, nIds, rank, config);
}

loomResult_t loomCommInitRank(loomComm_t *comm, int nranks, loomUniqueId commId, int rank) {
  return loomCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

loomResult_t loom_comm_check_handle(loomComm_t comm, const char *fn) {
  if (comm == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: comm is NULL", fn);
  if (comm->magic != LOOM_COMM_MAGIC)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "%s: comm is not a live communicator", fn);
  return loomSuccess;
}

/* Finalize and Abort may both wait for a non-blocking init from different
 * threads; only one may join it. */
static void join_init_thread(loomComm_t comm) {
  pthread_mutex_lock(&comm->init_join_lock);
  if (comm->init_thread_started) {
    loom_check_errnum(pthread_join(comm->init_thread, NULL), LOOM_LOG_INIT,
                      "joining the init thread");
    comm->init_thread_started = 0;
  }
  pthread_mutex_unlock(&comm->init_join_lock);
}

loomResult_t loomCommFinalize(loomComm_t comm) {
  LOOM_CHECK(loom_comm_check_handle(comm, "loomCommFinalize"));
  join_init_thread(comm);
  loom_comm_wait_tasks(comm);
  LOOM_CHECK(loom_comm_check_usable(comm, "loomCommFinalize"));
  loom_oplock_lock(&comm->op_lock);
  loom_log_set_rank(comm->rank);
  uint64_t trace_id = loom_comm_trace_op(comm, LOOM_TRACE_FINALIZE);
  /* First over the data connections, fingerprinted, so that a rank still
   * in a collective names this call instead of waiting on the bootstrap
   * ring; then the ring barrier, so that no rank exits (closing its
   * sockets) before every rank has read the fence's last messages. */
  loomResult_t res = loom_execute_fence(comm, LOOM_FP_FINALIZE);
  if (res == loomSuccess)
    res = loom_bootstrap_barrier(comm->bs);
  loom_comm_trace_op_ended(comm, trace_id, res);
  if (res == loomSuccess)
    comm->finalized = 1;
  else
    loom_comm_set_broken(comm, res);
  loom_oplock_unlock(&comm->op_lock);
  return res;
}

loomResult_t loomCommDestroy(loomComm_t comm) {
  if (comm == NULL)
    return loomSuccess; /* as free(NULL) */
  LOOM_CHECK(loom_comm_check_handle(comm, "loomCommDestroy"));
  join_init_thread(comm);
  loom_comm_wait_tasks(comm);
  loom_oplock_lock(&comm->op_lock);
  loom_oplock_unlock(&comm->op_lock);
  comm_free(comm);
  return loomSuccess;
}

static void interrupt(loomComm_t comm) {
  atomic_store_explicit(&comm->abort_flag, 1, memory_order_release);
  if (comm->wake_fd >= 0) {
    uint64_t one = 1;
    ssize_t k = write(comm->wake_fd, &one, sizeof one);
    (void)k;
  }
}

void loom_comm_stop(loomComm_t comm, int notice_kind, const char *reason, const char *broken) {
  interrupt(comm);
  join_init_thread(comm);
  /* Queued stream work now fails at once; wait for it to drain. */
  loom_comm_wait_tasks(comm);
  /* Waits for a collective running in another thread to notice the flag. */
  loom_oplock_lock(&comm->op_lock);
  if (broken != NULL &&
      atomic_load_explicit(&comm->async_error, memory_order_acquire) == loomSuccess) {
    snprintf(comm->async_text, sizeof comm->async_text, "%s", broken);
    atomic_store_explicit(&comm->async_error, loomRemoteError, memory_order_release);
  }
  loom_comm_trace_failed(comm, loomRemoteError, reason);
  if (comm->bs != NULL) {
    struct loom_notice nt = {.suspect = comm->rank, .reporter = comm->rank, .kind = notice_kind};
    loom_bootstrap_send_notice(comm->bs, &nt);
  }
  loom_oplock_unlock(&comm->op_lock);
}

loomResult_t loomCommAbort(loomComm_t comm) {
  if (comm == NULL)
    return loomSuccess;
  LOOM_CHECK(loom_comm_check_handle(comm, "loomCommAbort"));
  loom_comm_stop(comm, LOOM_NOTICE_ABORT, "abort", NULL);
  comm_free(comm);
  return loomSuccess;
}

loomResult_t loomCommGetAsyncError(loomComm_t comm, loomResult_t *asyncError) {
  LOOM_CHECK(loom_comm_check_handle(comm, "loomCommGetAsyncError"));
  if (asyncError == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "loomCommGetAsyncError: asyncError is NULL");
  *asyncError = (loomResult_t)atomic_load_explicit(&comm->async_error, memory_order_acquire);
  if (*asyncError != loomSuccess && *asyncError != loomInProgress)
    loom_set_last_error(comm->async_text); /* it may have failed on another thread */
  return loomSuccess;
}

loomResult_t loomCommSetStragglerCallback(loomComm_t comm, loomStragglerCallback_t fn,
                                          void *arg) {
  LOOM_CHECK(loom_comm_check_handle(comm, "loomCommSetStragglerCallback"));
  pthread_mutex_lock(&comm->ops_lock);
  comm->late_fn = fn;
  comm->late_arg = arg;
  pthread_mutex_unlock(&comm->ops_lock);
  return loomSuccess;
}

loomResult_t loomCommCount(const loomComm_t comm, int *count) {
  LOOM_CHECK(loom_comm_check_handle(comm, "loomCommCount"));
  if (count == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "loomCommCount: count is NULL");
  *count = comm->nranks;
  return loomSuccess;
}

loomResult_t loomCommUserRank(const loomComm_t comm, int *rank) {
  LOOM_CHECK(loom_comm_check_handle(comm, "loomCommUserRank"));
  if (rank == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "loomCommUserRank: rank is NULL");
  *rank = comm->rank;
  return loomSuccess;
}
