/*
 * comm.h — the communicator object behind loomComm_t.
 */
#ifndef LOOM_API_COMM_H
#define LOOM_API_COMM_H

#include "api/plan_cache.h"
#include "bootstrap/bootstrap.h"
#include "core/oplock.h"
#include "device/device.h"
#include "engine/engine.h"
#include "loom.h"
#include "plan/plan.h"
#include "topo/topo.h"
#include "transport.h"

#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>

#define LOOM_COMM_MAGIC 0x4c434f4du /* "LCOM": catches stale or bogus handles */
#define LOOM_MAX_CUSTOM_OPS 256

struct loomComm {
  unsigned magic;
  int rank, nranks;
  char name[64];
  int timeout_ms;
  struct loom_bootstrap *bs;
  struct loom_engine engine; /* holds the transport: tp, tp_ctx, conns per rank */
  /* during init only: every rank's transport address blob, gathered with
   * the topology records (comm_transport.c) */
  char *tp_addrs;
  size_t tp_addr_bytes;
  struct loom_cost_links links; /* what the transports report, for the tuner */
  /* schedule storage for one call (grown for large send/recv batches) */
  struct loom_step *sched_steps;
  int sched_cap;
  struct loom_plan_cache plans; /* the last call shapes' schedules */
  /* work space, grown on demand, used under op_lock */
  void *scratch;        /* SCRATCH of schedules */
  size_t scratch_bytes;
  void *premul;         /* a premultiplied copy of sendbuff (PreMulSum) */
  size_t premul_bytes;
  void *bucket_send, *bucket_recv; /* fused calls */
  size_t bucket_send_bytes, bucket_recv_bytes;
  /* loomRedOpCreatePreMulSum ops: loomNumOps + i */
  struct loom_custom_op {
    int in_use;
    loomDataType_t datatype;
    unsigned char scalar[8];
  } custom_ops[LOOM_MAX_CUSTOM_OPS];
  pthread_mutex_t ops_lock; /* guards custom_ops and the straggler callback (not
                               op_lock: a collective may run) */
  loomStragglerCallback_t late_fn; /* loomCommSetStragglerCallback */
  void *late_arg;
  unsigned coll_seq; /* collectives run so far (fingerprints carry it) */
  size_t bucket_bytes; /* LOOM_BUCKET_BYTES, read at init */
  int device_ipc;      /* LOOM_DEVICE_IPC, read at init */
  size_t host_ipc_min; /* LOOM_HOST_IPC_MIN, read at init (0: off) */
  /* After a host-IPC handshake found malloc'd buffers, no handshake until
   * coll_seq reaches host_ipc_resume; the wait doubles at each such find
   * (api/ipc_coll.c) */
  unsigned host_ipc_resume, host_ipc_backoff;
  struct loom_ipc_state *ipc[LOOM_NUM_DEVICES]; /* api/ipc_state.c, per device */
  int nchannels;                   /* LOOM_NCHANNELS (read at init) */
  unsigned proto[LOOM_COLL_COUNT]; /* LOOM_PROTO (read at init): allowed protocols per
                                     collective, 0 = any */
  unsigned algo[LOOM_COLL_COUNT]; /* LOOM_ALGO (read at init): allowed algorithms per
                                     collective, 1 << enum loom_algo each; 0 = any */
  struct loom_topo topo; /* which ranks share a node, each node's hardware; built at init */
  struct loom_tune tune; /* LOOM_TUNE_FILE's entries for this rank and node count */
  /* stream tasks queued for this communicator and not yet finished */
  atomic_int inflight; /* queued or running tasks; the lock and cond only for waiting */
  atomic_int inflight_waiters; /* threads in loom_comm_wait_tasks */
  pthread_mutex_t inflight_lock;
  pthread_cond_t inflight_done;
  atomic_int abort_flag;
  int wake_fd;
  /* loomSuccess, loomInProgress (non-blocking init) or the error that broke
   * the communicator; read by loomCommGetAsyncError from any thread. */
  atomic_int async_error;
  char async_text[1024];    /* the message of async_error, for any thread */
  struct loom_oplock op_lock; /* held while a collective runs */
  pthread_t init_thread;
  int init_thread_started;     /* guarded by init_join_lock */
  pthread_mutex_t init_join_lock;
  int finalized;
  /* for a non-blocking init: the ids (one per bootstrap root) */
  loomUniqueId *init_ids;
  int init_nids;
  struct loom_trace *trace; /* the flight recorder (trace/trace.h); NULL when off */
  /* shrink.c: this rank's shrink port (listening from init, served only
   * during a shrink), every rank's address of it (LOOM_SOCKADDR_BYTES each,
   * from the topology all-gather), shrinks of this communicator so far */
  int shrink_fd;
  union loom_sockaddr shrink_addr;
  uint8_t *shrink_addrs;
  unsigned shrinks;
  atomic_int revoked; /* loomCommRevoke was called */
};

