/*
 * bucket.c — fusion of many small all-reduces or all-gathers of one group
 * into one call: copy the inputs into one buffer, run one collective, copy
 * the results out.  1,000 tensors of 4 KB then cost about one 4 MB call
 * instead of 1,000 latencies.
 *
 * Only consecutive calls fuse, and only while the result is the same as
 * running them one by one: same communicator, stream, type and built-in op,
 * and no call reading memory an earlier call of the bucket writes.
 */
#include "api/comm.h"
#include "api/task.h"
#include "api/ipc_coll.h"
#include "core/error.h"
#include "device/reduce.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A call's bytes in the bucket's receive buffer. */
static size_t bucket_bytes_of(const struct loom_call *c) {
  size_t b = c->count * loom_datatype_size(c->datatype);
  return c->coll == LOOM_COLL_ALLGATHER ? b * (size_t)c->comm->nranks : b;
}

static size_t recv_bytes(const struct loom_call *c) { return bucket_bytes_of(c); }

static size_t send_bytes(const struct loom_call *c) {
  return c->count * loom_datatype_size(c->datatype);
}

static int fusable(const struct loom_call *first, const struct loom_call *c) {
  return c->coll == first->coll && c->comm == first->comm && c->stream == first->stream &&
         c->datatype == first->datatype && c->op == first->op && c->count > 0 &&
         !loom_ipc_wants(c); /* their device buffers stay where they are */
}

/* A buffer range of a call, for the dependency sweep. */
struct range {
  uintptr_t lo, hi;
  int call, is_send;
};

static int by_start(const void *a, const void *b) {
  const struct range *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The first call (index >= 1) whose input overlaps an earlier call's
 * output, or n when none does.  Fused, every input is read before any
 * output is written, so such a call must start a new bucket.  A sweep over
 * the ranges sorted by address: O(n log n) when buffers are disjoint, as
 * they are in practice. */
static int first_dependency(const struct loom_call *calls, int n) {
  struct range *r = malloc(sizeof *r * 2 * (size_t)n);
  int *active = malloc(sizeof(int) * 2 * (size_t)n);
  if (r == NULL || active == NULL) {
    free(r);
    free(active);
    return 1; /* no memory to prove independence: do not fuse */
  }
  int m = 0, nactive = 0, dep = n;
  for (int i = 0; i < n; i++) {
    uintptr_t sb = (uintptr_t)calls[i].sendbuff, rb = (uintptr_t)calls[i].recvbuff;
    r[m++] = (struct range){.lo = sb, .hi = sb + send_bytes(&calls[i]), .call = i, .is_send = 1};
    r[m++] = (struct range){.lo = rb, .hi = rb + recv_bytes(&calls[i]), .call = i, .is_send = 0};
  }
  qsort(r, (size_t)m, sizeof *r, by_start);
  for (int k = 0; k < m; k++) {
    int keep = 0;
    for (int a = 0; a < nactive; a++) {
      const struct range *x = &r[active[a]];
      if (x->hi <= r[k].lo)
        continue; /* ended before this one starts */
      active[keep++] = active[a];
      const struct range *snd = x->is_send ? x : &r[k], *rcv = x->is_send ? &r[k] : x;
      if (snd->is_send && !rcv->is_send && rcv->call < snd->call && snd->call < dep)
        dep = snd->call;
    }
    nactive = keep;
    active[nactive++] = k;
  }
  free(r);
  free(active);
  return dep;
}

int loom_bucket_span(const struct loom_call *calls, int ncalls, size_t bucket_bytes) {
  const struct loom_call *first = &calls[0];
  if (first->coll != LOOM_COLL_ALLREDUCE && first->coll != LOOM_COLL_ALLGATHER)
    return 1;
  if (first->coll == LOOM_COLL_ALLREDUCE && first->op >= loomNumOps)
    return 1; /* PreMulSum ops are per call */
  size_t total = 0;
  int n = 0;
  while (n < ncalls && fusable(first, &calls[n]) &&
         total + bucket_bytes_of(&calls[n]) <= bucket_bytes)
    total += bucket_bytes_of(&calls[n++]);
  if (n > 1)
    n = first_dependency(calls, n);
  return n > 1 ? n : 1;
}

/* Whether the calls' inputs, and their outputs, follow each other in
 * memory (tensors that are views of one flat buffer, as gradient buckets
 * often are): then one call over the whole range needs no copies. */
static int contiguous(const struct loom_call *calls, int n) {
  const char *s = calls[0].sendbuff, *r = calls[0].recvbuff;
  for (int i = 0; i < n; i++) {
    if ((const char *)calls[i].sendbuff != s || (const char *)calls[i].recvbuff != r)
      return 0;
    s += send_bytes(&calls[i]);
    r += send_bytes(&calls[i]);
  }
  /* One call over the whole range must itself be legal: in place, or its
   * input and output disjoint (each call may be, yet the whole overlap). */
  const char *s0 = calls[0].sendbuff, *r0 = calls[0].recvbuff;
  size_t len = (size_t)(s - s0);
  return s0 == r0 || s <= r0 || r0 + len <= s0;
}

loomResult_t loom_bucket_pack(loomComm_t comm, const struct loom_call *calls, int n,
                              struct loom_call *fused, int *copied) {
  const struct loom_call *first = &calls[0];
  size_t esize = loom_datatype_size(first->datatype), total = 0;
  for (int i = 0; i < n; i++)
    total += calls[i].count;
  int gather = first->coll == LOOM_COLL_ALLGATHER;
  *fused = *first;
  fused->count = total;
  *copied = 0;
  if (!gather && contiguous(calls, n)) /* views of one flat buffer: no copies */
    return loomSuccess;
  LOOM_CHECK(loom_comm_grow(&comm->bucket_send, &comm->bucket_send_bytes, total * esize));
  if (gather)
    LOOM_CHECK(loom_comm_grow(&comm->bucket_recv, &comm->bucket_recv_bytes,
                              total * esize * (size_t)comm->nranks));
  char *in = comm->bucket_send;
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    memcpy(in + off, calls[i].sendbuff, send_bytes(&calls[i]));
    off += send_bytes(&calls[i]);
  }
  fused->sendbuff = in;
  fused->recvbuff = gather ? comm->bucket_recv : comm->bucket_send;
  *copied = 1;
  LOOM_TRACE(LOOM_LOG_COLL, "fused %d %s calls into one of %zu elements", n,
             loom_coll_name(first->coll), total);
  return loomSuccess;
}

void loom_bucket_unpack(loomComm_t comm, const struct loom_call *calls, int n) {
  const struct loom_call *first = &calls[0];
  size_t esize = loom_datatype_size(first->datatype), total = 0;
  for (int i = 0; i < n; i++)
    total += calls[i].count;
  int gather = first->coll == LOOM_COLL_ALLGATHER;
  const char *out = gather ? comm->bucket_recv : comm->bucket_send;
  /* All-reduce: the bucket is the results in call order.  All-gather: rank
   * j's part is its inputs in call order, at j * total elements. */
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    size_t b = send_bytes(&calls[i]);
    if (!gather) {
      memcpy(calls[i].recvbuff, out + off, b);
    } else {
      for (int j = 0; j < comm->nranks; j++)
        memcpy((char *)calls[i].recvbuff + (size_t)j * b,
               out + (size_t)j * total * esize + off, b);
    }
    off += b;
  }
}
