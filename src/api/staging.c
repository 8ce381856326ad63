/*
 * staging.c — device buffers of collective calls, staged through host
 * memory (device/stage.h): the device bytes the calls read are copied
 * into host blocks before they run, the bytes they write copied back
 * after, and the calls themselves run on the blocks.
 *
 * The device spans of every call of a stage (a group's calls included)
 * are merged into regions: spans that overlap share one block, at the
 * same offsets as on the device.  So an in-place call keeps the in-place
 * rule, and a call of a group that reads what an earlier call of it wrote
 * (allreduce a -> b, then b -> c) sees that result, as on the host path
 * where the calls run one after another on the same memory.  Only what a
 * call reads is copied in and only what it writes is copied out: an
 * all-to-all-v writes back its received blocks, never the gaps between
 * them.
 */
#include "api/comm.h"
#include "api/task.h"
#include "api/ipc_coll.h"
#include "core/error.h"
#include "device/reduce.h"
#include "device/stage.h"

#include <stdint.h>
#include <stdlib.h>

enum span_role { SPAN_READ, SPAN_WRITE, SPAN_MAP };

struct span {
  char *p;
  size_t n;
  enum span_role role;
};

struct spans {
  struct span *v;
  int n, cap;
};

static loomResult_t add_span(struct spans *s, const void *p, size_t n, enum span_role role) {
  if (n == 0)
    return loomSuccess;
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 16;
    struct span *v = realloc(s->v, sizeof *v * (size_t)cap);
    if (v == NULL)
      return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory staging device buffers");
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = (struct span){.p = (char *)p, .n = n, .role = role};
  return loomSuccess;
}

/* 1 when p is memory of `dev`. */
static int on_device(const void *p, loomDevice_t dev) {
  const struct loom_device_ops *ops;
  uintptr_t base;
  size_t size;
  return p != NULL && loom_device_of(p, &ops, &base, &size) == dev;
}

/* The spans of call c on its device: what it reads, what it writes, and
 * (SPAN_MAP) the whole receive range, so that recvbuff maps into the same
 * block as the blocks it receives. */
static loomResult_t call_spans_of(const struct loom_call *c, struct spans *s) {
  if (c->send_bytes > 0 && on_device(c->sendbuff, c->device))
    LOOM_CHECK(add_span(s, c->sendbuff, c->send_bytes, SPAN_READ));
  if (c->recv_bytes == 0 || !on_device(c->recvbuff, c->device))
    return loomSuccess;
  if (c->coll != LOOM_COLL_ALLTOALLV)
    return add_span(s, c->recvbuff, c->recv_bytes, SPAN_WRITE);
  LOOM_CHECK(add_span(s, c->recvbuff, c->recv_bytes, SPAN_MAP));
  int n = c->comm->nranks;
  size_t es = loom_datatype_size(c->datatype);
  for (int j = 0; j < n; j++)
    LOOM_CHECK(add_span(s, (char *)c->recvbuff + c->v[3 * n + j] * es, c->v[2 * n + j] * es,
                        SPAN_WRITE));
  return loomSuccess;
}

static int by_start(const void *a, const void *b) {
  const struct span *x = a, *y = b;
  return x->p < y->p ? -1 : x->p > y->p;
}

/* Merges overlapping spans of v[0..n) (sorted) in place; returns how many
 * remain. */
static int merge(struct span *v, int n) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (m > 0 && v[i].p < v[m - 1].p + v[m - 1].n) {
      char *end = v[i].p + v[i].n;
      if (end > v[m - 1].p + v[m - 1].n)
        v[m - 1].n = (size_t)(end - v[m - 1].p);
    } else {
      v[m++] = v[i];
    }
  }
  return m;
}

/* The regions (all spans merged) and their host blocks. */
struct regions {
  struct span *v; /* p, n of each region */
  char **block;
  int n;
};

static char *host_of(const struct regions *r, const void *p) {
  for (int i = 0; i < r->n; i++)
    if ((const char *)p >= r->v[i].p && (const char *)p < r->v[i].p + r->v[i].n)
      return r->block[i] + ((const char *)p - r->v[i].p);
  return NULL;
}

/* Copies in (role SPAN_READ) or out (SPAN_WRITE) the merged spans of that
 * role. */
