/*
 * dump.c — the flight recorder's ring as JSON (docs/debugging.md gives
 * its fields).  Written with write(2) through a stack buffer and no
 * allocation or stdio, so a fatal signal's handler can call it.
 */
#include "trace/trace.h"

#include "core/coll.h"
#include "device/reduce.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct out {
  int fd, failed;
  size_t n;
  char buf[4096];
};

static void flush(struct out *o) {
  size_t off = 0;
  while (off < o->n && !o->failed) {
    ssize_t k = write(o->fd, o->buf + off, o->n - off);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      o->failed = 1;
    else
      off += (size_t)k;
  }
  o->n = 0;
}

static void put_raw(struct out *o, const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (o->n == sizeof o->buf)
      flush(o);
    o->buf[o->n++] = s[i];
  }
}

static void put(struct out *o, const char *s) { put_raw(o, s, strlen(s)); }

static void put_u64(struct out *o, uint64_t v) {
  char d[24];
  int i = (int)sizeof d;
  do {
    d[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  put_raw(o, d + i, sizeof d - (size_t)i);
}

static void put_int(struct out *o, int64_t v) {
  if (v < 0) {
    put(o, "-");
    put_u64(o, (uint64_t)0 - (uint64_t)v);
  } else {
    put_u64(o, (uint64_t)v);
  }
}

/* A JSON string: quotes, backslashes and control bytes escaped. */
static void put_str(struct out *o, const char *s) {
  static const char hex[] = "0123456789abcdef";
  put(o, "\"");
  for (; s != NULL && *s != '\0'; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') {
      char esc[2] = {'\\', (char)ch};
      put_raw(o, esc, 2);
    } else if (ch < 0x20) {
      char esc[6] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15]};
      put_raw(o, esc, 6);
    } else {
      put_raw(o, (const char *)&ch, 1);
    }
  }
  put(o, "\"");
}

static void field_str(struct out *o, const char *key, const char *value) {
  put(o, "\"");
  put(o, key);
  put(o, "\": ");
  put_str(o, value);
}

static void field_int(struct out *o, const char *key, int64_t value) {
  put(o, "\"");
  put(o, key);
  put(o, "\": ");
  put_int(o, value);
}

const char *loom_trace_state_name(int state) {
  static const char *const names[] = {"queued", "started", "finished", "failed"};
  return names[state & 3];
}

const char *loom_trace_coll_name(int coll) {
  if (coll == LOOM_TRACE_SPLIT)
    return "commSplit";
  if (coll == LOOM_TRACE_FINALIZE)
    return "commFinalize";
  if (coll == LOOM_TRACE_SHRINK)
    return "commShrink";
  return loom_coll_name((enum loom_coll)coll);
}

static void put_peers(struct out *o, const struct loom_trace_peers *p) {
  put(o, "\"peers\": [");
  int n = p->n >= 0 && p->n < LOOM_TRACE_PEERS ? p->n : LOOM_TRACE_PEERS;
  for (int i = 0; i < n; i++) {
    put(o, i ? ", {" : "{");
    field_int(o, "rank", p->peer[i]);
    put(o, ", ");
    field_int(o, "sent", (int64_t)p->sent[i]);
    put(o, ", ");
    field_int(o, "received", (int64_t)p->received[i]);
    put(o, "}");
  }
  put(o, "]");
  if (p->other_sent != 0 || p->other_received != 0) {
    put(o, ", ");
    field_int(o, "other_peers_sent", (int64_t)p->other_sent);
    put(o, ", ");
    field_int(o, "other_peers_received", (int64_t)p->other_received);
  }
}

/* The call's arguments: what every rank must agree on. */
static void put_call(struct out *o, const struct loom_trace_call *c) {
  field_str(o, "coll", loom_trace_coll_name(c->coll));
  put(o, ", ");
  field_int(o, "count", (int64_t)c->count);
  if (c->datatype >= 0) {
    put(o, ", ");
    field_str(o, "datatype", loom_datatype_name((loomDataType_t)c->datatype));
  }
  if (c->op >= 0) {
    put(o, ", ");
    field_str(o, "op", c->op < loomNumOps ? loom_redop_name((loomRedOp_t)c->op) : "premulsum");
  }
  put(o, ", ");
  field_int(o, c->coll == LOOM_COLL_SENDRECV ? "peer" : "root", c->root);
  if (c->coll == LOOM_COLL_SENDRECV) {
    put(o, ", ");
    field_str(o, "direction", c->is_send ? "send" : "recv");
  }
  put(o, ", ");
  field_int(o, "device", c->device);
  put(o, ", ");
  field_int(o, "stream", c->on_stream);
}

