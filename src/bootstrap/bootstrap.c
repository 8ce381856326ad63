/*
 * bootstrap.c — the rank side of the rendezvous, the bootstrap ring, and
 * allgather/barrier over it.
 */
#include "bootstrap/bootstrap.h"
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

/* How much longer than its own deadline a rank waits for the root's answer,
 * so that the root's "ranks X, Y never arrived" reaches it first. */
#define ROOT_ANSWER_GRACE_MS 5000

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

/* Reads one frame header of an expected type (or ERROR) and returns its
 * payload length. */
static loomResult_t recv_frame_hdr(int fd, uint32_t max_len, uint64_t deadline,
                                   const char *what, struct loom_frame_hdr *h) {
  uint8_t raw[LOOM_FRAME_HDR_BYTES];
  LOOM_CHECK(loom_socket_recv_all(fd, raw, sizeof raw, deadline, what));
  if (loom_frame_hdr_decode(raw, max_len, h) != 0)
    return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                      "malformed bootstrap frame from %s", what);
  return loomSuccess;
}

#define ROOT_LABEL "loom/root"
/* A root that accepted our connection sends its challenge at once: this
 * long without one means whatever holds the port is not a Loom root. */
#define ROOT_CHALLENGE_MS 10000

/* An error frame from the root: code, text, tag.  A tag that does not
 * check means the root is another job's (it holds our port). */
static loomResult_t recv_error_frame(int fd, uint32_t len, uint64_t deadline, const char *what,
                                     const uint8_t *secret, const struct loom_auth_state *st) {
  uint8_t body[4 + 1024], tag[LOOM_AUTH_TAG_BYTES];
  if (len < 4 + sizeof tag || len - sizeof tag > sizeof body)
    return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP, "malformed error frame from %s",
                      what);
  size_t blen = len - sizeof tag;
  LOOM_CHECK(loom_socket_recv_all(fd, body, blen, deadline, what));
  LOOM_CHECK(loom_socket_recv_all(fd, tag, sizeof tag, deadline, what));
  char text[1024];
  loom_sanitize_text(text, sizeof text, (const char *)body + 4, blen - 4);
  if (!loom_auth_check(secret, ROOT_LABEL "/error", 'a', st->challenge, st->nonce, body, blen,
                       tag))
    return loom_error(loomInvalidUsage, LOOM_LOG_BOOTSTRAP,
                      "%s is not this job's bootstrap root: it refused this rank and cannot "
                      "prove it knows the job's secret (it said: \"%s\"). Two jobs share "
                      "that LOOM_COMM_ID, so this job's root could not start; give each job "
                      "its own port, or the ranks of one job differ in LOOM_COMM_SECRET",
                      what, text);
  loomResult_t res = (loomResult_t)loom_get_u32(body);
  if (res <= loomSuccess || res >= loomNumResults)
    res = loomRemoteError;
  return loom_error(res, LOOM_LOG_BOOTSTRAP, "%s", text);
}

/* The placement frame's body and the root's tag over its digest. */
static loomResult_t recv_placement(struct loom_bootstrap *bs, int fd, uint32_t len,
                                   uint64_t deadline, const char *what,
                                   const struct loom_auth_state *st) {
  uint8_t tag[LOOM_AUTH_TAG_BYTES], digest[LOOM_SHA256_BYTES];
  if (len < LOOM_PLACEMENT_BYTES(1) + sizeof tag || len > LOOM_PLACEMENT_BYTES(bs->nranks) + sizeof tag)
    return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                      "unexpected answer from %s (%u bytes for %d ranks)", what, len,
                      bs->nranks);
  size_t bytes = len - sizeof tag;
  uint8_t *body = malloc(bytes);
  if (body == NULL)
    return loom_error(loomSystemError, LOOM_LOG_BOOTSTRAP, "out of memory (placement)");
  loomResult_t res = loom_socket_recv_all(fd, body, bytes, deadline, what);
  if (res == loomSuccess)
    res = loom_socket_recv_all(fd, tag, sizeof tag, deadline, what);
  loom_sha256(body, bytes, digest);
  if (res == loomSuccess && !loom_auth_check(bs->secret, ROOT_LABEL "/placement", 'a',
                                             st->challenge, st->nonce, digest, sizeof digest, tag))
    res = loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                     "the placement from %s does not carry this job's tag: refused (a forged "
                     "or foreign root)",
                     what);
  if (res == loomSuccess &&
      loom_placement_decode(body, bytes, bs->rank, bs->nranks, &bs->place) != 0)
    res = loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                     "corrupt placement from %s (rank %d of %d)", what, bs->rank, bs->nranks);
  free(body);
  return res;
}

/* One try at the root: its challenge, our proof and hello, its answer.
 * *again is set when the root closed the connection before answering
 * (a flood made it drop us, or it is restarting): the caller retries. */