static loomResult_t add_copies(struct loom_stage *st, const struct spans *all,
                               const struct regions *r, enum span_role role) {
  struct span *v = malloc(sizeof *v * (size_t)(all->n ? all->n : 1));
  if (v == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory staging device buffers");
  int n = 0;
  for (int i = 0; i < all->n; i++)
    if (all->v[i].role == role)
      v[n++] = all->v[i];
  qsort(v, (size_t)n, sizeof *v, by_start);
  n = merge(v, n);
  loomResult_t res = loomSuccess;
  for (int i = 0; i < n && res == loomSuccess; i++) {
    char *h = host_of(r, v[i].p);
    res = role == SPAN_READ ? loom_stage_copy(st, 1, h, v[i].p, v[i].n)
                            : loom_stage_copy(st, 0, v[i].p, h, v[i].n);
  }
  free(v);
  return res;
}

/* Regions of the spans, each with a block of st's device. */
static loomResult_t make_regions(struct loom_stage *st, const struct loom_device_ops *ops,
                                 const struct spans *all, struct regions *r) {
  r->v = malloc(sizeof *r->v * (size_t)all->n);
  r->block = malloc(sizeof *r->block * (size_t)all->n);
  if (r->v == NULL || r->block == NULL)
    return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory staging device buffers");
  for (int i = 0; i < all->n; i++)
    r->v[i] = all->v[i];
  qsort(r->v, (size_t)all->n, sizeof *r->v, by_start);
  r->n = merge(r->v, all->n);
  for (int i = 0; i < r->n; i++) {
    void *b = NULL; /* (set on success: LTO cannot see it) */
    LOOM_CHECK(loom_stage_block(st, ops, r->v[i].n, &b));
    r->block[i] = b;
  }
  return loomSuccess;
}

/* 1 when c's device buffers are staged: not host memory, and not moved
 * device to device through IPC. */
static int staged(const struct loom_call *c) {
  return c->device != loomDeviceHost && !loom_ipc_wants(c);
}

/* The one device of the calls' staged buffers: loomSuccess with *ops
 * (NULL when none), or an error when they are of two devices. */
static loomResult_t stage_device(const struct loom_call *calls, int n,
                                 const struct loom_device_ops **ops) {
  *ops = NULL;
  for (int i = 0; i < n; i++) {
    if (!staged(&calls[i]))
      continue;
    const struct loom_device_ops *o;
    LOOM_CHECK(loom_device_get(calls[i].device, &o, loom_coll_name(calls[i].coll)));
    if (*ops != NULL && *ops != o)
      return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                        "the calls of one group move %s memory and %s memory: issue each "
                        "device's calls in a group of their own", (*ops)->name, o->name);
    *ops = o;
  }
  return loomSuccess;
}

loomResult_t loom_stage_calls(struct loom_stage *st, struct loom_call *calls, int n) {
  const struct loom_device_ops *ops;
  LOOM_CHECK(stage_device(calls, n, &ops));
  if (ops == NULL)
    return loomSuccess;
  if (st->dev != NULL && st->dev != ops)
    return loom_error(loomInvalidArgument, LOOM_LOG_COLL,
                      "the calls of one group move %s memory and %s memory: issue each "
                      "device's calls in a group of their own", st->dev->name, ops->name);
  struct spans all = {0};
  struct regions r = {0};
  loomResult_t res = loomSuccess;
  for (int i = 0; i < n && res == loomSuccess; i++)
    if (staged(&calls[i]))
      res = call_spans_of(&calls[i], &all);
  if (res == loomSuccess && all.n > 0)
    res = make_regions(st, ops, &all, &r);
  if (res == loomSuccess && all.n > 0)
    res = add_copies(st, &all, &r, SPAN_READ);
  if (res == loomSuccess && all.n > 0)
    res = add_copies(st, &all, &r, SPAN_WRITE);
  for (int i = 0; i < n && res == loomSuccess && all.n > 0; i++) {
    struct loom_call *c = &calls[i];
    if (!staged(c))
      continue;
    if (c->send_bytes > 0 && on_device(c->sendbuff, c->device))
      c->sendbuff = host_of(&r, c->sendbuff);
    if (c->recv_bytes > 0 && on_device(c->recvbuff, c->device))
      c->recvbuff = host_of(&r, c->recvbuff);
  }
  free(all.v);
  free(r.v);
  free(r.block);
  return res;
}

loomResult_t loom_execute_staged(loomComm_t comm, struct loom_call *calls, int ncalls) {
  struct loom_stage st = {0};
  loomResult_t res = loom_stage_calls(&st, calls, ncalls);
  if (res == loomSuccess && st.dev != NULL)
    res = loom_stage_run_sync(&st, 1);
  if (res == loomSuccess)
    res = loom_execute(comm, calls, ncalls);
  if (res == loomSuccess && st.dev != NULL)
    res = loom_stage_run_sync(&st, 0);
  loom_stage_free(&st);
  return res;
}
