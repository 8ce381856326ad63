/*
 * bootstrap.c — the rank side of the rendezvous, the bootstrap ring, and
 * allgather/barrier over it.
 */
#include "bootstrap/bootstrap.h"
#include "bootstrap/rendezvous.h"
#include "net/auth.h"
#include "net/bytes.h"
#include "core/hmac.h"
#include "core/config.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

struct loom_bootstrap {
  int rank, nranks;
  int timeout_s;
  uint8_t secret[LOOM_SECRET_BYTES];
  union loom_sockaddr local_addr;
  struct loom_peer_info self;
  struct loom_placement place; /* ring neighbours, ranks of this host (root's answer) */
  int next_fd; /* to rank+1 */
  char next_what[160];                 /* the successor, for messages */
  struct loom_auth_state next_auth;    /* the ring handshake with it */
  int prev_fd; /* from rank-1 */
};

int loom_bootstrap_rank(const struct loom_bootstrap *bs) { return bs->rank; }
int loom_bootstrap_nranks(const struct loom_bootstrap *bs) { return bs->nranks; }
const struct loom_peer_info *loom_bootstrap_self(const struct loom_bootstrap *bs) {
  return &bs->self;
}
const int32_t *loom_bootstrap_host_ranks(const struct loom_bootstrap *bs, int *nlocal) {
  *nlocal = bs->place.nlocal;
  return bs->place.local;
}
const uint8_t *loom_bootstrap_secret(const struct loom_bootstrap *bs) {
  return bs->secret;
}
const union loom_sockaddr *loom_bootstrap_local_addr(const struct loom_bootstrap *bs) {
  return &bs->local_addr;
}
int loom_bootstrap_notice_fd(const struct loom_bootstrap *bs) { return bs->prev_fd; }

static int bootstrap_timeout_s(void) {
  return (int)loom_param_int(LOOM_PARAM_BOOTSTRAP_TIMEOUT);
}

/* What launchers say about the job, so that two jobs given one
 * LOOM_COMM_ID without LOOM_COMM_SECRET still get different secrets:
 * Open MPI/PMIx, Slurm and torchrun name every job.  Not secret. */
static void job_tag(char *out, size_t len) {
  static const char *const names[] = {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
                                      "SLURM_JOB_ID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID"};
  size_t o = 0;
  out[0] = '\0';
  for (size_t i = 0; i < sizeof names / sizeof names[0] && o < len; i++) {
    const char *v = getenv(names[i]);
    if (v != NULL)
      o += (size_t)snprintf(out + o, len - o, "%s=%s;", names[i], v);
  }
}

/* The secret of a LOOM_COMM_ID job: from LOOM_COMM_SECRET, which loomrun
 * sets to 32 random bytes per job (any launcher may), else from the
 * address and the launcher's job name.  The latter keeps two jobs apart but
 * guards against no one: anyone who can read the launch line can compute
 * it (docs/security.md).  *strong says which. */
static void derive_secret(const char *comm_id, uint8_t secret[LOOM_SECRET_BYTES], int *strong) {
  const char *given = loom_param_str(LOOM_PARAM_COMM_SECRET);
  uint8_t digest[LOOM_SHA256_BYTES];
  struct loom_sha256 c;
  loom_sha256_init(&c);
  *strong = given != NULL && *given != '\0';
  if (*strong) {
    loom_sha256_update(&c, "loom-secret:", 12);
    loom_sha256_update(&c, given, strlen(given));
  } else {
    char tag[512];
    job_tag(tag, sizeof tag);
    loom_sha256_update(&c, "loom-comm-id:", 13);
    loom_sha256_update(&c, comm_id, strlen(comm_id));
    loom_sha256_update(&c, tag, strlen(tag));
  }
  loom_sha256_final(&c, digest);
  memcpy(secret, digest, LOOM_SECRET_BYTES);
}

