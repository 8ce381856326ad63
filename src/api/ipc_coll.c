/*
 * ipc_coll.c — the collectives of ipc_coll.h: the handshake, each rank's
 * share of the device work, and the barriers between phases.
 *
 * The work is split by slices of the result, one per rank, so that each
 * element is reduced once and every rank ends with the same bits:
 *   all-reduce      rank r reduces slice r of every input into its own
 *                   output (phase 1), then copies the others' slices
 *                   from their outputs (phase 2);
 *   reduce          rank r reduces slice r into the root's output;
 *   reduce-scatter  rank r reduces block r of every input into its output;
 *   all-gather      rank r copies every rank's input into its output;
 *   broadcast       rank r copies the root's input into its output.
 * A reduction starts with the input that shares memory with its output
 * (in place), so that it is read before it is overwritten.
 */
#include "api/comm.h"
#include "api/ipc_coll.h"
#include "core/error.h"
#include "core/log.h"
#include "core/procid.h"
#include "device/reduce.h"
#include "engine/fingerprint.h"
#include "stream/stream.h"

#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static int ipc_collective(enum loom_coll coll) {
  return coll == LOOM_COLL_ALLREDUCE || coll == LOOM_COLL_ALLGATHER ||
         coll == LOOM_COLL_REDUCESCATTER || coll == LOOM_COLL_BROADCAST ||
         coll == LOOM_COLL_REDUCE;
}

/* A host call large enough to try: every rank of a correct program
 * decides alike (the call's bytes, LOOM_HOST_IPC_MIN, the node count, and
 * the calls and handshakes so far, which set host_ipc_resume). */
static int host_ipc_wants(const struct loom_call *c) {
  loomComm_t comm = c->comm;
  return comm->host_ipc_min != 0 &&
         c->count * loom_datatype_size(c->datatype) >= comm->host_ipc_min &&
         (int)(comm->coll_seq - comm->host_ipc_resume) >= 0 && comm->nranks >= 2 &&
         comm->topo.nnodes == 1 && ipc_collective(c->coll) && !c->premul;
}

/* A handshake found buffers some rank cannot share: a program that
 * passes malloc'd buffers (a framework's tensors) usually always does, so
 * the next handshakes wait 1, 2, 4 ... up to LOOM_HOST_IPC_BACKOFF_MAX
 * calls; one that finds every buffer shareable starts over.  Every rank
 * sees the same records and counts the same calls, so all skip alike. */
static void host_ipc_back_off(loomComm_t comm, int shared) {
  if (shared) {
    comm->host_ipc_backoff = 0;
    return;
  }
  unsigned wait = comm->host_ipc_backoff ? 2 * comm->host_ipc_backoff : 1;
  comm->host_ipc_backoff = wait < LOOM_HOST_IPC_BACKOFF_MAX ? wait : LOOM_HOST_IPC_BACKOFF_MAX;
  comm->host_ipc_resume = comm->coll_seq + comm->host_ipc_backoff;
}

int loom_ipc_wants(const struct loom_call *c) {
  loomComm_t comm = c->comm;
  if (c->device == loomDeviceHost)
    return host_ipc_wants(c);
  if (!comm->device_ipc || comm->nranks < 2 ||
      comm->topo.nnodes != 1 || !ipc_collective(c->coll) || c->premul)
    return 0;
  const struct loom_device_ops *dev;
  return loom_device_get(c->device, &dev, "IPC") == loomSuccess && dev->ipc_handle_bytes > 0;
}

/* The buffers this rank uses in c: what it reads and what it writes. */
static void used_buffers(const struct loom_call *c, const void **send, void **recv) {
  int rank = c->comm->rank;
  *send = c->sendbuff;
  *recv = c->recvbuff;
  if (c->coll == LOOM_COLL_BROADCAST && rank != c->root)
    *send = NULL;
  if (c->coll == LOOM_COLL_REDUCE && rank != c->root)
    *recv = NULL;
  if (c->send_bytes == 0)
    *send = NULL;
  if (c->recv_bytes == 0)
    *recv = NULL;
}

static int on_host(const struct loom_ipc_run *r) { return r->dev->device == loomDeviceHost; }

/* The backend's stream work is done (the host's ran as it was queued). */
static loomResult_t sync_stream(const struct loom_device_ops *dev, void *stream) {
  return dev->stream_sync != NULL ? dev->stream_sync(stream) : loomSuccess;
}

