/*
 * root.c — the bootstrap root: a thread that challenges every connection,
 * admits the ranks that prove the job's secret (net/auth.h) until every
 * rank it serves arrived (all of them, or one block of ranks and its
 * neighbours when there are several roots: wire.h), then has them
 * answered (root_answer.c), or answers each with an error naming the
 * ranks that never arrived.  It serves one rendezvous and exits.  Nothing
 * a client sends can crash or starve it: frames are size-checked before
 * anything is read into a buffer, a connection has ROOT_PROOF_MS to prove
 * itself, and when every slot is taken the oldest unproven one makes
 * room.
 */
#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
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

/* Whether rank r is one this root waits for (a member or a neighbour). */
static int expects(const struct root_state *st, int r) {
  if (r >= st->lo && r < st->hi)
    return 1;
  for (int i = 0; i < st->nneighbours; i++)
    if (st->neighbours[i] == r)
      return 1;
  return 0;
}

/* Sizes the rank table at the first proven hello, which also says which
 * root of how many this one is. */
static int make_table(struct root_state *st, const struct loom_hello *h) {
  int nranks = h->nranks;
  st->nroots = h->nroots;
  st->index = h->root;
  st->lo = loom_roots_first(h->root, nranks, h->nroots);
  st->hi = loom_roots_first(h->root + 1, nranks, h->nroots);
  st->nneighbours = loom_roots_neighbours(h->root, nranks, h->nroots, st->neighbours);
  st->expected = st->hi - st->lo + st->nneighbours;
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
  loom_root_send_error(st->pending[i].fd, &st->pending[i].auth, st->secret, loomInvalidUsage, text);
  drop_pending(st, i, text);
}

/* A complete proof and hello frame arrived on pending slot i. */
static void accept_hello(struct root_state *st, int i) {
  struct pending_conn *pc = &st->pending[i];
  const uint8_t *frame = pc->buf + LOOM_AUTH_PROOF_BYTES;
  memcpy(pc->auth.nonce, pc->buf, LOOM_AUTH_NONCE_BYTES);
  if (!loom_auth_check(st->secret, LOOM_ROOT_LABEL, 'c', pc->auth.challenge, pc->auth.nonce, frame,
                       ROOT_HELLO_FRAME, pc->buf + LOOM_AUTH_NONCE_BYTES)) {
    loom_root_send_error(pc->fd, &pc->auth, st->secret, loomInvalidUsage,
                     "this bootstrap root belongs to another job: the rank's proof of the "
                     "job's secret does not match");
    drop_pending(st, i, "wrong proof of the job's secret (a rank of another job sharing "
                        "this address, or a stranger)");
    return;
  }
  struct loom_hello hello;
  char text[256];
  if (loom_hello_decode(frame + LOOM_FRAME_HDR_BYTES, &hello) != 0) {
    drop_pending(st, i, "malformed hello");
    return;
  }
  const struct loom_peer_info info = hello.info;
  if (st->nranks == 0 && make_table(st, &hello) != 0) {
    drop_pending(st, i, "out of memory for the rank table");
    return;
  }
  if (hello.nranks != st->nranks) {
    snprintf(text, sizeof text,
             "rank %d called init with nranks=%d but earlier ranks used nranks=%d", info.rank,
             hello.nranks, st->nranks);
    refuse(st, i, text);
    return;
  }
  if (hello.nroots != st->nroots || hello.root != st->index) {
    snprintf(text, sizeof text,
             "rank %d took this root for root %d of %d ids, earlier ranks for root %d of %d: "
             "every rank must pass the same ids in the same order", info.rank, hello.root,
             hello.nroots, st->index, st->nroots);
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
             st->expected);
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

/* Lists the missing ranks as "3, 5, 7 (3 of 8)" into buf. */
static void list_missing(const struct root_state *st, char *buf, size_t len) {
  size_t o = 0;
  int missing = 0, shown = 0;
  buf[0] = '\0';
  for (int r = 0; r < st->nranks; r++) {
    if (st->rank_fd[r] >= 0 || !expects(st, r))
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
    snprintf(buf + o, len - o, " (%d of %d)", missing, st->expected);
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
      if (st->rank_fd[r] >= 0 && loom_root_answer_in_pass(st, r, pass, self))
        loom_root_send_error(st->rank_fd[r], &st->rank_auth[r], st->secret, loomTimeout, text);
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
  while (st->nranks == 0 || st->arrived < st->expected) {
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
  if (st->nranks > 0 && st->arrived == st->expected) {
    loom_root_answer_all(st);
    /* what loom-sim --init's root terms model (root_hello_s, root_bw):
     * the thread's CPU time is its own cost, however late ranks came */
    struct timespec cpu = {0, 0};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    double cpu_ms = (double)cpu.tv_sec * 1e3 + (double)cpu.tv_nsec / 1e6;
    LOOM_INFO(LOOM_LOG_INIT, "bootstrap root %s: %d hellos over %.1f ms, placements sent in "
              "%.1f ms; root thread CPU %.1f ms (%.1f us a rank)", st->addr_text, st->expected,
              (double)(st->last_ns - st->first_ns) / 1e6,
              (double)(loom_now_ns() - st->last_ns) / 1e6, cpu_ms, cpu_ms * 1e3 / st->expected);
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
  int fd;
  LOOM_CHECK(loom_socket_listen(bind_addr, &fd, bound));
  return loom_root_serve(fd, bound, secret, timeout_s);
}

loomResult_t loom_root_serve(int listen_fd, const union loom_sockaddr *addr,
                             const uint8_t secret[LOOM_SECRET_BYTES], int timeout_s) {
  struct root_state *st = calloc(1, sizeof *st);
  if (st != NULL)
    st->pending = calloc(ROOT_MAX_PENDING, sizeof *st->pending);
  if (st == NULL || st->pending == NULL) {
    free(st);
    close(listen_fd);
    return loom_error(loomSystemError, LOOM_LOG_BOOTSTRAP,
                      "out of memory starting the bootstrap root");
  }
  st->listen_fd = listen_fd;
  memcpy(st->secret, secret, LOOM_SECRET_BYTES);
  st->timeout_s = timeout_s;
  loom_sockaddr_str(addr, st->addr_text, sizeof st->addr_text);
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