loomResult_t loom_bootstrap_make_id(loomUniqueId *id) {
  struct loom_id_fields f;
  memset(&f, 0, sizeof f);
  const char *env = loom_param_str(LOOM_PARAM_COMM_ID);
  if (env != NULL && *env != '\0') {
    if (loom_sockaddr_parse(env, &f.root) != 0)
      return loom_error(loomInvalidArgument, LOOM_LOG_BOOTSTRAP,
                        "LOOM_COMM_ID=\"%s\" is not host:port (e.g. "
                        "127.0.0.1:29500 or [::1]:29500) or the host does not "
                        "resolve",
                        env);
    int strong;
    derive_secret(env, f.secret, &strong);
    if (!strong)
      LOOM_INFO(LOOM_LOG_BOOTSTRAP,
                "LOOM_COMM_ID without LOOM_COMM_SECRET: the job's secret comes from the "
                "address%s, which keeps jobs apart but not strangers out (docs/security.md)",
                "");
    f.from_env = 1;
    loom_id_encode(&f, id);
    return loomSuccess;
  }
  return loom_bootstrap_make_root_id(id);
}

loomResult_t loom_bootstrap_make_root_id(loomUniqueId *id) {
  struct loom_id_fields f;
  memset(&f, 0, sizeof f);
  char ifname[64];
  LOOM_CHECK(loom_socket_pick_address(&f.root, ifname, sizeof ifname));
  loom_sockaddr_set_port(&f.root, 0);
  if (getrandom(f.secret, sizeof f.secret, 0) != (ssize_t)sizeof f.secret)
    return loom_error(loomSystemError, LOOM_LOG_BOOTSTRAP,
                      "getrandom failed making the id's secret: %s", strerror(errno));
  union loom_sockaddr bound;
  LOOM_CHECK(loom_root_start(&f.root, f.secret, bootstrap_timeout_s(), &bound));
  f.root = bound;
  loom_id_encode(&f, id);
  return loomSuccess;
}

static void fill_host_identity(struct loom_peer_info *info) {
  gethostname(info->hostname, sizeof info->hostname - 1);
  char boot_id[40] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f != NULL) {
    if (fgets(boot_id, sizeof boot_id, f) == NULL)
      boot_id[0] = '\0';
    fclose(f);
  }
  boot_id[strcspn(boot_id, "\n")] = '\0';
  snprintf(info->hostid, sizeof info->hostid, "%.26s/%.36s", info->hostname, boot_id);
  /* LOOM_HOSTID: ranks with equal values form one node, whatever the
   * machine (tests make several nodes on one host with it). */
  const char *forced = loom_param_str(LOOM_PARAM_HOSTID);
  if (forced != NULL && forced[0] != '\0')
    snprintf(info->hostid, sizeof info->hostid, "%.63s", forced);
}

/* The address this rank listens on for its ring neighbour: with a loopback
 * root every rank is on this host, so loopback; otherwise the chosen NIC. */
static loomResult_t pick_local_address(const union loom_sockaddr *root,
                                       union loom_sockaddr *out) {
  if (loom_sockaddr_is_loopback(root)) {
    *out = *root;
    loom_sockaddr_set_port(out, 0);
    return loomSuccess;
  }
  char ifname[64];
  LOOM_CHECK(loom_socket_pick_address(out, ifname, sizeof ifname));
  loom_sockaddr_set_port(out, 0);
  return loomSuccess;
}

#define RING_AUTH_LABEL "loom/ring"
#define RING_PROOF_MS 5000 /* a stranger on the listener is dropped after this */

/* Accepts connections until the predecessor proves itself; strangers are
 * challenged, dropped and logged.  The first challenge goes out before
 * this rank answers its successor's (`answer_next`), so that no rank
 * waits on a rank that waits on it. */
