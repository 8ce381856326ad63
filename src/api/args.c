/*
 * args.c — argument checks of every collective and point-to-point call,
 * done when the call is made (before it is grouped or queued), so that bad
 * input returns loomInvalidArgument with a message and moves nothing.
 */
#include "api/comm.h"
#include "api/task.h"
#include "core/error.h"
#include "device/device.h"
#include "device/reduce.h"
#include "stream/stream.h"

#include <stdint.h>
#include <stdlib.h>

#define BAD(...) loom_error(loomInvalidArgument, LOOM_LOG_COLL, __VA_ARGS__)

void loom_call_free(struct loom_call *c) {
  free(c->v);
  c->v = NULL;
}

/* a * b * c bytes, refusing overflow past PTRDIFF_MAX. */
static int mul_ok(size_t a, size_t b, size_t c, size_t *out) {
  if ((b != 0 && a > SIZE_MAX / b) || (c != 0 && a * b > SIZE_MAX / c) ||
      a * b * c > (size_t)PTRDIFF_MAX)
    return 0;
  *out = a * b * c;
  return 1;
}

static int span_overlap(uintptr_t x, size_t alen, uintptr_t y, size_t blen) {
  return alen > 0 && blen > 0 && x < y + blen && y < x + alen;
}

static int overlaps(const void *a, size_t alen, const void *b, size_t blen) {
  return span_overlap((uintptr_t)a, alen, (uintptr_t)b, blen);
}

static loomResult_t check_null(const char *fn, const char *what, const void *p, size_t bytes) {
  if (p == NULL && bytes > 0)
    return BAD("%s: %s is NULL with %zu bytes to move", fn, what, bytes);
  return loomSuccess;
}

static loomResult_t check_rank(const char *fn, const char *what, int r, int nranks) {
  if (r < 0 || r >= nranks)
    return BAD("%s: %s %d is outside [0, %d)", fn, what, r, nranks);
  return loomSuccess;
}

/* loomRecvAny: somewhere to say who sent, someone to send, and a message
 * to wait for (a send of 0 bytes moves none). */
static loomResult_t check_any_source(const struct loom_call *c, const char *fn) {
  if (c->source == NULL)
    return BAD("%s: source is NULL (it receives the sender's rank)", fn);
  if (c->comm->nranks < 2)
    return BAD("%s: the communicator has no other rank to receive from", fn);
  if (c->count == 0)
    return BAD("%s: count is 0: a send of 0 bytes moves no message, so it cannot be matched "
               "from any rank (name the sender)", fn);
  return loomSuccess;
}

/* The buffers of a call whose in-place form puts sendbuff inside recvbuff
 * (or recvbuff inside sendbuff) at `inplace`: equal there, or disjoint. */
static loomResult_t check_inplace(const char *fn, const void *small, size_t small_bytes,
                                  const void *big, size_t big_bytes, const void *inplace,
                                  const char *rule) {
  if (small != inplace && overlaps(small, small_bytes, big, big_bytes))
    return BAD("%s: sendbuff and recvbuff overlap without being in place (%s)", fn, rule);
  return loomSuccess;
}

static loomResult_t check_alltoallv(struct loom_call *c, const char *fn, size_t esize) {
  int n = c->comm->nranks;
  const size_t *sc = c->v, *sd = c->v + n, *rc = c->v + 2 * n, *rd = c->v + 3 * n;
  size_t send_end = 0, recv_end = 0, end;
  for (int j = 0; j < n; j++) { /* empty blocks' displacements do not matter */
    if (sc[j] > 0) {
      if (!mul_ok(sd[j] + sc[j], esize, 1, &end) || sd[j] + sc[j] < sd[j])
        return BAD("%s: sdispls[%d] + sendcounts[%d] overflows", fn, j, j);
      send_end = end > send_end ? end : send_end;
    }
    if (rc[j] > 0) {
      if (!mul_ok(rd[j] + rc[j], esize, 1, &end) || rd[j] + rc[j] < rd[j])
        return BAD("%s: rdispls[%d] + recvcounts[%d] overflows", fn, j, j);
      recv_end = end > recv_end ? end : recv_end;
    }
  }
  int me = c->comm->rank;
  if (sc[me] != rc[me])
    return BAD("%s: sendcounts[%d] = %zu but recvcounts[%d] = %zu (this rank's data to "
               "itself)",
               fn, me, sc[me], me, rc[me]);
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (span_overlap(rd[i], rc[i], rd[j], rc[j]))
        return BAD("%s: receive blocks of ranks %d and %d overlap (rdispls/recvcounts)", fn,
                   i, j);
  LOOM_CHECK(check_null(fn, "sendbuff", c->sendbuff, send_end));
  LOOM_CHECK(check_null(fn, "recvbuff", c->recvbuff, recv_end));
  c->send_bytes = c->sendbuff != NULL ? send_end : 0; /* what call_spans gives the others */
  c->recv_bytes = c->recvbuff != NULL ? recv_end : 0;
  if (overlaps(c->sendbuff, send_end, c->recvbuff, recv_end))
    return BAD("%s: sendbuff and recvbuff overlap (all-to-all cannot run in place)", fn);
  return loomSuccess;
}

