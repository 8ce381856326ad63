/*
 * root.c — the bootstrap root: a thread that challenges every connection,
 * admits the ranks that prove the job's secret (net/auth.h), and
 * answers each with its placement (its ring neighbours and the ranks of its
 * host; or an error naming the ranks that never arrived), tagged so the
 * rank knows it came from its own job's root.  It serves one rendezvous and exits.  Nothing a client sends
 * can crash or starve it: frames are size-checked before anything is read
 * into a buffer, a connection has ROOT_PROOF_MS to prove itself, and when
 * every slot is taken the oldest unproven one makes room.
 */
#include "bootstrap/bootstrap.h"
#include "net/auth.h"
#include "net/bytes.h"
#include "core/hmac.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Unproven connections held at once: far below the usual 1,024 open files,
 * so a flood cannot make accept() fail; the oldest is dropped for a new one. */
#define ROOT_MAX_PENDING 256
#define ROOT_PROOF_MS 10000  /* from accept to a complete, proven hello */
#define ROOT_ACCEPT_BURST 32 /* accepts per turn, so a flood drains fast */
#define ROOT_REPLY_MS 10000  /* bound on sending the table to one rank */
#define ROOT_PROGRESS_MS 10000 /* how often a waiting root says who is missing */
#define ROOT_LABEL "loom/root"
#define ROOT_HELLO_FRAME (LOOM_FRAME_HDR_BYTES + LOOM_HELLO_BYTES)

struct pending_conn {
  int fd;
  size_t have; /* bytes of proof + hello frame read so far */
  uint8_t buf[LOOM_AUTH_PROOF_BYTES + ROOT_HELLO_FRAME];
  struct loom_auth_state auth;
  uint64_t deadline;
  union loom_sockaddr from;
};

struct root_state {
  int listen_fd;
  uint8_t secret[LOOM_SECRET_BYTES];
  int timeout_s;
  char addr_text[LOOM_ADDR_STRLEN];
  struct pending_conn *pending; /* ROOT_MAX_PENDING slots, in arrival order */
  int npending;
  int nranks;       /* 0 until the first valid hello */
  int arrived;
  int *rank_fd;     /* per rank, -1 until arrived */
  struct loom_auth_state *rank_auth; /* per rank: its handshake, to tag replies */
  struct loom_peer_info *infos;
  unsigned long dropped; /* connections that never proved the secret */
  uint64_t first_ns, last_ns; /* the first and last rank's hello accepted */
};

/* Closes pending slot i, keeping the others in arrival order.  A reason
 * is logged for the first few drops; the rest are counted (a flood must
 * not flood the log). */
static void drop_pending(struct root_state *st, int i, const char *why) {
  struct pending_conn *pc = &st->pending[i];
  if (why != NULL && st->dropped++ < 8) {
    char from[LOOM_ADDR_STRLEN];
    loom_sockaddr_str(&pc->from, from, sizeof from);
    LOOM_WARN(LOOM_LOG_BOOTSTRAP, "bootstrap root %s: dropped connection from %s: %s",
              st->addr_text, from, why);
  }
  close(pc->fd);
  memmove(pc, pc + 1, sizeof *pc * (size_t)(st->npending - i - 1));
  st->npending--;
}

/* Removes pending slot i without closing it (its fd now serves a rank). */
static void take_pending(struct root_state *st, int i) {
  struct pending_conn *pc = &st->pending[i];
  memmove(pc, pc + 1, sizeof *pc * (size_t)(st->npending - i - 1));
  st->npending--;
}

/* An error frame: code, text, and the root's tag over both, so that the
 * rank can tell its own job's root from another's. */