static loomResult_t accept_predecessor(struct loom_bootstrap *bs, int listen_fd,
                                       uint64_t deadline, const char *what,
                                       loomResult_t (*answer_next)(struct loom_bootstrap *,
                                                                   uint64_t),
                                       int *answered) {
  int prev = (bs->rank + bs->nranks - 1) % bs->nranks;
  while (bs->prev_fd < 0) {
    int fd;
    LOOM_CHECK(loom_socket_accept(listen_fd, deadline, what, &fd));
    struct loom_auth_state st;
    const char *why = "closed before our challenge";
    uint8_t in[4] = {0};
    int ok = loom_auth_challenge(fd, deadline, &st) == 0;
    if (!*answered) { /* the successor waits for nothing but our connection */
      loomResult_t res = answer_next(bs, deadline);
      *answered = 1;
      if (res != loomSuccess) {
        close(fd);
        return res;
      }
    }
    uint64_t proof_deadline = loom_deadline_ms(RING_PROOF_MS);
    if (proof_deadline > deadline)
      proof_deadline = deadline;
    ok = ok && loom_auth_verify(fd, bs->secret, RING_AUTH_LABEL, in, sizeof in, proof_deadline,
                                &st, &why) == 0;
    if (ok && (int)loom_get_u32(in) != prev) {
      ok = 0;
      why = "a rank of this job that is not the ring predecessor";
    }
    if (ok) {
      bs->prev_fd = fd;
    } else {
      LOOM_WARN(LOOM_LOG_BOOTSTRAP, "rank %d: dropped a bootstrap connection (not rank %d): %s",
                bs->rank, prev, why);
      close(fd);
    }
  }
  return loomSuccess;
}

static loomResult_t prove_to_next(struct loom_bootstrap *bs, uint64_t deadline) {
  uint8_t hello[4];
  loom_put_u32(hello, (uint32_t)bs->rank);
  return loom_auth_prove(bs->next_fd, bs->secret, RING_AUTH_LABEL, hello, sizeof hello,
                         deadline, bs->next_what, &bs->next_auth);
}

/* Connects to the ring successor and accepts the predecessor, each proving
 * the secret: connect, challenge the predecessor, answer the successor's
 * challenge, check the predecessor's proof, check the successor's answer.
 * Each step waits only on a step its neighbour takes earlier. */
static loomResult_t form_ring(struct loom_bootstrap *bs, int listen_fd, uint64_t deadline) {
  int next = (bs->rank + 1) % bs->nranks;
  int prev = (bs->rank + bs->nranks - 1) % bs->nranks;
  snprintf(bs->next_what, sizeof bs->next_what,
           "rank %d (bootstrap ring successor, pid %d on %s)", next, bs->place.next.pid,
           bs->place.next.hostname);
  /* The successor listened before its hello: a refusal means it is gone. */
  LOOM_CHECK(loom_socket_connect(&bs->place.next.listen_addr, deadline, 0, bs->next_what,
                                 &bs->next_fd));
  char what[160];
  snprintf(what, sizeof what, "rank %d (bootstrap ring predecessor, pid %d on %s)", prev,
           bs->place.prev.pid, bs->place.prev.hostname);
  int answered = 0;
  LOOM_CHECK(accept_predecessor(bs, listen_fd, deadline, what, prove_to_next, &answered));
  uint8_t hello[4];
  loom_put_u32(hello, (uint32_t)bs->rank);
  return loom_auth_confirm(bs->next_fd, bs->secret, RING_AUTH_LABEL, hello, sizeof hello,
                           deadline, bs->next_what, &bs->next_auth);
}

/* Decodes the ids: every one a Loom id; with several, each made by
 * loomGetUniqueId with a root of its own (not LOOM_COMM_ID) and no two
 * the same.  *fields is allocated. */
static loomResult_t decode_ids(const loomUniqueId *ids, int nids,
                               struct loom_id_fields **fields) {
  struct loom_id_fields *f = calloc((size_t)nids, sizeof *f);
  if (f == NULL)
    return loom_error(loomSystemError, LOOM_LOG_BOOTSTRAP, "out of memory");
  loomResult_t res = loomSuccess;
  for (int i = 0; i < nids && res == loomSuccess; i++) {
    char which[32] = "";
    if (nids > 1)
      snprintf(which, sizeof which, " at index %d", i);
    if (loom_id_decode(&ids[i], &f[i]) != 0)
      res = loom_error(loomInvalidArgument, LOOM_LOG_BOOTSTRAP,
                       "the unique id%s is not a Loom id (not made by loomGetUniqueId, or "
                       "corrupted in transit)", which);
    else if (nids > 1 && f[i].from_env)
      res = loom_error(loomInvalidArgument, LOOM_LOG_BOOTSTRAP,
                       "id %d of %d comes from LOOM_COMM_ID, which names one root: with "
                       "several ids each must be made by loomGetUniqueId with LOOM_COMM_ID "
                       "unset, in the process that will host that root", i, nids);
    for (int j = 0; j < i && res == loomSuccess; j++)
      if (memcmp(&f[i].root, &f[j].root, sizeof f[i].root) == 0)
        res = loom_error(loomInvalidArgument, LOOM_LOG_BOOTSTRAP,
                         "ids %d and %d name the same root: each of the %d ids must come "
                         "from its own loomGetUniqueId call", j, i, nids);
  }
  if (res != loomSuccess) {
    free(f);
    return res;
  }
  *fields = f;
  return loomSuccess;
}