/* A host buffer the peers can map: loomMemAlloc's (or none). */
static int host_mappable(const void *p) {
  uintptr_t base;
  size_t size;
  return p == NULL || loom_device_host_ops.classify(p, &base, &size);
}

/* Whether the node's other ranks can open this process's memfds through
 * /proc/PID/fd: the kernel lets a process of the same user do so while
 * this one is dumpable (not after setuid, or PR_SET_DUMPABLE 0), and
 * where the PID means the same process (all_direct: one PID namespace). */
static int peers_can_open(void) { return prctl(PR_GET_DUMPABLE) == 1; }

static int is_host(const void *p) {
  const struct loom_device_ops *ops;
  uintptr_t base;
  size_t size;
  return p != NULL && loom_device_of(p, &ops, &base, &size) == loomDeviceHost;
}

/* A host buffer of a call on device buffers (allowed, as on the staged
 * path) cannot be mapped by the peers: it is replaced by the
 * communicator's device scratch, filled before the handshake (input) or
 * copied back at the end (output).  At most one of the two is host
 * memory, so they never share memory. */
static loomResult_t host_to_scratch(struct loom_ipc_run *r, struct loom_ipc_state *st,
                                    const void **send, void **recv) {
  const struct loom_call *c = r->c;
  void *stream = loom_ipc_stream(st);
  if (on_host(r))
    return loomSuccess;
  if (is_host(*send)) {
    void *s;
    LOOM_CHECK(loom_ipc_scratch(st, 0, c->send_bytes, &s));
    LOOM_CHECK(r->dev->memcpy_async(s, *send, c->send_bytes, stream));
    LOOM_CHECK(r->dev->stream_sync(stream));
    *send = s;
  }
  if (is_host(*recv)) {
    LOOM_CHECK(loom_ipc_scratch(st, 1, c->recv_bytes, &r->scratch_recv));
    r->host_recv = *recv;
    *recv = r->scratch_recv;
  }
  return loomSuccess;
}

/* The end of a call whose output is host memory: copied back. */
static loomResult_t scratch_to_host(struct loom_ipc_run *r, struct loom_ipc_state *st) {
  if (r->host_recv == NULL)
    return loomSuccess;
  void *stream = loom_ipc_stream(st);
  LOOM_CHECK(r->dev->memcpy_async(r->host_recv, r->scratch_recv, r->c->recv_bytes, stream));
  return sync_stream(r->dev, stream);
}

/* ---- the handshake ---- */

static loomResult_t export_buffer(const struct loom_device_ops *dev, const void *p,
                                  unsigned char *handle, uint64_t *off, uint64_t *ptr) {
  *ptr = (uint64_t)(uintptr_t)p;
  if (p == NULL)
    return loomSuccess;
  size_t o = 0;
  LOOM_CHECK(dev->ipc_get(p, handle, &o));
  *off = o;
  return loomSuccess;
}

static loomResult_t make_record(struct loom_ipc_run *r, struct loom_ipc_state *st,
                                struct loom_ipc_rec *rec) {
  const struct loom_call *c = r->c;
  memset(rec, 0, sizeof *rec);
  rec->process = loom_ipc_process_token();
  rec->device = (int32_t)c->device;
  rec->coll = (int32_t)c->coll;
  rec->datatype = (int32_t)c->datatype;
  rec->op = (int32_t)c->base_op;
  rec->root = c->coll == LOOM_COLL_BROADCAST || c->coll == LOOM_COLL_REDUCE ? c->root : -1;
  rec->count = c->count;
  rec->uid = (uint32_t)getuid();
  rec->pidns = loom_pid_namespace();
  const void *send;
  void *recv;
  used_buffers(c, &send, &recv);
  /* Host memory of malloc, the stack, a tensor: the call goes the usual
   * way on every rank (loom_ipc_continue), after this handshake.  A
   * process that never called loomMemAlloc has none to share (and its
   * calls' spans, which used_buffers reads, were never worked out). */
  rec->direct = !on_host(r) || (loom_device_active() && host_mappable(send) &&
                                host_mappable(recv) && peers_can_open() && rec->pidns != 0);
  if (!rec->direct)
    return loomSuccess;
  LOOM_CHECK(host_to_scratch(r, st, &send, &recv));
  LOOM_CHECK(export_buffer(r->dev, send, rec->send_handle, &rec->send_off, &rec->send_ptr));
  return export_buffer(r->dev, recv, rec->recv_handle, &rec->recv_off, &rec->recv_ptr);
}