static loomResult_t rendezvous_once(struct loom_bootstrap *bs, int fd, const char *what,
                                    const struct loom_peer_info *self, uint64_t deadline,
                                    int *again) {
  uint8_t hello[LOOM_FRAME_HDR_BYTES + LOOM_HELLO_BYTES];
  struct loom_frame_hdr h = {.type = LOOM_FRAME_HELLO, .len = LOOM_HELLO_BYTES};
  loom_frame_hdr_encode(&h, hello);
  loom_hello_encode(bs->nranks, self, hello + LOOM_FRAME_HDR_BYTES);
  uint64_t challenge_deadline = loom_deadline_ms(ROOT_CHALLENGE_MS);
  struct loom_auth_state st;
  *again = 0;
  loomResult_t res = loom_auth_prove(fd, bs->secret, ROOT_LABEL, hello, sizeof hello,
                                     challenge_deadline < deadline ? challenge_deadline : deadline,
                                     what, &st);
  if (res == loomTimeout)
    return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                      "rank %d: %s sent no Loom challenge within %d s: the process on that "
                      "port is not a Loom bootstrap root, so this job's root could not start "
                      "(another program holds the port?)",
                      bs->rank, what, ROOT_CHALLENGE_MS / 1000);
  /* Closed or reset during the handshake: dropped by a busy root. */
  if (res == loomRemoteError && st.lost)
    *again = 1;
  if (res != loomSuccess)
    return res;
  uint64_t answer_deadline = deadline + (uint64_t)ROOT_ANSWER_GRACE_MS * 1000000ull;
  size_t most = LOOM_PLACEMENT_BYTES(bs->nranks) + LOOM_AUTH_TAG_BYTES;
  res = recv_frame_hdr(fd, most > 4096 ? (uint32_t)most : 4096, answer_deadline, what, &h);
  if (res == loomTimeout)
    return loom_error(loomTimeout, LOOM_LOG_BOOTSTRAP,
                      "rank %d: the bootstrap root at %s did not answer within %d s: some "
                      "ranks never arrived",
                      bs->rank, what, bs->timeout_s);
  if (res == loomRemoteError)
    *again = 1;
  if (res != loomSuccess)
    return res;
  if (h.type == LOOM_FRAME_ERROR)
    return recv_error_frame(fd, h.len, answer_deadline, what, bs->secret, &st);
  if (h.type != LOOM_FRAME_PLACEMENT)
    return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                      "unexpected answer from %s (type %u, %u bytes)", what, h.type, h.len);
  return recv_placement(bs, fd, h.len, answer_deadline, what, &st);
}

/* Hello to the root, answer: this rank's placement. */
static loomResult_t rendezvous(struct loom_bootstrap *bs, const struct loom_id_fields *id,
                               const struct loom_peer_info *self, uint64_t deadline) {
  char what[128], root_text[LOOM_ADDR_STRLEN];
  loom_sockaddr_str(&id->root, root_text, sizeof root_text);
  snprintf(what, sizeof what, "the bootstrap root at %s", root_text);
  for (;;) {
    int fd = -1, again = 0;
    int err = loom_socket_connect_quiet(&id->root, deadline, 1, &fd);
    if (err != 0) /* logged once, here, with the cause */
      return loom_error(err == ETIMEDOUT ? loomTimeout : loomRemoteError, LOOM_LOG_BOOTSTRAP,
                        "rank %d cannot reach the bootstrap root at %s within %d s (last "
                        "attempt: %s; is the process that made the id, or rank 0 with "
                        "LOOM_COMM_ID, running? is the address reachable?)",
                        bs->rank, root_text, bs->timeout_s, strerror(err));
    loomResult_t res = rendezvous_once(bs, fd, what, self, deadline, &again);
    close(fd);
    if (!again || loom_ms_left(deadline) == 0)
      return res;
    LOOM_INFO(LOOM_LOG_BOOTSTRAP, "rank %d: %s closed the connection before answering; "
              "trying again", bs->rank, what);
    usleep(20000);
  }
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

loomResult_t loom_bootstrap_init(const loomUniqueId *id, int rank, int nranks,
                                 struct loom_bootstrap **out) {
  struct loom_id_fields f;
  if (loom_id_decode(id, &f) != 0)
    return loom_error(loomInvalidArgument, LOOM_LOG_BOOTSTRAP,
                      "the unique id is not a Loom id (not made by "
                      "loomGetUniqueId, or corrupted in transit)");
  struct loom_bootstrap *bs = calloc(1, sizeof *bs);
  if (bs == NULL)
    return loom_error(loomSystemError, LOOM_LOG_BOOTSTRAP, "out of memory");
  bs->rank = rank;
  bs->nranks = nranks;
  bs->timeout_s = bootstrap_timeout_s();
  bs->next_fd = bs->prev_fd = -1;
  memcpy(bs->secret, f.secret, LOOM_SECRET_BYTES);
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
  LOOM_CHECK_GOTO(rendezvous(bs, &f, self, deadline), res, fail);
  if (nranks > 1)
    LOOM_CHECK_GOTO(form_ring(bs, listen_fd, deadline), res, fail);
  close(listen_fd);
  *out = bs;
  return loomSuccess;
fail:
  if (listen_fd >= 0)
    close(listen_fd);
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