/* Copies n bytes of a published record whose id (at *idp) was `id` when
 * read with acquire: 1 when it still is after the copy (the writer zeroes
 * the id before rewriting), so the copy is whole. */
static int copy_published(const _Atomic uint64_t *idp, uint64_t id, void *dst, const void *src,
                          size_t n) {
  memcpy(dst, src, n);
  atomic_thread_fence(memory_order_acquire);
  return atomic_load_explicit(idp, memory_order_relaxed) == id;
}

/* Copies plan `id` when the plan ring still holds it. */
static int copy_plan(const struct loom_trace *t, uint64_t id, struct loom_trace_plan *copy) {
  if (id == 0)
    return 0;
  const struct loom_trace_plan *pl = loom_trace_plan_slot(t, id);
  return atomic_load_explicit(&pl->id, memory_order_acquire) == id &&
         copy_published(&pl->id, id, (void *)copy, (const void *)pl, sizeof *copy);
}

/* done_by: for an entry whose times are a shared reading, the next
 * reading after it (0 for the others). */
static void put_entry(struct out *o, const struct loom_trace *t,
                      const struct loom_trace_entry *en, uint64_t id, uint64_t done_by) {
  int state = atomic_load_explicit(&en->state, memory_order_acquire);
  put(o, "    {");
  field_int(o, "id", (int64_t)id);
  put(o, ", ");
  field_int(o, "seq", (int64_t)en->seq);
  put(o, ", ");
  field_str(o, "kind", en->call.coll == LOOM_COLL_SENDRECV ? "p2p" : "coll");
  put(o, ", ");
  put_call(o, &en->call);
  put(o, ", ");
  field_str(o, "state", loom_trace_state_name(state));
  struct loom_trace_plan plan;
  if (state != LOOM_TRACE_QUEUED && copy_plan(t, en->plan, &plan)) {
    put(o, ", ");
    field_str(o, "algo", plan.algo);
    put(o, ", ");
    field_str(o, "proto", plan.ll ? "LL" : "simple");
    put(o, ", ");
    field_int(o, "fused", en->fused);
    put(o, ", ");
    put_peers(o, &plan.peers);
  }
  if (state == LOOM_TRACE_FAILED) {
    put(o, ", ");
    field_str(o, "result", loomGetErrorString(atomic_load(&en->result)));
    put(o, ", ");
    field_int(o, "blamed", atomic_load(&en->blamed));
  }
  put(o, ", ");
  field_int(o, "queued_ns", (int64_t)atomic_load(&en->t_queued));
  put(o, ", ");
  /* a field the state does not show yet is left over from an older call */
  field_int(o, "started_ns",
            state != LOOM_TRACE_QUEUED ? (int64_t)atomic_load(&en->t_started) : 0);
  put(o, ", ");
  field_int(o, "ended_ns", state >= LOOM_TRACE_FINISHED ? (int64_t)atomic_load(&en->t_ended) : 0);
  if (en->clock_shared) {
    put(o, ", ");
    field_str(o, "clock", "shared");
    put(o, ", ");
    field_int(o, "done_by_ns", (int64_t)done_by);
  }
  put(o, "}");
}

/* Copies entry i when it holds a record that stays put while copied. */
static int copy_entry(const struct loom_trace *t, uint64_t i, struct loom_trace_entry *copy,
                      uint64_t *id) {
  const struct loom_trace_entry *en = &t->entries[i & t->mask];
  *id = atomic_load_explicit(&en->id, memory_order_acquire);
  if (*id == 0 || *id != i + 1)
    return 0;
  /* the state first: the fields it shows were written before it */
  int state = atomic_load_explicit(&en->state, memory_order_acquire);
  int whole = copy_published(&en->id, *id, (void *)copy, (const void *)en, sizeof *copy);
  atomic_store_explicit(&copy->state, state, memory_order_relaxed);
  return whole;
}