static void send_error_frame(int fd, const struct loom_auth_state *auth, const uint8_t *secret,
                             loomResult_t code, const char *text) {
  uint8_t hdr[LOOM_FRAME_HDR_BYTES], body[4 + 512], tag[LOOM_AUTH_TAG_BYTES];
  size_t len = strnlen(text, sizeof body - 4);
  loom_put_u32(body, (uint32_t)code);
  memcpy(body + 4, text, len);
  loom_auth_tag(secret, ROOT_LABEL "/error", 'a', auth->challenge, auth->nonce, body, len + 4,
                tag);
  struct loom_frame_hdr h = {.type = LOOM_FRAME_ERROR, .len = (uint32_t)(len + 4 + sizeof tag)};
  loom_frame_hdr_encode(&h, hdr);
  uint64_t deadline = loom_deadline_ms(1000);
  if (loom_socket_send_all(fd, hdr, sizeof hdr, deadline, NULL) == loomSuccess &&
      loom_socket_send_all(fd, body, len + 4, deadline, NULL) == loomSuccess)
    loom_socket_send_all(fd, tag, sizeof tag, deadline, NULL);
}

/* Sizes the rank table at the first proven hello. */
static int make_table(struct root_state *st, int nranks) {
  st->rank_fd = malloc(sizeof(int) * (size_t)nranks);
  st->rank_auth = calloc((size_t)nranks, sizeof *st->rank_auth);
  st->infos = calloc((size_t)nranks, sizeof *st->infos);
  if (st->rank_fd == NULL || st->rank_auth == NULL || st->infos == NULL) {
    free(st->rank_fd);
    free(st->rank_auth);
    free(st->infos);
    st->rank_fd = NULL;
    st->rank_auth = NULL;
    st->infos = NULL;
    return -1;
  }
  for (int r = 0; r < nranks; r++)
    st->rank_fd[r] = -1;
  st->nranks = nranks;
  return 0;
}

/* Refuses a proven rank whose call does not fit the others'. */
static void refuse(struct root_state *st, int i, const char *text) {
  send_error_frame(st->pending[i].fd, &st->pending[i].auth, st->secret, loomInvalidUsage, text);
  drop_pending(st, i, text);
}

/* A complete proof and hello frame arrived on pending slot i. */
static void accept_hello(struct root_state *st, int i) {
  struct pending_conn *pc = &st->pending[i];
  const uint8_t *frame = pc->buf + LOOM_AUTH_PROOF_BYTES;
  memcpy(pc->auth.nonce, pc->buf, LOOM_AUTH_NONCE_BYTES);
  if (!loom_auth_check(st->secret, ROOT_LABEL, 'c', pc->auth.challenge, pc->auth.nonce, frame,
                       ROOT_HELLO_FRAME, pc->buf + LOOM_AUTH_NONCE_BYTES)) {
    send_error_frame(pc->fd, &pc->auth, st->secret, loomInvalidUsage,
                     "this bootstrap root belongs to another job: the rank's proof of the "
                     "job's secret does not match");
    drop_pending(st, i, "wrong proof of the job's secret (a rank of another job sharing "
                        "this address, or a stranger)");
    return;
  }
  int32_t nranks;
  struct loom_peer_info info;
  char text[256];
  if (loom_hello_decode(frame + LOOM_FRAME_HDR_BYTES, &nranks, &info) != 0) {
    drop_pending(st, i, "malformed hello");
    return;
  }
  if (st->nranks == 0 && make_table(st, nranks) != 0) {
    drop_pending(st, i, "out of memory for the rank table");
    return;
  }
  if (nranks != st->nranks) {
    snprintf(text, sizeof text,
             "rank %d called init with nranks=%d but earlier ranks used nranks=%d", info.rank,
             nranks, st->nranks);
    refuse(st, i, text);
    return;
  }
  if (st->rank_fd[info.rank] >= 0) {
    snprintf(text, sizeof text,
             "rank %d joined twice (pids %d on %s and %d on %s): every rank must use a "
             "different rank number",
             info.rank, st->infos[info.rank].pid, st->infos[info.rank].hostname, info.pid,
             info.hostname);
    refuse(st, i, text);
    return;
  }
  st->rank_fd[info.rank] = pc->fd;
  st->rank_auth[info.rank] = pc->auth;
  st->infos[info.rank] = info;
  st->arrived++;
  st->last_ns = loom_now_ns();
  if (st->arrived == 1)
    st->first_ns = st->last_ns;
  LOOM_TRACE(LOOM_LOG_BOOTSTRAP, "root: rank %d arrived (%d/%d)", info.rank, st->arrived,
             st->nranks);
  take_pending(st, i); /* fd now owned by rank_fd */
}