static loomResult_t check_args(struct loom_call *c, const char *fn) {
  loomComm_t comm = c->comm;
  LOOM_CHECK(loom_comm_check_usable(comm, fn));
  if (c->stream != NULL)
    LOOM_CHECK(loom_stream_check(c->stream, fn));
  if (c->coll == LOOM_COLL_BARRIER)
    return loomSuccess;
  if ((int)c->datatype < 0 || c->datatype >= loomNumTypes)
    return BAD("%s: invalid datatype %d (use loomInt8 ... loomBfloat16)", fn, (int)c->datatype);
  int reduces = loom_coll_reduces(c->coll);
  c->base_op = c->op;
  c->premul = 0;
  if (reduces)
    LOOM_CHECK(loom_redop_resolve(comm, c->op, c->datatype, &c->base_op, c->scalar,
                                  &c->premul, fn));
  int n = comm->nranks, me = comm->rank;
  size_t esize = loom_datatype_size(c->datatype), one, all;
  if (c->coll == LOOM_COLL_ALLTOALLV)
    return check_alltoallv(c, fn, esize);
  /* Calls whose buffers hold nranks blocks need count*esize*nranks bytes. */
  int per_rank = c->coll == LOOM_COLL_ALLGATHER || c->coll == LOOM_COLL_REDUCESCATTER ||
                 c->coll == LOOM_COLL_ALLTOALL || c->coll == LOOM_COLL_GATHER ||
                 c->coll == LOOM_COLL_SCATTER;
  if (!mul_ok(c->count, esize, 1, &one) ||
      !mul_ok(c->count, esize, per_rank ? (size_t)n : 1, &all))
    return BAD("%s: count %zu of %zu-byte elements%s overflows the address space", fn,
               c->count, esize, per_rank ? " x nranks" : "");
  const char *sb = c->sendbuff;
  char *rb = c->recvbuff;
  switch (c->coll) {
  case LOOM_COLL_ALLREDUCE:
    LOOM_CHECK(check_null(fn, "sendbuff", sb, one));
    LOOM_CHECK(check_null(fn, "recvbuff", rb, one));
    return check_inplace(fn, sb, one, rb, one, rb, "sendbuff == recvbuff");
  case LOOM_COLL_ALLGATHER:
    LOOM_CHECK(check_null(fn, "sendbuff", sb, one));
    LOOM_CHECK(check_null(fn, "recvbuff", rb, all));
    return check_inplace(fn, sb, one, rb, all, rb ? rb + (size_t)me * one : NULL,
                         "sendbuff == recvbuff + rank*sendcount");
  case LOOM_COLL_REDUCESCATTER:
    LOOM_CHECK(check_null(fn, "sendbuff", sb, all));
    LOOM_CHECK(check_null(fn, "recvbuff", rb, one));
    return check_inplace(fn, rb, one, sb, all, sb ? sb + (size_t)me * one : NULL,
                         "recvbuff == sendbuff + rank*recvcount");
  case LOOM_COLL_BROADCAST:
    LOOM_CHECK(check_rank(fn, "root", c->root, n));
    if (me == c->root)
      LOOM_CHECK(check_null(fn, "sendbuff (on root)", sb, one));
    LOOM_CHECK(check_null(fn, "recvbuff", rb, one));
    return me == c->root ? check_inplace(fn, sb, one, rb, one, rb, "sendbuff == recvbuff")
                         : loomSuccess;
  case LOOM_COLL_REDUCE:
    LOOM_CHECK(check_rank(fn, "root", c->root, n));
    LOOM_CHECK(check_null(fn, "sendbuff", sb, one));
    if (me != c->root)
      return loomSuccess;
    LOOM_CHECK(check_null(fn, "recvbuff (on root)", rb, one));
    return check_inplace(fn, sb, one, rb, one, rb, "sendbuff == recvbuff");
  case LOOM_COLL_ALLTOALL:
    LOOM_CHECK(check_null(fn, "sendbuff", sb, all));
    LOOM_CHECK(check_null(fn, "recvbuff", rb, all));
    if (overlaps(sb, all, rb, all))
      return BAD("%s: sendbuff and recvbuff overlap (all-to-all cannot run in place)", fn);
    return loomSuccess;
  case LOOM_COLL_GATHER:
    LOOM_CHECK(check_rank(fn, "root", c->root, n));
    LOOM_CHECK(check_null(fn, "sendbuff", sb, one));
    if (me != c->root)
      return loomSuccess;
    LOOM_CHECK(check_null(fn, "recvbuff (on root)", rb, all));
    return check_inplace(fn, sb, one, rb, all, rb ? rb + (size_t)me * one : NULL,
                         "sendbuff == recvbuff + root*sendcount");
  case LOOM_COLL_SCATTER:
    LOOM_CHECK(check_rank(fn, "root", c->root, n));
    LOOM_CHECK(check_null(fn, "recvbuff", rb, one));
    if (me != c->root)
      return loomSuccess;
    LOOM_CHECK(check_null(fn, "sendbuff (on root)", sb, all));
    return check_inplace(fn, rb, one, sb, all, sb ? sb + (size_t)me * one : NULL,
                         "recvbuff == sendbuff + root*recvcount");
  case LOOM_COLL_SENDRECV:
    if (c->root == LOOM_PEER_ANY)
      LOOM_CHECK(check_any_source(c, fn));
    else
      LOOM_CHECK(check_rank(fn, "peer", c->root, n));
    return check_null(fn, c->is_send ? "sendbuff" : "recvbuff",
                      c->is_send ? sb : (const void *)rb, one);
  default:
    return loom_error(loomInternalError, LOOM_LOG_COLL, "%s: unknown collective %d", fn,
                      (int)c->coll);
  }
}

