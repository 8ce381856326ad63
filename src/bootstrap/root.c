/*
 * root.c — the bootstrap root: a thread that accepts every rank's hello,
 * checks the secret, and answers with the table of all ranks (or with an
 * error naming the ranks that never arrived).  It serves one rendezvous and
 * exits.  Nothing a client sends can crash it: frames are size-checked
 * before anything is read into a buffer, and a bad client is dropped.
 */
#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROOT_MAX_PENDING 1024
#define ROOT_REPLY_MS 10000 /* bound on sending the table to one rank */

struct pending_conn {
  int fd;
  size_t have; /* bytes of header+hello read so far */
  uint8_t buf[LOOM_FRAME_HDR_BYTES + LOOM_HELLO_BYTES];
  union loom_sockaddr from;
};

struct root_state {
  int listen_fd;
  uint8_t secret[LOOM_SECRET_BYTES];
  int timeout_s;
  char addr_text[LOOM_ADDR_STRLEN];
  struct pending_conn *pending; /* ROOT_MAX_PENDING slots, fd -1 = free */
  int npending;
  int nranks;       /* 0 until the first valid hello */
  int arrived;
  int *rank_fd;     /* per rank, -1 until arrived */
  struct loom_peer_info *infos;
};

static void drop_pending(struct root_state *st, int i, const char *why) {
  struct pending_conn *pc = &st->pending[i];
  if (why != NULL) {
    char from[LOOM_ADDR_STRLEN];
    loom_sockaddr_str(&pc->from, from, sizeof from);
    LOOM_WARN(LOOM_LOG_BOOTSTRAP, "bootstrap root %s: dropped connection from %s: %s",
              st->addr_text, from, why);
  }
  close(pc->fd);
  st->pending[i] = st->pending[--st->npending];
}

static void send_error_frame(int fd, loomResult_t code, const char *text) {
  uint8_t hdr[LOOM_FRAME_HDR_BYTES], codebuf[4];
  size_t len = strlen(text);
  struct loom_frame_hdr h = {LOOM_FRAME_ERROR, (uint32_t)(len + 4)};
  loom_frame_hdr_encode(&h, hdr);
  loom_put_u32(codebuf, (uint32_t)code);
  uint64_t deadline = loom_deadline_ms(1000);
  if (loom_socket_send_all(fd, hdr, sizeof hdr, deadline, "rank (error reply)") ==
          loomSuccess &&
      loom_socket_send_all(fd, codebuf, 4, deadline, "rank (error reply)") == loomSuccess)
    loom_socket_send_all(fd, text, len, deadline, "rank (error reply)");
}

/* A complete, well-formed hello arrived on pending slot i. */
static void accept_hello(struct root_state *st, int i) {
  struct pending_conn *pc = &st->pending[i];
  uint8_t secret[LOOM_SECRET_BYTES];
  int32_t nranks;
  struct loom_peer_info info;
  if (loom_hello_decode(pc->buf + LOOM_FRAME_HDR_BYTES, secret, &nranks, &info) != 0) {
    drop_pending(st, i, "malformed hello");
    return;
  }
  if (!loom_secret_equal(secret, st->secret)) {
    drop_pending(st, i, "wrong secret (a rank of another job, or a stray client)");
    return;
  }
  char text[256];
  if (st->nranks == 0) {
    st->nranks = nranks;
    st->rank_fd = malloc(sizeof(int) * (size_t)nranks);
    st->infos = calloc((size_t)nranks, sizeof *st->infos);
    if (st->rank_fd == NULL || st->infos == NULL) {
      drop_pending(st, i, "out of memory for the rank table");
      st->nranks = 0;
      free(st->rank_fd);
      free(st->infos);
      st->rank_fd = NULL;
      st->infos = NULL;
      return;
    }
    for (int r = 0; r < nranks; r++)
      st->rank_fd[r] = -1;
  } else if (nranks != st->nranks) {
    snprintf(text, sizeof text,
             "rank %d called init with nranks=%d but earlier ranks used "
             "nranks=%d",
             info.rank, nranks, st->nranks);
    send_error_frame(pc->fd, loomInvalidUsage, text);
    drop_pending(st, i, text);
    return;
  }
  if (st->rank_fd[info.rank] >= 0) {
    snprintf(text, sizeof text,
             "rank %d joined twice (pids %d on %s and %d on %s): every rank "
             "must use a different rank number",
             info.rank, st->infos[info.rank].pid, st->infos[info.rank].hostname,
             info.pid, info.hostname);
    send_error_frame(pc->fd, loomInvalidUsage, text);
    drop_pending(st, i, text);
    return;
  }
  st->rank_fd[info.rank] = pc->fd;
  st->infos[info.rank] = info;
  st->arrived++;
  LOOM_TRACE(LOOM_LOG_BOOTSTRAP, "root: rank %d arrived (%d/%d)", info.rank,
             st->arrived, st->nranks);
  st->pending[i] = st->pending[--st->npending]; /* fd now owned by rank_fd */
}

