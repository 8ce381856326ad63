/*
 * ipc_state.c — a communicator's IPC resources per device (ipc_coll.h):
 * the native stream its IPC collectives queue their copies and kernels on,
 * and the peers' allocations it has opened.
 *
 * Opening a handle costs a system call or a driver round trip and a
 * mapping, so opened handles are kept, keyed by the handle's bytes (a sim
 * handle names the process, descriptor and inode; a CUDA handle is unique
 * per allocation), and reused by later calls on the same buffers: the
 * common case of a training loop.  A peer's freed allocation stays mapped
 * here until evicted, so the cache is bounded: at most
 * 64 + 4 x nranks handles and 4 GiB mapped, the least recently used closed
 * first, never one the current call uses.
 */
#include "api/comm.h"
#include "api/ipc_coll.h"
#include "core/error.h"
#include "core/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define IPC_KEEP_BYTES (4ull << 30)

struct opened {
  unsigned char key[LOOM_IPC_HANDLE_MAX];
  void *base;
  size_t bytes;
  unsigned long call; /* the last call that used it */
};

struct loom_ipc_state {
  const struct loom_device_ops *dev;
  void *stream;
  struct opened *v;
  int n, cap, keep;
  size_t bytes;
  unsigned long call;
  void *scratch[2]; /* for a host buffer of a call (ipc_coll.c) */
  size_t scratch_bytes[2];
  /* Outgrown scratch, freed with the state: a free on a device stream's
   * worker may wait for the whole device (cudaFree does), and the device
   * may be waiting for that worker's hold.  Scratch starts at 1 MiB and
   * at least doubles, so 2 x 44 growths reach 2^64 bytes: never full. */
  void *outgrown[88];
  int noutgrown;
};

static uint64_t token;
static pthread_once_t token_once = PTHREAD_ONCE_INIT;

static void make_token(void) {
  if (getrandom(&token, sizeof token, 0) != (ssize_t)sizeof token)
    token = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
}

uint64_t loom_ipc_process_token(void) {
  pthread_once(&token_once, make_token);
  return token;
}

loomResult_t loom_ipc_state_get(loomComm_t comm, const struct loom_device_ops *dev,
                                struct loom_ipc_state **out) {
  struct loom_ipc_state **slot = &comm->ipc[dev->device];
  if (*slot == NULL) {
    struct loom_ipc_state *st = calloc(1, sizeof *st);
    if (st == NULL)
      return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (device IPC)");
    st->dev = dev;
    st->keep = 64 + 4 * comm->nranks;
    /* the host backend's copies and kernels run at once: no stream */
    loomResult_t res = dev->stream_create != NULL ? dev->stream_create(&st->stream) : loomSuccess;
    if (res != loomSuccess) {
      free(st);
      return res;
    }
    *slot = st;
  }
  *out = *slot;
  return loomSuccess;
}

void *loom_ipc_stream(const struct loom_ipc_state *st) { return st->stream; }

void loom_ipc_next_call(struct loom_ipc_state *st) { st->call++; }

loomResult_t loom_ipc_scratch(struct loom_ipc_state *st, int which, size_t bytes, void **ptr) {
  if (st->scratch_bytes[which] < bytes) {
    size_t grown = 2 * st->scratch_bytes[which] > bytes ? 2 * st->scratch_bytes[which] : bytes;
    if (grown < ((size_t)1 << 20))
      grown = (size_t)1 << 20;
    void *p = NULL;
    LOOM_CHECK(st->dev->mem_alloc(&p, grown));
    if (st->scratch[which] != NULL) {
      if (st->noutgrown == (int)(sizeof st->outgrown / sizeof st->outgrown[0]))
        (void)st->dev->mem_free(st->outgrown[--st->noutgrown]); /* cannot happen */
      st->outgrown[st->noutgrown++] = st->scratch[which];
    }
    st->scratch[which] = p;
    st->scratch_bytes[which] = grown;
  }
  *ptr = st->scratch[which];
  return loomSuccess;
}

static void close_at(struct loom_ipc_state *st, int i) {
  st->dev->ipc_close(st->v[i].base);
  st->bytes -= st->v[i].bytes;
  st->v[i] = st->v[--st->n];
}

/* Closes least recently used handles (none of the current call) until
 * one more fits. */
static void evict(struct loom_ipc_state *st) {
  while (st->n > 0 && (st->n >= st->keep || st->bytes > IPC_KEEP_BYTES)) {
    int lru = -1;
    for (int i = 0; i < st->n; i++)
      if (st->v[i].call != st->call && (lru < 0 || st->v[i].call < st->v[lru].call))
        lru = i;
    if (lru < 0)
      return;
    close_at(st, lru);
  }
}

loomResult_t loom_ipc_map(struct loom_ipc_state *st, const unsigned char *handle, void **base) {
  size_t hb = st->dev->ipc_handle_bytes;
  for (int i = 0; i < st->n; i++)
    if (memcmp(st->v[i].key, handle, hb) == 0) {
      st->v[i].call = st->call;
      *base = st->v[i].base;
      return loomSuccess;
    }
  evict(st);
  if (st->n == st->cap) {
    int cap = st->cap ? 2 * st->cap : 16;
    struct opened *v = realloc(st->v, sizeof *v * (size_t)cap);
    if (v == NULL)
      return loom_error(loomSystemError, LOOM_LOG_COLL, "out of memory (device IPC)");
    st->v = v;
    st->cap = cap;
  }
  void *b;
  LOOM_CHECK(st->dev->ipc_open(handle, &b));
  struct opened *o = &st->v[st->n++];
  memset(o->key, 0, sizeof o->key);
  memcpy(o->key, handle, hb);
  o->base = b;
  o->call = st->call;
  uintptr_t lo;
  o->bytes = 0;
  (void)st->dev->classify(b, &lo, &o->bytes);
  st->bytes += o->bytes;
  *base = b;
  return loomSuccess;
}

void loom_ipc_state_free(loomComm_t comm) {
  for (int d = 0; d < LOOM_NUM_DEVICES; d++) {
    struct loom_ipc_state *st = comm->ipc[d];
    if (st == NULL)
      continue;
    if (st->stream != NULL)
      st->dev->stream_destroy(st->stream);
    for (int i = 0; i < 2; i++)
      if (st->scratch[i] != NULL)
        (void)st->dev->mem_free(st->scratch[i]);
    while (st->noutgrown > 0)
      (void)st->dev->mem_free(st->outgrown[--st->noutgrown]);
    while (st->n > 0)
      close_at(st, st->n - 1);
    free(st->v);
    free(st);
    comm->ipc[d] = NULL;
  }
}