static loomResult_t post_exchange(loomComm_t comm, struct loom_ipc_run *r,
                                  struct loom_posted *p) {
  struct loom_call x = {.coll = LOOM_COLL_ALLGATHER, .comm = comm, .sendbuff = &r->mine,
                        .recvbuff = r->recs, .count = sizeof r->mine, .datatype = loomUint8,
                        .op = loomMax, .base_op = loomMax, .root = -1};
  return loom_post_call(comm, &x, on_host(r) ? LOOM_FP_HOST_IPC : LOOM_FP_DEVICE_IPC, p);
}

loomResult_t loom_ipc_begin(loomComm_t comm, const struct loom_call *c, struct loom_ipc_run *r,
                            struct loom_posted *p) {
  int n = comm->nranks;
  *r = (struct loom_ipc_run){.c = c};
  r->recs = calloc((size_t)n, sizeof *r->recs);
  r->send = calloc((size_t)n, sizeof *r->send);
  r->recv = calloc((size_t)n, sizeof *r->recv);
  if (r->recs == NULL || r->send == NULL || r->recv == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (device IPC)");
  LOOM_CHECK(loom_device_get(c->device, &r->dev, loom_coll_name(c->coll)));
  /* A call on no device stream follows the work the program queued on
   * the device's default stream (as a blocking copy does): the peers read
   * these buffers as soon as the handshake is done.  On a device stream
   * the worker already waited for that stream's earlier work. */
  if (c->stream == NULL || loom_stream_device(c->stream) == loomDeviceHost)
    LOOM_CHECK(sync_stream(r->dev, NULL));
  LOOM_CHECK(loom_ipc_state_get(comm, r->dev, &r->st));
  LOOM_CHECK(make_record(r, r->st, &r->mine));
  return post_exchange(comm, r, p);
}

/* "allreduce(count 8, float32, sum)" of a record, for mismatch messages. */
static void rec_text(const struct loom_ipc_rec *x, char *buf, size_t len) {
  int n = snprintf(buf, len, "%s(count %llu, %s", loom_coll_name((enum loom_coll)x->coll),
                   (unsigned long long)x->count,
                   loom_datatype_name((loomDataType_t)x->datatype));
  if (x->coll != LOOM_COLL_ALLGATHER && x->coll != LOOM_COLL_BROADCAST && n > 0 &&
      (size_t)n < len)
    n += snprintf(buf + n, len - (size_t)n, ", %s", loom_redop_name((loomRedOp_t)x->op));
  if (x->root >= 0 && n > 0 && (size_t)n < len)
    n += snprintf(buf + n, len - (size_t)n, ", root %d", x->root);
  if (n > 0 && (size_t)n < len)
    snprintf(buf + n, len - (size_t)n, ") on %s memory",
             loom_device_name((loomDevice_t)x->device));
}

/* Every rank made the same call on the same device. */
static loomResult_t check_records(loomComm_t comm, const struct loom_ipc_run *r) {
  const struct loom_ipc_rec *me = &r->mine;
  for (int q = 0; q < comm->nranks; q++) {
    const struct loom_ipc_rec *x = &r->recs[q];
    if (x->device == me->device && x->coll == me->coll && x->datatype == me->datatype &&
        x->op == me->op && x->root == me->root && x->count == me->count)
      continue;
    char mine[160], theirs[160];
    rec_text(me, mine, sizeof mine);
    rec_text(x, theirs, sizeof theirs);
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "rank %d called %s but rank %d called %s: every rank must make the same "
                      "call on buffers of the same device", comm->rank, mine, q, theirs);
  }
  return loomSuccess;
}

/* Every rank's buffers can be mapped (a device call's always can), by
 * every other rank: on the host, all of one user and one PID namespace. */
static int all_direct(loomComm_t comm, const struct loom_ipc_run *r) {
  const struct loom_ipc_rec *first = &r->recs[0];
  for (int q = 0; q < comm->nranks; q++) {
    const struct loom_ipc_rec *x = &r->recs[q];
    if (!x->direct || (on_host(r) && (x->uid != first->uid || x->pidns != first->pidns)))
      return 0;
  }
  return 1;
}