loomResult_t loom_bootstrap_init(const loomUniqueId *ids, int nids, int rank, int nranks,
                                 struct loom_bootstrap **out) {
  struct loom_id_fields *all = NULL;
  LOOM_CHECK(decode_ids(ids, nids, &all));
  struct loom_id_fields f = all[loom_roots_of(rank, nranks, nids)];
  struct loom_bootstrap *bs = calloc(1, sizeof *bs);
  if (bs == NULL) {
    free(all);
    return loom_error(loomSystemError, LOOM_LOG_BOOTSTRAP, "out of memory");
  }
  bs->rank = rank;
  bs->nranks = nranks;
  bs->timeout_s = bootstrap_timeout_s();
  bs->next_fd = bs->prev_fd = -1;
  memcpy(bs->secret, all[0].secret, LOOM_SECRET_BYTES); /* the ring's and transports' */
  int listen_fd = -1;
  loomResult_t res = loomSuccess;
  uint64_t deadline = loom_deadline_ms((int64_t)bs->timeout_s * 1000);
  LOOM_CHECK_GOTO(pick_local_address(&f.root, &bs->local_addr), res, fail);
  struct loom_peer_info *self = &bs->self;
  self->rank = rank;
  self->pid = (int32_t)getpid();
  fill_host_identity(self);
  LOOM_CHECK_GOTO(loom_socket_listen(&bs->local_addr, &listen_fd, &self->listen_addr),
                  res, fail);
  bs->local_addr = self->listen_addr;
  if (f.from_env && rank == 0) {
    union loom_sockaddr bound;
    LOOM_CHECK_GOTO(loom_root_start(&f.root, f.secret, bs->timeout_s, &bound), res, fail);
  }
  struct loom_rendezvous rv = {.rank = rank, .nranks = nranks, .timeout_s = bs->timeout_s,
                               .self = self, .ids = all, .nids = nids, .deadline = deadline};
  LOOM_CHECK_GOTO(loom_rendezvous(&rv, &bs->place), res, fail);
  if (nranks > 1)
    LOOM_CHECK_GOTO(form_ring(bs, listen_fd, deadline), res, fail);
  close(listen_fd);
  free(all);
  *out = bs;
  return loomSuccess;
fail:
  if (listen_fd >= 0)
    close(listen_fd);
  free(all);
  loom_bootstrap_close(bs);
  return res;
}

/* Sends `sbuf` to the successor and receives `rlen` bytes from the
 * predecessor at the same time (so large blocks cannot deadlock), both as
 * DATA frames.  A NOTICE from the predecessor ends it with that failure
 * (a LATE one, a warning left over from a collective, is skipped). */