/* Reads what is available on pending slot i. */
static void read_pending(struct root_state *st, int i) {
  struct pending_conn *pc = &st->pending[i];
  size_t want = pc->have < LOOM_FRAME_HDR_BYTES ? LOOM_FRAME_HDR_BYTES
                                                : sizeof pc->buf;
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
  if (pc->have == LOOM_FRAME_HDR_BYTES) {
    struct loom_frame_hdr h;
    if (loom_frame_hdr_decode(pc->buf, LOOM_HELLO_BYTES, &h) != 0 ||
        h.type != LOOM_FRAME_HELLO || h.len != LOOM_HELLO_BYTES) {
      drop_pending(st, i, "not a Loom hello (bad magic, type or size)");
      return;
    }
  }
  if (pc->have == sizeof pc->buf)
    accept_hello(st, i);
}

/* Replies go to ranks of other processes first: a rank in this process may
 * return and end the process (and this thread) as soon as it has its own. */
static int reply_order(const struct root_state *st, int i) {
  pid_t self = getpid();
  int remote = 0;
  for (int r = 0; r < st->nranks; r++)
    if (st->infos[r].pid != self) {
      if (remote == i)
        return r;
      remote++;
    }
  int local = remote;
  for (int r = 0; r < st->nranks; r++)
    if (st->infos[r].pid == self) {
      if (local == i)
        return r;
      local++;
    }
  return -1;
}

static void send_table(struct root_state *st) {
  size_t bytes = (size_t)st->nranks * LOOM_PEER_INFO_BYTES;
  uint8_t *table = malloc(LOOM_FRAME_HDR_BYTES + bytes);
  if (table == NULL) {
    for (int r = 0; r < st->nranks; r++)
      send_error_frame(st->rank_fd[r], loomSystemError,
                       "bootstrap root ran out of memory for the rank table");
    return;
  }
  struct loom_frame_hdr h = {LOOM_FRAME_TABLE, (uint32_t)bytes};
  loom_frame_hdr_encode(&h, table);
  for (int r = 0; r < st->nranks; r++)
    loom_peer_info_encode(&st->infos[r], table + LOOM_FRAME_HDR_BYTES +
                                             (size_t)r * LOOM_PEER_INFO_BYTES);
  for (int i = 0; i < st->nranks; i++) {
    int r = reply_order(st, i);
    char what[64];
    snprintf(what, sizeof what, "rank %d (rank table)", r);
    /* A rank that died meanwhile fails its own neighbours; keep going. */
    loom_socket_send_all(st->rank_fd[r], table, LOOM_FRAME_HDR_BYTES + bytes,
                         loom_deadline_ms(ROOT_REPLY_MS), what);
  }
  free(table);
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
  for (int i = 0; i < st->nranks; i++) {
    int r = reply_order(st, i);
    if (st->rank_fd[r] >= 0)
      send_error_frame(st->rank_fd[r], loomTimeout, text);
  }
}

static void *root_main(void *arg) {
  struct root_state *st = arg;
  uint64_t deadline = loom_deadline_ms((int64_t)st->timeout_s * 1000);
  struct pollfd *fds = malloc(sizeof *fds * (ROOT_MAX_PENDING + 1));
  while (fds != NULL && (st->nranks == 0 || st->arrived < st->nranks)) {
    int left = loom_ms_left(deadline);
    if (left == 0) {
      root_timeout(st);
      break;
    }
    fds[0].fd = st->listen_fd;
    fds[0].events = st->npending < ROOT_MAX_PENDING ? POLLIN : 0;
    for (int i = 0; i < st->npending; i++) {
      fds[i + 1].fd = st->pending[i].fd;
      fds[i + 1].events = POLLIN;
    }
    int npoll = st->npending + 1;
    if (poll(fds, (nfds_t)npoll, left) < 0 && errno != EINTR)
      break;
    /* Walk backwards: drop_pending moves the last slot into i. */
    for (int i = npoll - 2; i >= 0; i--)
      if (fds[i + 1].revents)
        read_pending(st, i);
    if (fds[0].revents & POLLIN) {
      struct pending_conn pc = {.have = 0};
      socklen_t alen = sizeof pc.from;
      pc.fd = accept4(st->listen_fd, &pc.from.sa, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (pc.fd >= 0) {
        int first = st->nranks == 0 && st->arrived == 0 && st->npending == 0;
        st->pending[st->npending++] = pc;
        if (first) /* the timeout counts from the first rank's arrival */
          deadline = loom_deadline_ms((int64_t)st->timeout_s * 1000);
      }
    }
  }
  close(st->listen_fd);
  if (st->nranks > 0 && st->arrived == st->nranks)
    send_table(st);
  for (int i = 0; i < st->npending; i++)
    close(st->pending[i].fd);
  for (int r = 0; st->rank_fd != NULL && r < st->nranks; r++)
    if (st->rank_fd[r] >= 0)
      close(st->rank_fd[r]);
  free(fds);
  free(st->pending);
  free(st->rank_fd);
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
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&tid, &attr, root_main, st);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    close(st->listen_fd);
    free(st->pending);
    free(st);
    return loom_error(loomSystemError, LOOM_LOG_BOOTSTRAP,
                      "cannot start the bootstrap root thread: %s", strerror(err));
  }
  LOOM_INFO(LOOM_LOG_BOOTSTRAP, "bootstrap root listening on %s", st->addr_text);
  return loomSuccess;
}
