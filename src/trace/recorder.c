/*
 * recorder.c — the flight recorder's ring: records calls as they are
 * issued, started and ended (trace.h says who writes what).
 */
#include "trace/trace.h"

#include "core/coll.h"
#include "core/hmac.h"
#include "core/log.h"
#include "sched/schedule.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t coarse_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A name for the communicator that every rank derives alike and that
 * reveals nothing of its secret. */
static void comm_id_text(const uint8_t *secret, size_t len, char out[17]) {
  static const char label[] = "loom flight recorder comm id";
  struct loom_bytes parts[] = {{(const uint8_t *)label, sizeof label - 1}};
  uint8_t mac[LOOM_SHA256_BYTES];
  loom_hmac_sha256(secret, len, parts, 1, mac);
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 8; i++) {
    out[2 * i] = hex[mac[i] >> 4];
    out[2 * i + 1] = hex[mac[i] & 15];
  }
  out[16] = '\0';
}

struct loom_trace *loom_trace_create(int cap, const uint8_t *secret, size_t secret_len,
                                     const char *name, int rank, int nranks) {
  if (cap <= 0)
    return NULL;
  struct loom_trace *t = calloc(1, sizeof *t);
  size_t slots = 1;
  while (slots < (size_t)cap)
    slots *= 2;
  if (t != NULL && posix_memalign((void **)&t->entries, 64, slots * sizeof *t->entries) != 0) {
    free(t);
    t = NULL;
  }
  if (t != NULL)
    memset(t->entries, 0, slots * sizeof *t->entries);
  if (t == NULL) {
    LOOM_WARN(LOOM_LOG_INIT, "flight recorder: out of memory for %d calls; recording off",
              cap);
    return NULL;
  }
  t->cap = cap;
  t->mask = slots - 1;
  t->rank = rank;
  t->nranks = nranks;
  snprintf(t->name, sizeof t->name, "%s", name);
  comm_id_text(secret, secret_len, t->comm_id);
  loom_trace_register(t);
  return t;
}

void loom_trace_free(struct loom_trace *t) {
  if (t == NULL)
    return;
  loom_trace_unregister(t);
  free(t->entries);
  free(t);
}

/* The slot of record id, or NULL when the ring has moved past it. */
static struct loom_trace_entry *slot_of(struct loom_trace *t, uint64_t id) {
  if (t == NULL || id == 0)
    return NULL;
  struct loom_trace_entry *en = &t->entries[(id - 1) & t->mask];
  return atomic_load_explicit(&en->id, memory_order_relaxed) == id ? en : NULL;
}

uint64_t loom_trace_record(struct loom_trace *t, const struct loom_trace_call *c, int started) {
  if (t == NULL)
    return 0;
  int p2p = c->coll == LOOM_COLL_SENDRECV;
  /* A communicator's calls are issued by one thread at a time (loom.h), so
   * a plain add: a dump reading it at the same time sees one value or the
   * other. */
  uint64_t before = atomic_load_explicit(&t->counts, memory_order_relaxed);
  atomic_store_explicit(&t->counts, before + (p2p ? 1ull << 32 : 1ull), memory_order_relaxed);
  uint64_t id = (before & 0xffffffffu) + (before >> 32) + 1;
  struct loom_trace_entry *en = &t->entries[(id - 1) & t->mask];
  atomic_store_explicit(&en->id, 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_release); /* a reader that sees the new fields sees 0 */
  en->seq = (uint32_t)(p2p ? before >> 32 : before & 0xffffffffu);
  en->call = *c;
  en->algo = NULL;
  en->npeers = 0;
  uint64_t now = coarse_now_ns();
  atomic_store_explicit(&en->state, started ? LOOM_TRACE_STARTED : LOOM_TRACE_QUEUED,
                        memory_order_relaxed);
  atomic_store_explicit(&en->result, loomSuccess, memory_order_relaxed);
  atomic_store_explicit(&en->blamed, -1, memory_order_relaxed);
  atomic_store_explicit(&en->t_queued, now, memory_order_relaxed);
  atomic_store_explicit(&en->t_started, started ? now : 0, memory_order_relaxed);
  atomic_store_explicit(&en->t_ended, 0, memory_order_relaxed);
  atomic_store_explicit(&en->id, id, memory_order_release);
  /* the next call's entry, into the cache while this call runs */
  const char *next = (const char *)&t->entries[id & t->mask];
  for (size_t off = 0; off < sizeof *en; off += 64)
    __builtin_prefetch(next + off, 1, 3);
  return id;
}

/* The plan's bytes per peer, summed on the stack and stored once. */
struct peer_sums {
  int n;
  int32_t peer[LOOM_TRACE_PEERS];
  uint64_t sent[LOOM_TRACE_PEERS], received[LOOM_TRACE_PEERS];
  uint64_t other_sent, other_received;
};

static inline void add_peer(struct peer_sums *p, int rank, uint64_t sent, uint64_t received) {
  int i = 0;
  while (i < p->n && p->peer[i] != rank)
    i++;
  if (i == p->n) {
    if (i == LOOM_TRACE_PEERS) {
      p->other_sent += sent;
      p->other_received += received;
      return;
    }
    p->peer[i] = rank;
    p->sent[i] = p->received[i] = 0;
    p->n++;
  }
  p->sent[i] += sent;
  p->received[i] += received;
}

void loom_trace_started(struct loom_trace *t, uint64_t id, const char *algo, int ll, int fused,
                        const struct loom_schedule *s, size_t esize) {
  struct loom_trace_entry *en = slot_of(t, id);
  if (en == NULL)
    return;
  struct peer_sums p;
  p.n = 0;
  p.other_sent = p.other_received = 0;
  for (int i = 0; s != NULL && i < s->nsteps; i++) {
    const struct loom_step *st = &s->steps[i];
    if (st->send_peer >= 0)
      add_peer(&p, st->send_peer, (uint64_t)(st->send_count * esize), 0);
    if (st->recv_peer >= 0)
      add_peer(&p, st->recv_peer, 0, (uint64_t)(st->recv_count * esize));
  }
  en->algo = algo;
  en->ll = (uint8_t)(ll != 0);
  en->fused = (uint16_t)(fused < UINT16_MAX ? fused : UINT16_MAX);
  en->npeers = (uint8_t)p.n;
  for (int i = 0; i < p.n; i++) {
    en->peer[i] = p.peer[i];
    en->sent[i] = p.sent[i];
    en->received[i] = p.received[i];
  }
  en->other_sent = p.other_sent;
  en->other_received = p.other_received;
  /* a call run at once started within the clock's tick of its issue */
  uint64_t now = en->call.deferred ? coarse_now_ns()
                                   : atomic_load_explicit(&en->t_queued, memory_order_relaxed);
  atomic_store_explicit(&en->t_started, now, memory_order_relaxed);
  atomic_store_explicit(&en->state, LOOM_TRACE_STARTED, memory_order_release);
}

void loom_trace_ended(struct loom_trace *t, uint64_t id, loomResult_t res, int blamed) {
  struct loom_trace_entry *en = slot_of(t, id);
  if (en == NULL)
    return;
  atomic_store_explicit(&en->result, res, memory_order_relaxed);
  atomic_store_explicit(&en->blamed, res == loomSuccess ? -1 : blamed, memory_order_relaxed);
  atomic_store_explicit(&en->t_ended, coarse_now_ns(), memory_order_relaxed);
  atomic_store_explicit(&en->state, res == loomSuccess ? LOOM_TRACE_FINISHED : LOOM_TRACE_FAILED,
                        memory_order_release);
}