/* Reads what is available on pending slot i. */
static void read_pending(struct root_state *st, int i) {
  struct pending_conn *pc = &st->pending[i];
  const size_t hdr_end = LOOM_AUTH_PROOF_BYTES + LOOM_FRAME_HDR_BYTES;
  size_t want = pc->have < hdr_end ? hdr_end : sizeof pc->buf;
  ssize_t n = recv(pc->fd, pc->buf + pc->have, want - pc->have, 0);
  if (n == 0) {
    drop_pending(st, i, "closed before sending a complete hello");
    return;
  }
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      drop_pending(st, i, strerror(errno));
    return;
  }
  pc->have += (size_t)n;
  if (pc->have == hdr_end) {
    struct loom_frame_hdr h;
    if (loom_frame_hdr_decode(pc->buf + LOOM_AUTH_PROOF_BYTES, LOOM_HELLO_BYTES, &h) != 0 ||
        h.type != LOOM_FRAME_HELLO || h.len != LOOM_HELLO_BYTES) {
      drop_pending(st, i, "not a Loom hello (bad magic, type or size)");
      return;
    }
  }
  if (pc->have == sizeof pc->buf)
    accept_hello(st, i);
}

/* Replies go to ranks of other processes first: a rank in this process may
 * return and end the process (and this thread) as soon as it has its own.
 * Pass 0 answers the others, pass 1 this process's ranks. */
static int answer_in_pass(const struct root_state *st, int r, int pass, pid_t self) {
  return (st->infos[r].pid == self) == (pass == 1);
}

/* Groups the ranks by host id: `order` lists every rank, those of one
 * host together and ascending; a rank's host starts at order[first[r]]
 * and holds count[r] ranks.  O(n log n), once per rendezvous. */
struct host_groups {
  int32_t *order;
  int *first, *count;
};

struct host_key {
  const char *hostid;
  int32_t rank;
};