/* What this rank reads from sendbuff and writes to recvbuff (the checks
 * above made sure these products do not overflow; all-to-all-v's spans
 * come from its own check). */
static void call_spans(struct loom_call *c) {
  int n = c->comm->nranks, root = c->comm->rank == c->root;
  size_t one = c->count * loom_datatype_size(c->datatype), all = one * (size_t)n;
  size_t s = 0, r = 0;
  switch (c->coll) {
  case LOOM_COLL_ALLREDUCE: s = r = one; break;
  case LOOM_COLL_ALLGATHER: s = one; r = all; break;
  case LOOM_COLL_REDUCESCATTER: s = all; r = one; break;
  case LOOM_COLL_BROADCAST: s = root ? one : 0; r = one; break;
  case LOOM_COLL_REDUCE: s = one; r = root ? one : 0; break;
  case LOOM_COLL_ALLTOALL: s = r = all; break;
  case LOOM_COLL_GATHER: s = one; r = root ? all : 0; break;
  case LOOM_COLL_SCATTER: s = root ? all : 0; r = one; break;
  case LOOM_COLL_SENDRECV: s = c->is_send ? one : 0; r = c->is_send ? 0 : one; break;
  case LOOM_COLL_ALLTOALLV: return; /* set by check_alltoallv */
  default: break;
  }
  c->send_bytes = c->sendbuff != NULL ? s : 0;
  c->recv_bytes = c->recvbuff != NULL ? r : 0;
}

static const char *device_enum(loomDevice_t d) {
  return d == loomDeviceSim ? "loomDeviceSim" : d == loomDeviceCuda ? "loomDeviceCuda"
                                                                    : "loomDeviceHost";
}

/* The device of the call's buffers, checked against each other, their
 * allocations' bounds and the stream. */
static loomResult_t check_devices(struct loom_call *c, const char *fn) {
  const struct loom_device_ops *ops;
  uintptr_t base;
  size_t size;
  loomDevice_t ds = c->send_bytes ? loom_device_of(c->sendbuff, &ops, &base, &size)
                                  : loomDeviceHost;
  loomDevice_t dr = c->recv_bytes ? loom_device_of(c->recvbuff, &ops, &base, &size)
                                  : loomDeviceHost;
  LOOM_CHECK(loom_device_check_span(c->sendbuff, c->send_bytes, "sendbuff", fn));
  LOOM_CHECK(loom_device_check_span(c->recvbuff, c->recv_bytes, "recvbuff", fn));
  if (ds != loomDeviceHost && dr != loomDeviceHost && ds != dr)
    return BAD("%s: sendbuff is %s memory and recvbuff is %s memory: one call moves one "
               "device's memory", fn, loom_device_name(ds), loom_device_name(dr));
  c->device = ds != loomDeviceHost ? ds : dr;
  loomDevice_t sdev = loom_stream_device(c->stream);
  if (c->device != loomDeviceHost && c->stream != NULL && sdev != c->device)
    return BAD("%s: the buffers are %s memory but the stream is a %s stream: queue it on a "
               "stream of loomStreamCreateOnDevice(&s, %s), or pass stream NULL",
               fn, loom_device_name(c->device), loom_device_name(sdev),
               device_enum(c->device));
  return loomSuccess;
}

loomResult_t loom_call_check(struct loom_call *c, const char *fn) {
  LOOM_CHECK(check_args(c, fn));
  c->device = loomDeviceHost;
  if (!loom_device_active() || c->coll == LOOM_COLL_BARRIER)
    return loomSuccess;
  call_spans(c);
  return check_devices(c, fn);
}