/* This process's addresses of every rank's buffers. */
static loomResult_t map_peers(loomComm_t comm, struct loom_ipc_run *r,
                              struct loom_ipc_state *st) {
  for (int q = 0; q < comm->nranks; q++) {
    const struct loom_ipc_rec *x = &r->recs[q];
    int local = x->process == r->mine.process;
    void *base;
    r->send[q] = r->recv[q] = NULL;
    if (x->send_ptr != 0 && local)
      r->send[q] = (const char *)(uintptr_t)x->send_ptr;
    else if (x->send_ptr != 0) {
      LOOM_CHECK(loom_ipc_map(st, x->send_handle, &base));
      r->send[q] = (const char *)base + x->send_off;
    }
    if (x->recv_ptr != 0 && local)
      r->recv[q] = (char *)(uintptr_t)x->recv_ptr;
    else if (x->recv_ptr != 0) {
      LOOM_CHECK(loom_ipc_map(st, x->recv_handle, &base));
      r->recv[q] = (char *)base + x->recv_off;
    }
  }
  return loomSuccess;
}

/* ---- the device work ---- */

/* Elements [lo, hi) of count's share q of n. */
static void slice(size_t count, int n, int q, size_t *lo, size_t *hi) {
  size_t base = count / (size_t)n, extra = count % (size_t)n;
  *lo = base * (size_t)q + ((size_t)q < extra ? (size_t)q : extra);
  *hi = *lo + base + ((size_t)q < extra);
}

/* dst = the reduction of every rank's input at byte offset off (elems
 * elements), starting with rank `first`'s. */
static loomResult_t reduce_all(const struct loom_ipc_run *r, int n, int first, char *dst,
                               size_t off, size_t elems, void *stream) {
  const struct loom_call *c = r->c;
  const struct loom_device_ops *dev = r->dev;
  if (elems == 0)
    return loomSuccess;
  size_t bytes = elems * loom_datatype_size(c->datatype);
  const char *a = r->send[first] + off;
  if (n == 1)
    return a == dst ? loomSuccess : dev->memcpy_async(dst, a, bytes, stream);
  for (int k = 1; k < n; k++) {
    const char *b = r->send[(first + k) % n] + off;
    LOOM_CHECK(dev->reduce_async(dst, a, b, elems, c->datatype, c->base_op, stream));
    a = dst;
  }
  if (c->base_op == loomAvg)
    LOOM_CHECK(dev->scale_avg_async(dst, elems, c->datatype, n, stream));
  return loomSuccess;
}

static loomResult_t copy(const struct loom_device_ops *dev, char *dst, const char *src,
                         size_t bytes, void *stream) {
  if (bytes == 0 || dst == src)
    return loomSuccess;
  return dev->memcpy_async(dst, src, bytes, stream);
}

/* Host all-reduce: this rank's slice [lo, hi) reduced once, piece by
 * piece, and each piece copied into every peer's output while it is still
 * in cache, so that every byte crosses memory once, as in the ideal
 * (bench/mem_ceiling.c).  No rank reads what another writes here: rank q
 * reads only slice q of the inputs and writes only slice q of the
 * outputs, so the call needs no second phase. */
static loomResult_t reduce_to_all(loomComm_t comm, const struct loom_ipc_run *r, size_t lo,
                                  size_t hi) {
  int n = comm->nranks, me = comm->rank;
  size_t es = loom_datatype_size(r->c->datatype), piece = LOOM_HOST_IPC_PIECE_BYTES / es;
  for (size_t at = lo; at < hi; at += piece) {
    size_t elems = hi - at < piece ? hi - at : piece;
    char *mine = r->recv[me] + at * es;
    LOOM_CHECK(reduce_all(r, n, me, mine, at * es, elems, NULL));
    for (int q = 0; q < n; q++)
      if (q != me)
        LOOM_CHECK(copy(r->dev, r->recv[q] + at * es, mine, elems * es, NULL));
  }
  return loomSuccess;
}

