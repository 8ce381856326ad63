/*
 * recorder.c — the flight recorder's ring made and freed, and a plan's
 * bytes per peer (the per-call updates are inline, trace_record.h).
 */
#include "trace/trace.h"

#include "core/coll.h"
#include "core/hmac.h"
#include "core/log.h"
#include "sched/schedule.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

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
  if (t != NULL && (posix_memalign((void **)&t->entries, 64, slots * sizeof *t->entries) != 0 ||
                    posix_memalign((void **)&t->plans, 64, slots * sizeof *t->plans) != 0)) {
    free(t->entries);
    free(t);
    t = NULL;
  }
  if (t != NULL) {
    memset(t->entries, 0, slots * sizeof *t->entries);
    memset(t->plans, 0, slots * sizeof *t->plans);
  }
  if (t == NULL) {
    LOOM_WARN(LOOM_LOG_INIT, "flight recorder: out of memory for %d calls; recording off",
              cap);
    return NULL;
  }
  t->cap = cap;
  t->mask = slots - 1;
  t->clock_shares = LOOM_TRACE_CLOCK_SHARES; /* the first call reads the clock */
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
  free(t->plans);
  free(t);
}

static inline void add_peer(struct loom_trace_peers *p, int rank, uint64_t sent,
                            uint64_t received) {
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

void loom_trace_peers_of(const struct loom_schedule *s, size_t esize,
                         struct loom_trace_peers *out) {
  memset(out, 0, sizeof *out);
  for (int i = 0; s != NULL && i < s->nsteps; i++) {
    const struct loom_step *st = &s->steps[i];
    if (st->send_peer >= 0)
      add_peer(out, st->send_peer, (uint64_t)(st->send_count * esize), 0);
    if (st->recv_peer >= 0)
      add_peer(out, st->recv_peer, 0, (uint64_t)(st->recv_count * esize));
  }
}


uint64_t loom_trace_plan_add(struct loom_trace *t, const char *algo, int ll,
                             const struct loom_schedule *s, size_t esize,
                             const struct loom_trace_peers *peers) {
  if (t == NULL)
    return 0;
  uint64_t id = ++t->nplans;
  struct loom_trace_plan *pl = loom_trace_plan_slot(t, id);
  atomic_store_explicit(&pl->id, 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_release); /* as loom_trace_record */
  pl->algo = algo;
  pl->ll = (uint8_t)(ll != 0);
  if (s != NULL)
    loom_trace_peers_of(s, esize, &pl->peers);
  else if (peers != NULL)
    pl->peers = *peers;
  else
    memset(&pl->peers, 0, sizeof pl->peers);
  atomic_store_explicit(&pl->id, id, memory_order_release);
  return id;
}

uint64_t loom_trace_p2p_plan(struct loom_trace *t, int peer, int is_send, uint64_t bytes) {
  if (t == NULL)
    return 0;
  struct loom_trace_p2p_memo *m =
      &t->p2p_memo[((unsigned)peer * 2u + (is_send != 0)) % LOOM_TRACE_P2P_MEMO];
  if (m->plan != 0 && m->peer == peer && m->is_send == (is_send != 0) && m->bytes == bytes &&
      loom_trace_plan_kept(t, m->plan))
    return m->plan;
  struct loom_trace_peers one = {.n = peer >= 0, .peer = {peer}};
  if (is_send)
    one.sent[0] = bytes;
  else
    one.received[0] = bytes;
  *m = (struct loom_trace_p2p_memo){.plan = loom_trace_plan_add(t, "p2p", 0, NULL, 0, &one),
                                    .bytes = bytes,
                                    .peer = peer,
                                    .is_send = is_send != 0};
  return m->plan;
}