static loomResult_t ring_exchange(struct loom_bootstrap *bs, const void *sbuf,
                                  void *rbuf, size_t len, uint64_t deadline,
                                  int expect_from) {
  uint8_t shdr[LOOM_FRAME_HDR_BYTES], rhdr[LOOM_FRAME_HDR_BYTES];
  struct loom_frame_hdr h = {.type = LOOM_FRAME_DATA, .len = (uint32_t)len};
  loom_frame_hdr_encode(&h, shdr);
  size_t total = LOOM_FRAME_HDR_BYTES + len, sent = 0, got = 0;
  int prev = (bs->rank + bs->nranks - 1) % bs->nranks;
  int next = (bs->rank + 1) % bs->nranks;
  while (sent < total || got < total) {
    struct pollfd p[2] = {{.fd = sent < total ? bs->next_fd : -1, .events = POLLOUT},
                          {.fd = got < total ? bs->prev_fd : -1, .events = POLLIN}};
    int left = loom_ms_left(deadline);
    if (left == 0)
      return loom_error(loomTimeout, LOOM_LOG_BOOTSTRAP,
                        "rank %d: bootstrap allgather/barrier timed out after %d s "
                        "(LOOM_BOOTSTRAP_TIMEOUT) waiting for rank %d's data: rank "
                        "%d (or a rank before it in the ring) did not arrive",
                        bs->rank, bs->timeout_s, expect_from, expect_from);
    if (loom_socket_aborted())
      return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                        "rank %d: bootstrap allgather/barrier interrupted: the communicator "
                        "was aborted",
                        bs->rank);
    if (poll(p, 2, loom_socket_poll_slice(left)) < 0) {
      if (errno == EINTR)
        continue;
      return loom_error(loomSystemError, LOOM_LOG_BOOTSTRAP, "poll: %s", strerror(errno));
    }
    if (p[0].revents) {
      const uint8_t *src = sent < LOOM_FRAME_HDR_BYTES ? shdr + sent
                                                       : (const uint8_t *)sbuf +
                                                             (sent - LOOM_FRAME_HDR_BYTES);
      size_t n = sent < LOOM_FRAME_HDR_BYTES ? LOOM_FRAME_HDR_BYTES - sent : total - sent;
      ssize_t k = send(bs->next_fd, src, n, MSG_NOSIGNAL);
      if (k > 0)
        sent += (size_t)k;
      else if (k < 0 && errno != EAGAIN && errno != EINTR)
        return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                          "rank %d: bootstrap send to rank %d failed: %s (did it exit?)",
                          bs->rank, next, strerror(errno));
    }
    if (p[1].revents) {
      uint8_t *dst = got < LOOM_FRAME_HDR_BYTES ? rhdr + got
                                                : (uint8_t *)rbuf + (got - LOOM_FRAME_HDR_BYTES);
      size_t n = got < LOOM_FRAME_HDR_BYTES ? LOOM_FRAME_HDR_BYTES - got : total - got;
      ssize_t k = recv(bs->prev_fd, dst, n, 0);
      if (k == 0)
        return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                          "rank %d: rank %d closed its bootstrap connection (did "
                          "the process exit?)",
                          bs->rank, prev);
      if (k < 0 && errno != EAGAIN && errno != EINTR)
        return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                          "rank %d: bootstrap receive from rank %d failed: %s",
                          bs->rank, prev, strerror(errno));
      if (k > 0) {
        got += (size_t)k;
        if (got == LOOM_FRAME_HDR_BYTES) {
          struct loom_frame_hdr rh;
          uint32_t max_len = len > LOOM_NOTICE_BYTES ? (uint32_t)len : LOOM_NOTICE_BYTES;
          int bad = loom_frame_hdr_decode(rhdr, max_len, &rh) != 0;
          if (!bad && rh.type == LOOM_FRAME_NOTICE && rh.len == LOOM_NOTICE_BYTES) {
            uint8_t raw[LOOM_NOTICE_BYTES];
            struct loom_notice nt;
            int ok = loom_socket_recv_all(bs->prev_fd, raw, sizeof raw, deadline,
                                          "bootstrap predecessor") == loomSuccess &&
                     loom_notice_decode(raw, &nt) == 0;
            if (ok && nt.kind == LOOM_NOTICE_LATE) { /* a warning of a past call: skip it */
              got = 0;
              continue;
            }
            if (ok)
              return loom_error(loom_notice_result(nt.kind), LOOM_LOG_BOOTSTRAP,
                                "rank %d: bootstrap operation failed: rank %d %s "
                                "(reported by rank %d)",
                                bs->rank, nt.suspect, loom_notice_text(nt.kind),
                                nt.reporter);
          }
          if (bad || rh.type != LOOM_FRAME_DATA || rh.len != len)
            return loom_error(loomInvalidUsage, LOOM_LOG_BOOTSTRAP,
                              "rank %d: unexpected bootstrap frame from rank %d "
                              "(ranks called different bootstrap operations?)",
                              bs->rank, prev);
        }
      }
    }
  }
  return loomSuccess;
}

