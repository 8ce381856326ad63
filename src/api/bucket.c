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
#include "core/error.h"
#include "device/reduce.h"

#include <stdint.h>
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

static int overlap(const void *a, size_t alen, const void *b, size_t blen) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return alen > 0 && blen > 0 && x < y + blen && y < x + alen;
}

static int fusable(const struct loom_call *first, const struct loom_call *c) {
  return c->coll == first->coll && c->comm == first->comm && c->stream == first->stream &&
         c->datatype == first->datatype && c->op == first->op && c->count > 0;
}

int loom_bucket_span(const struct loom_call *calls, int ncalls, size_t bucket_bytes) {
  const struct loom_call *first = &calls[0];
  if (first->coll != LOOM_COLL_ALLREDUCE && first->coll != LOOM_COLL_ALLGATHER)
    return 1;
  if (first->coll == LOOM_COLL_ALLREDUCE && first->op >= loomNumOps)
    return 1; /* PreMulSum ops are per call */
  size_t total = 0;
  int n = 0;
  while (n < ncalls && fusable(first, &calls[n])) {
    const struct loom_call *c = &calls[n];
    if (total + bucket_bytes_of(c) > bucket_bytes)
      break;
    /* Fused, every input is read before any output is written: a call
     * reading an earlier call's output must run on its own. */
    int depends = 0;
    for (int j = 0; j < n && !depends; j++)
      depends = overlap(c->sendbuff, send_bytes(c), calls[j].recvbuff, recv_bytes(&calls[j]));
    if (depends)
      break;
    total += bucket_bytes_of(c);
    n++;
  }
  return n > 1 ? n : 1;
}

loomResult_t loom_bucket_run(loomComm_t comm, const struct loom_call *calls, int n) {
  const struct loom_call *first = &calls[0];
  size_t esize = loom_datatype_size(first->datatype), total = 0;
  for (int i = 0; i < n; i++)
    total += calls[i].count;
  int nranks = comm->nranks;
  int gather = first->coll == LOOM_COLL_ALLGATHER;
  LOOM_CHECK(loom_comm_grow(&comm->bucket_send, &comm->bucket_send_bytes, total * esize));
  if (gather)
    LOOM_CHECK(loom_comm_grow(&comm->bucket_recv, &comm->bucket_recv_bytes,
                              total * esize * (size_t)nranks));
  char *in = comm->bucket_send, *out = gather ? comm->bucket_recv : comm->bucket_send;
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    memcpy(in + off, calls[i].sendbuff, send_bytes(&calls[i]));
    off += send_bytes(&calls[i]);
  }
  struct loom_call fused = *first;
  fused.sendbuff = in;
  fused.recvbuff = out;
  fused.count = total;
  LOOM_CHECK(loom_execute_one(comm, &fused));
  /* All-reduce: the bucket is the results in call order.  All-gather: rank
   * j's part is its inputs in call order, at j * total elements. */
  off = 0;
  for (int i = 0; i < n; i++) {
    size_t b = send_bytes(&calls[i]);
    if (!gather) {
      memcpy(calls[i].recvbuff, out + off, b);
    } else {
      for (int j = 0; j < nranks; j++)
        memcpy((char *)calls[i].recvbuff + (size_t)j * b,
               out + (size_t)j * total * esize + off, b);
    }
    off += b;
  }
  LOOM_TRACE(LOOM_LOG_COLL, "fused %d %s calls into one of %zu elements", n,
             loom_coll_name(first->coll), total);
  return loomSuccess;
}