/* Phase 1 of r's call on this rank. */
static loomResult_t phase1(loomComm_t comm, const struct loom_ipc_run *r, void *stream) {
  const struct loom_call *c = r->c;
  int n = comm->nranks, me = comm->rank;
  size_t es = loom_datatype_size(c->datatype), lo, hi;
  switch (c->coll) {
  case LOOM_COLL_ALLREDUCE:
    slice(c->count, n, me, &lo, &hi);
    if (on_host(r))
      return reduce_to_all(comm, r, lo, hi);
    return reduce_all(r, n, me, r->recv[me] + lo * es, lo * es, hi - lo, stream);
  case LOOM_COLL_REDUCE:
    slice(c->count, n, me, &lo, &hi);
    return reduce_all(r, n, c->root, r->recv[c->root] + lo * es, lo * es, hi - lo, stream);
  case LOOM_COLL_REDUCESCATTER:
    return reduce_all(r, n, me, r->recv[me], (size_t)me * c->count * es, c->count, stream);
  case LOOM_COLL_ALLGATHER:
    for (int q = 0; q < n; q++)
      LOOM_CHECK(copy(r->dev, r->recv[me] + (size_t)q * c->count * es, r->send[q],
                      c->count * es, stream));
    return loomSuccess;
  case LOOM_COLL_BROADCAST:
    return copy(r->dev, r->recv[me], r->send[c->root], c->count * es, stream);
  default:
    return loom_error(loomInternalError, LOOM_LOG_COLL, "%s through device IPC",
                      loom_coll_name(c->coll));
  }
}

/* Phase 2 (all-reduce): the other ranks' slices, from their outputs. */
static loomResult_t phase2(loomComm_t comm, const struct loom_ipc_run *r, void *stream) {
  const struct loom_call *c = r->c;
  int n = comm->nranks, me = comm->rank;
  size_t es = loom_datatype_size(c->datatype), lo, hi;
  for (int q = 0; q < n; q++) {
    if (q == me)
      continue;
    slice(c->count, n, q, &lo, &hi);
    LOOM_CHECK(copy(r->dev, r->recv[me] + lo * es, r->recv[q] + lo * es, (hi - lo) * es,
                    stream));
  }
  return loomSuccess;
}

/* Runs a phase's work on the IPC stream and waits for it. */
static loomResult_t run_phase(loomComm_t comm, struct loom_ipc_run *r,
                              struct loom_ipc_state *st, int which) {
  void *stream = loom_ipc_stream(st);
  loomResult_t res = which == 1 ? phase1(comm, r, stream) : phase2(comm, r, stream);
  loomResult_t sync = sync_stream(r->dev, stream);
  return res != loomSuccess ? res : sync;
}

loomResult_t loom_ipc_continue(loomComm_t comm, struct loom_ipc_run *r, struct loom_posted *p,
                               int *posted) {
  *posted = 0;
  struct loom_ipc_state *st = r->st;
  if (r->phase == 0) {
    LOOM_CHECK(check_records(comm, r));
    int direct = all_direct(comm, r);
    if (on_host(r))
      host_ipc_back_off(comm, direct);
    if (!direct) {
      r->fallback = 1;
      LOOM_TRACE(LOOM_LOG_COLL,
                 "%s count %zu %s: host buffers not all from loomMemAlloc: through the "
                 "transports (or not all ranks' memory can be opened by every rank)",
                 loom_coll_name(r->c->coll), r->c->count, loom_datatype_name(r->c->datatype));
      return loomSuccess;
    }
    loom_ipc_next_call(st);
    LOOM_CHECK(map_peers(comm, r, st));
    LOOM_TRACE(LOOM_LOG_COLL, "%s count %zu %s: %s IPC", loom_coll_name(r->c->coll),
               r->c->count, loom_datatype_name(r->c->datatype), on_host(r) ? "host" : "device");
  }
  int last = r->c->coll == LOOM_COLL_ALLREDUCE && !on_host(r) ? 2 : 1;
  if (r->phase == last)
    return scratch_to_host(r, st);
  r->phase++;
  LOOM_CHECK(run_phase(comm, r, st, r->phase));
  *posted = 1;
  return loom_post_fence(comm, on_host(r) ? LOOM_FP_HOST_IPC : LOOM_FP_DEVICE_IPC, p);
}

void loom_ipc_end(struct loom_ipc_run *r) {
  free(r->recs);
  free(r->send);
  free(r->recv);
  *r = (struct loom_ipc_run){0};
}