loomResult_t loom_bootstrap_allgather(struct loom_bootstrap *bs, void *data,
                                      size_t size) {
  int n = bs->nranks, r = bs->rank;
  uint64_t deadline = loom_deadline_ms((int64_t)bs->timeout_s * 1000);
  char *base = data;
  for (int s = 0; s < n - 1; s++) {
    int send_block = (r - s + n) % n;
    int recv_block = (r - s - 1 + n) % n;
    LOOM_CHECK(ring_exchange(bs, base + (size_t)send_block * size,
                             base + (size_t)recv_block * size, size, deadline,
                             recv_block));
  }
  return loomSuccess;
}

loomResult_t loom_bootstrap_barrier(struct loom_bootstrap *bs) {
  if (bs->nranks == 1)
    return loomSuccess;
  char *flags = calloc((size_t)bs->nranks, 1);
  if (flags == NULL)
    return loom_error(loomSystemError, LOOM_LOG_BOOTSTRAP, "out of memory");
  loomResult_t res = loom_bootstrap_allgather(bs, flags, 1);
  free(flags);
  return res;
}

int loom_bootstrap_read_notice(struct loom_bootstrap *bs, int wait_ms,
                               struct loom_notice *n) {
  if (bs->prev_fd < 0)
    return 0;
  struct pollfd p = {.fd = bs->prev_fd, .events = POLLIN};
  if (poll(&p, 1, wait_ms) <= 0)
    return 0;
  int prev = (bs->rank + bs->nranks - 1) % bs->nranks;
  uint8_t raw[LOOM_FRAME_HDR_BYTES + LOOM_NOTICE_BYTES];
  ssize_t k = recv(bs->prev_fd, raw, LOOM_FRAME_HDR_BYTES, MSG_PEEK);
  if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
    *n = (struct loom_notice){.suspect = prev, .reporter = bs->rank, .kind = LOOM_NOTICE_DIED};
    return 1;
  }
  if (k < (ssize_t)LOOM_FRAME_HDR_BYTES)
    return 0;
  struct loom_frame_hdr h;
  if (loom_frame_hdr_decode(raw, LOOM_FRAME_MAX_PAYLOAD, &h) != 0 ||
      h.type != LOOM_FRAME_NOTICE || h.len != LOOM_NOTICE_BYTES)
    return -1; /* data of a later bootstrap operation: not ours to read */
  if (loom_socket_recv_all(bs->prev_fd, raw, sizeof raw, loom_deadline_ms(1000),
                           "bootstrap predecessor") != loomSuccess ||
      loom_notice_decode(raw + LOOM_FRAME_HDR_BYTES, n) != 0) {
    /* whole: the notice is passed on round the ring (valgrind found its
     * fingerprints sent uninitialised) */
    *n = (struct loom_notice){.suspect = prev, .reporter = bs->rank, .kind = LOOM_NOTICE_DIED};
  }
  return 1;
}

void loom_bootstrap_send_notice(struct loom_bootstrap *bs, const struct loom_notice *n) {
  if (bs->next_fd < 0)
    return;
  uint8_t raw[LOOM_NOTICE_BYTES];
  loom_notice_encode(n, raw);
  uint8_t hdr[LOOM_FRAME_HDR_BYTES];
  struct loom_frame_hdr h = {.type = LOOM_FRAME_NOTICE, .len = LOOM_NOTICE_BYTES};
  loom_frame_hdr_encode(&h, hdr);
  uint8_t frame[sizeof hdr + sizeof raw];
  memcpy(frame, hdr, sizeof hdr);
  memcpy(frame + sizeof hdr, raw, sizeof raw);
  /* Best effort: the successor may be the rank that died. */
  ssize_t k = send(bs->next_fd, frame, sizeof frame, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)k;
}

void loom_bootstrap_close(struct loom_bootstrap *bs) {
  if (bs == NULL)
    return;
  if (bs->next_fd >= 0)
    close(bs->next_fd);
  if (bs->prev_fd >= 0)
    close(bs->prev_fd);
  free(bs->place.local);
  free(bs);
}