/* Checks that comm is a live handle (any state). */
loomResult_t loom_comm_check_handle(loomComm_t comm, const char *fn);
/* What loomCommAbort and loomCommRevoke share: ends the communicator's
 * waits (the abort flag, the engine's wake fd), waits for a non-blocking
 * init, queued stream work and a call in another thread to end, marks it
 * broken with loomRemoteError and the text `broken` when it was not
 * already (NULL: leaves it), dumps the recorder once (`reason`), and tells
 * the ring successor (a notice of notice_kind). */
void loom_comm_stop(loomComm_t comm, int notice_kind, const char *reason, const char *broken);
/* split.c: the config of a communicator made from `parent` (split,
 * shrink): config's fields (NULL: defaults), with an unset timeout_ms
 * taking the parent's and a NULL commName "<parent>.<suffix>" (written
 * into name, len bytes). */
void loom_comm_child_config(const loomComm_t parent, const loomConfig_t *config,
                            const char *suffix, loomConfig_t *cfg, char *name, size_t len);
/* shrink.c: opens this rank's shrink port at init (before the topology
 * all-gather, which publishes it). */
loomResult_t loom_comm_shrink_listen(loomComm_t comm);

/* Checks a comm handle and that the communicator can run a collective. */
loomResult_t loom_comm_check_usable(loomComm_t comm, const char *fn);
/* Marks the communicator broken by `res`, keeping this thread's last error
 * text for other threads and later calls. */
void loom_comm_set_broken(loomComm_t comm, loomResult_t res);
/* The size of a loomConfig_t of Loom 0.1 (before the algo field): older
 * programs pass it and are still accepted. */
#define LOOM_CONFIG_V1_SIZE offsetof(loomConfig_t, algo)
/* config->algo when the config is large enough to have it, else NULL. */
const char *loom_config_algo(const loomConfig_t *config);
/* Checks a loomConfig_t (NULL: defaults) and reads its settings. */
loomResult_t loom_read_config(const loomConfig_t *config, int *blocking, int *timeout_ms,
                              const char **name);
/* Grows *buf to at least `bytes` (64-byte aligned); loomSystemError on
 * failure. */
loomResult_t loom_comm_grow(void **buf, size_t *cap, size_t bytes);
/* comm_transport.c: start the transports (this rank's address blob into
 * tp_addrs), then, once comm_topo.c's all-gather has filled every rank's,
 * connect (and free tp_addrs). */
loomResult_t loom_comm_transport_start(loomComm_t comm);
loomResult_t loom_comm_transport_connect(loomComm_t comm);
/* comm_topo.c: builds comm->topo at init, between the two halves above
 * (its all-gather carries the transport addresses when tp_addrs is set),
 * and logs what it means for the algorithms (after). */
loomResult_t loom_comm_topo_setup(loomComm_t comm);
void loom_comm_topo_report(loomComm_t comm);
/* Stream tasks: counted so Finalize, Destroy and Abort wait for them. */
void loom_comm_task_begin(loomComm_t comm);
void loom_comm_task_end(loomComm_t comm);
void loom_comm_wait_tasks(loomComm_t comm);
/* comm_trace.c: the flight recorder.  Opened at the end of init (NULL
 * when LOOM_TRACE_BUFFER=0). */
void loom_comm_trace_open(loomComm_t comm);
/* The communicator failed with res (or is aborted: reason "abort"): its
 * one dump on error (LOOM_DUMP_ON_ERROR), into LOOM_TRACE_DUMP_DIR or, when
 * unset, the last calls in a WARN.  reason NULL: from res. */
void loom_comm_trace_failed(loomComm_t comm, loomResult_t res, const char *reason);
/* A communicator call (LOOM_TRACE_SPLIT, LOOM_TRACE_FINALIZE) started and
 * ended, recorded like a collective. */
uint64_t loom_comm_trace_op(loomComm_t comm, int kind);
void loom_comm_trace_op_ended(loomComm_t comm, uint64_t id, loomResult_t res);

#endif