static int compare_host_keys(const void *a, const void *b) {
  const struct host_key *x = a, *y = b;
  int c = strcmp(x->hostid, y->hostid);
  return c != 0 ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

static void free_groups(struct host_groups *g) {
  free(g->order);
  free(g->first);
  free(g->count);
}

static int group_hosts(const struct root_state *st, struct host_groups *g) {
  size_t n = (size_t)st->nranks;
  struct host_key *keys = malloc(sizeof *keys * n);
  g->order = malloc(sizeof *g->order * n);
  g->first = malloc(sizeof *g->first * n);
  g->count = malloc(sizeof *g->count * n);
  if (keys == NULL || g->order == NULL || g->first == NULL || g->count == NULL) {
    free(keys);
    free_groups(g);
    return -1;
  }
  for (size_t r = 0; r < n; r++)
    keys[r] = (struct host_key){.hostid = st->infos[r].hostid, .rank = (int32_t)r};
  qsort(keys, n, sizeof *keys, compare_host_keys);
  for (size_t i = 0, run = 0; i < n; i++) {
    g->order[i] = keys[i].rank;
    if (i > 0 && strcmp(keys[i].hostid, keys[run].hostid) != 0)
      run = i;
    g->first[keys[i].rank] = (int)run;
  }
  for (size_t i = 0; i < n; i++) {
    size_t end = (size_t)g->first[keys[i].rank];
    while (end < n && strcmp(keys[end].hostid, keys[i].hostid) == 0)
      end++;
    g->count[keys[i].rank] = (int)(end - (size_t)g->first[keys[i].rank]);
  }
  free(keys);
  return 0;
}

static void send_out_of_memory(struct root_state *st) {
  for (int r = 0; r < st->nranks; r++)
    send_error_frame(st->rank_fd[r], &st->rank_auth[r], st->secret, loomSystemError,
                     "bootstrap root ran out of memory for the ranks' placements");
}

/* One rank's answer: frame header, its placement, the root's tag over
 * the placement's digest.  A rank that died meanwhile fails its own
 * neighbours; the caller goes on with the others. */
static void send_placement(struct root_state *st, const struct host_groups *g, int r,
                           uint8_t *frame) {
  int n = st->nranks;
  struct loom_placement p = {.prev = st->infos[(r + n - 1) % n],
                             .next = st->infos[(r + 1) % n],
                             .nlocal = g->count[r],
                             .local = g->order + g->first[r]};
  size_t bytes = LOOM_PLACEMENT_BYTES(p.nlocal);
  struct loom_frame_hdr h = {.type = LOOM_FRAME_PLACEMENT,
                             .len = (uint32_t)(bytes + LOOM_AUTH_TAG_BYTES)};
  loom_frame_hdr_encode(&h, frame);
  loom_placement_encode(&p, frame + LOOM_FRAME_HDR_BYTES);
  uint8_t digest[LOOM_SHA256_BYTES];
  loom_sha256(frame + LOOM_FRAME_HDR_BYTES, bytes, digest);
  loom_auth_tag(st->secret, ROOT_LABEL "/placement", 'a', st->rank_auth[r].challenge,
                st->rank_auth[r].nonce, digest, sizeof digest,
                frame + LOOM_FRAME_HDR_BYTES + bytes);
  char what[64];
  snprintf(what, sizeof what, "rank %d (placement)", r);
  loom_socket_send_all(st->rank_fd[r], frame, LOOM_FRAME_HDR_BYTES + bytes + LOOM_AUTH_TAG_BYTES,
                       loom_deadline_ms(ROOT_REPLY_MS), what);
}

/* Every rank gets its placement: O(ranks on its host) bytes, not the
 * whole table (which made the root send n^2 entries). */
static void send_placements(struct root_state *st) {
  struct host_groups g = {0};
  if (group_hosts(st, &g) != 0) {
    send_out_of_memory(st);
    return;
  }
  int most = 0;
  for (int r = 0; r < st->nranks; r++)
    most = g.count[r] > most ? g.count[r] : most;
  uint8_t *frame = malloc(LOOM_FRAME_HDR_BYTES + LOOM_PLACEMENT_BYTES(most) + LOOM_AUTH_TAG_BYTES);
  if (frame == NULL)
    send_out_of_memory(st);
  pid_t self = getpid();
  for (int pass = 0; frame != NULL && pass < 2; pass++)
    for (int r = 0; r < st->nranks; r++)
      if (answer_in_pass(st, r, pass, self))
        send_placement(st, &g, r, frame);
  free(frame);
  free_groups(&g);
}

/* Lists the missing ranks as "3, 5, 7 (3 of 8)" into buf. */
static void list_missing(const struct root_state *st, char *buf, size_t len) {
  size_t o = 0;
  int missing = 0, shown = 0;
  buf[0] = '\0';
  for (int r = 0; r < st->nranks; r++) {
    if (st->rank_fd[r] >= 0)
      continue;
    missing++;
    if (shown < 32 && o + 16 < len) {
      o += (size_t)snprintf(buf + o, len - o, "%s%d", shown ? ", " : "", r);
      shown++;
    }
  }
  if (missing > shown && o + 8 < len)
    o += (size_t)snprintf(buf + o, len - o, ", ...");
  if (o + 32 < len)
    snprintf(buf + o, len - o, " (%d of %d)", missing, st->nranks);
}

static void root_timeout(struct root_state *st) {
  if (st->nranks == 0) {
    LOOM_WARN(LOOM_LOG_BOOTSTRAP,
              "bootstrap root %s: no rank arrived within %d s; closing",
              st->addr_text, st->timeout_s);
    return;
  }
  char missing[512], text[700];
  list_missing(st, missing, sizeof missing);
  snprintf(text, sizeof text,
           "bootstrap timed out after %d s (LOOM_BOOTSTRAP_TIMEOUT): ranks %s "
           "never arrived at the root %s",
           st->timeout_s, missing, st->addr_text);
  LOOM_WARN(LOOM_LOG_BOOTSTRAP, "%s", text);
  pid_t self = getpid();
  for (int pass = 0; pass < 2; pass++)
    for (int r = 0; r < st->nranks; r++)
      if (st->rank_fd[r] >= 0 && answer_in_pass(st, r, pass, self))
        send_error_frame(st->rank_fd[r], &st->rank_auth[r], st->secret, loomTimeout, text);
}

/* Drops unproven connections past their deadline. */
static void expire_pending(struct root_state *st) {
  uint64_t now = loom_now_ns();
  for (int i = st->npending - 1; i >= 0; i--)
    if (now > st->pending[i].deadline)
      drop_pending(st, i, "did not prove the job's secret in time");
}

/* Accepts what the listener holds (up to a burst), challenging each; when
 * every slot is taken the oldest unproven connection makes room, so a
 * flood of silent connections cannot keep a real rank out. */
static void accept_burst(struct root_state *st, uint64_t *deadline) {
  for (int k = 0; k < ROOT_ACCEPT_BURST; k++) {
    struct pending_conn pc = {.have = 0};
    socklen_t alen = sizeof pc.from;
    pc.fd = accept4(st->listen_fd, &pc.from.sa, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (pc.fd < 0)
      return;
    if (loom_auth_challenge(pc.fd, loom_deadline_ms(100), &pc.auth) != 0) {
      close(pc.fd);
      continue;
    }
    pc.deadline = loom_deadline_ms(ROOT_PROOF_MS);
    if (st->npending == ROOT_MAX_PENDING)
      drop_pending(st, 0, "the oldest unproven connection, dropped to make room");
    if (st->nranks == 0 && st->arrived == 0 && st->npending == 0 && st->dropped == 0)
      *deadline = loom_deadline_ms((int64_t)st->timeout_s * 1000); /* from the first */
    st->pending[st->npending++] = pc;
  }
}

/* Every ROOT_PROGRESS_MS while ranks are missing: one WARN naming them and
 * how long is left, so a job that waits is not a job that is silent. */
static void report_progress(const struct root_state *st, uint64_t *next, int left_ms) {
  if (loom_now_ns() < *next)
    return;
  *next = loom_deadline_ms(ROOT_PROGRESS_MS);
  int waited_s = st->timeout_s - (left_ms + 999) / 1000;
  if (waited_s <= 0)
    return;
  if (st->nranks == 0) {
    LOOM_WARN(LOOM_LOG_BOOTSTRAP, "bootstrap root %s: no rank has arrived after %d s; giving "
              "up in %d s (LOOM_BOOTSTRAP_TIMEOUT)", st->addr_text, waited_s,
              (left_ms + 999) / 1000);
    return;
  }
  char missing[512];
  list_missing(st, missing, sizeof missing);
  LOOM_WARN(LOOM_LOG_BOOTSTRAP, "bootstrap root %s: still waiting for ranks %s after %d s; "
            "giving up in %d s (LOOM_BOOTSTRAP_TIMEOUT)", st->addr_text, missing, waited_s,
            (left_ms + 999) / 1000);
}

static void root_serve(struct root_state *st, struct pollfd *fds) {
  uint64_t deadline = loom_deadline_ms((int64_t)st->timeout_s * 1000);
  uint64_t next_report = loom_deadline_ms(ROOT_PROGRESS_MS);
  while (st->nranks == 0 || st->arrived < st->nranks) {
    int left = loom_ms_left(deadline);
    if (left == 0) {
      root_timeout(st);
      return;
    }
    report_progress(st, &next_report, left);
    fds[0].fd = st->listen_fd;
    fds[0].events = POLLIN;
    for (int i = 0; i < st->npending; i++) {
      fds[i + 1].fd = st->pending[i].fd;
      fds[i + 1].events = POLLIN;
    }
    int npoll = st->npending + 1;
    if (poll(fds, (nfds_t)npoll, left < 1000 ? left : 1000) < 0 && errno != EINTR)
      return;
    /* Walk backwards: dropping slot i moves the later ones down. */
    for (int i = npoll - 2; i >= 0; i--)
      if (fds[i + 1].revents)
        read_pending(st, i);
    expire_pending(st);
    if (fds[0].revents & POLLIN)
      accept_burst(st, &deadline);
  }
}

static void *root_main(void *arg) {
  struct root_state *st = arg;
  struct pollfd *fds = malloc(sizeof *fds * (ROOT_MAX_PENDING + 1));
  if (fds != NULL)
    root_serve(st, fds);
  close(st->listen_fd);
  if (st->nranks > 0 && st->arrived == st->nranks) {
    send_placements(st);
    /* what loom-sim --init's root terms model (root_hello_s, root_bw):
     * the thread's CPU time is its own cost, however late ranks came */
    struct timespec cpu = {0, 0};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    double cpu_ms = (double)cpu.tv_sec * 1e3 + (double)cpu.tv_nsec / 1e6;
    LOOM_INFO(LOOM_LOG_INIT, "bootstrap root %s: %d hellos over %.1f ms, placements sent in "
              "%.1f ms; root thread CPU %.1f ms (%.1f us a rank)", st->addr_text, st->nranks,
              (double)(st->last_ns - st->first_ns) / 1e6,
              (double)(loom_now_ns() - st->last_ns) / 1e6, cpu_ms, cpu_ms * 1e3 / st->nranks);
  }
  if (st->dropped > 8)
    LOOM_WARN(LOOM_LOG_BOOTSTRAP,
              "bootstrap root %s: dropped %lu connections in all that did not prove the "
              "job's secret",
              st->addr_text, st->dropped);
  for (int i = 0; i < st->npending; i++)
    close(st->pending[i].fd);
  for (int r = 0; st->rank_fd != NULL && r < st->nranks; r++)
    if (st->rank_fd[r] >= 0)
      close(st->rank_fd[r]);
  free(fds);
  free(st->pending);
  free(st->rank_fd);
  free(st->rank_auth);
  free(st->infos);
  free(st);
  return NULL;
}

loomResult_t loom_root_start(const union loom_sockaddr *bind_addr,
                             const uint8_t secret[LOOM_SECRET_BYTES], int timeout_s,
                             union loom_sockaddr *bound) {
  struct root_state *st = calloc(1, sizeof *st);
  if (st != NULL)
    st->pending = calloc(ROOT_MAX_PENDING, sizeof *st->pending);
  if (st == NULL || st->pending == NULL) {
    free(st);
    return loom_error(loomSystemError, LOOM_LOG_BOOTSTRAP,
                      "out of memory starting the bootstrap root");
  }
  loomResult_t res = loom_socket_listen(bind_addr, &st->listen_fd, bound);
  if (res != loomSuccess) {
    free(st->pending);
    free(st);
    return res;
  }
  memcpy(st->secret, secret, LOOM_SECRET_BYTES);
  st->timeout_s = timeout_s;
  loom_sockaddr_str(bound, st->addr_text, sizeof st->addr_text);
  pthread_t tid;
  pthread_attr_t attr;
  int err = pthread_attr_init(&attr);
  if (err == 0) {
    err = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (err == 0)
      err = pthread_create(&tid, &attr, root_main, st);
    pthread_attr_destroy(&attr);
  }
  if (err != 0) {
    close(st->listen_fd);
    free(st->pending);
    free(st);
    return loom_check_errnum(err, LOOM_LOG_BOOTSTRAP, "cannot start the bootstrap root thread");
  }
  LOOM_INFO(LOOM_LOG_BOOTSTRAP, "bootstrap root listening on %s", st->addr_text);
  return loomSuccess;
}