/* For entry i, whose times are an earlier call's reading: the next
 * entry's own reading (taken after call i returned), or, none being
 * written yet, the clock now. */
static uint64_t next_reading(const struct loom_trace *t, uint64_t i, uint64_t total) {
  for (uint64_t j = i + 1; j < total && j <= i + LOOM_TRACE_CLOCK_SHARES + 1; j++) {
    struct loom_trace_entry copy;
    uint64_t id;
    if (copy_entry(t, j, &copy, &id) && !copy.clock_shared)
      return atomic_load_explicit(&copy.t_queued, memory_order_relaxed);
  }
  return loom_trace_clock();
}

static void put_header(struct out *o, const struct loom_trace *t, const char *reason,
                       const char *error) {
  struct timespec now, res;
  clock_gettime(CLOCK_REALTIME, &now);
  clock_getres(CLOCK_REALTIME_COARSE, &res);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  put(o, "{\n  ");
  field_int(o, "loom_trace", 1);
  put(o, ",\n  ");
  field_str(o, "comm", t->comm_id);
  put(o, ", ");
  field_str(o, "name", t->name);
  put(o, ", ");
  field_int(o, "rank", t->rank);
  put(o, ", ");
  field_int(o, "nranks", t->nranks);
  put(o, ",\n  ");
  field_str(o, "host", host);
  put(o, ", ");
  field_int(o, "pid", getpid());
  put(o, ", ");
  field_str(o, "reason", reason);
  put(o, ",\n  ");
  field_str(o, "error", error != NULL ? error : "");
  put(o, ",\n  ");
  field_int(o, "time_ns", (int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
  put(o, ", ");
  field_int(o, "clock_resolution_ns", (int64_t)res.tv_sec * 1000000000 + res.tv_nsec);
  put(o, ", ");
  field_int(o, "buffer", t->cap);
  put(o, ", ");
  field_int(o, "recorded", (int64_t)loom_trace_recorded(t));
}

int loom_trace_write(const struct loom_trace *t, int fd, const char *reason, const char *error) {
  struct out o = {.fd = fd};
  put_header(&o, t, reason, error);
  put(&o, ",\n  \"entries\": [\n");
  uint64_t total = loom_trace_recorded(t);
  uint64_t first = total > (uint64_t)t->cap ? total - (uint64_t)t->cap : 0;
  int any = 0;
  for (uint64_t i = first; i < total; i++) {
    struct loom_trace_entry copy;
    uint64_t id;
    if (!copy_entry(t, i, &copy, &id))
      continue; /* being rewritten: a newer call is in its slot */
    if (any)
      put(&o, ",\n");
    put_entry(&o, t, &copy, id, copy.clock_shared ? next_reading(t, i, total) : 0);
    any = 1;
  }
  put(&o, "\n  ]\n}\n");
  flush(&o);
  return o.failed ? -1 : 0;
}

/* dir/loom-trace.<comm>.<rank>.json into buf, without stdio. */
static int dump_path(const struct loom_trace *t, const char *dir, char *buf, size_t len) {
  struct out o = {.fd = -1};
  put(&o, dir);
  put(&o, "/loom-trace.");
  put(&o, t->comm_id);
  put(&o, ".");
  put_int(&o, t->rank);
  put(&o, ".json");
  if (o.n >= len)
    return -1;
  memcpy(buf, o.buf, o.n);
  buf[o.n] = '\0';
  return 0;
}

int loom_trace_dump(const struct loom_trace *t, const char *path, const char *dir,
                    const char *reason, const char *error, char *written, size_t len) {
  if (path == NULL) {
    if (dir == NULL || dir[0] == '\0') {
      errno = ENOENT;
      return -1;
    }
    if (dump_path(t, dir, written, len) != 0) {
      errno = ENAMETOOLONG;
      return -1;
    }
    path = written;
  } else if (written != NULL && len > 0) {
    size_t n = strlen(path) < len - 1 ? strlen(path) : len - 1;
    memcpy(written, path, n);
    written[n] = '\0';
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return -1;
  int rc = loom_trace_write(t, fd, reason, error);
  int saved = errno;
  if (close(fd) != 0 && rc == 0)
    return -1;
  errno = saved;
  return rc;
}
