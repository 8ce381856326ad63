/*
 * rendezvous.c — the rank's side of the rendezvous: a conversation with
 * its block's root (as a member) and with each root whose block it
 * borders (as a neighbour; only with several roots, wire.h).  Every hello
 * goes out before any answer is awaited, so no root waits on a rank that
 * waits on another root.  Answers: the rank's placement from its own root,
 * an acknowledgement from the others, or an error naming why; every one
 * tagged with the root's secret.
 */
#include "bootstrap/rendezvous.h"
#include "net/auth.h"
#include "net/bytes.h"
#include "core/hmac.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A root that accepted our connection sends its challenge at once: this
 * long without one means whatever holds the port is not a Loom root. */
#define ROOT_CHALLENGE_MS 10000
/* How much longer than its own deadline a rank waits for the root's answer,
 * so that the root's "ranks X, Y never arrived" reaches it first. */
#define ROOT_ANSWER_GRACE_MS 5000

/* One conversation with one root. */
struct talk {
  int root, role; /* which id, and LOOM_HELLO_MEMBER or _NEIGHBOUR there */
  const struct loom_id_fields *id;
  int fd;
  struct loom_auth_state st;
  char what[160]; /* "bootstrap root I of K at ADDR", for messages */
};

/* Reads one frame header.  *closed: the root closed or reset the
 * connection before it (worth another try), not a malformed frame. */
static loomResult_t recv_frame_hdr(int fd, uint32_t max_len, uint64_t deadline,
                                   const char *what, struct loom_frame_hdr *h, int *closed) {
  uint8_t raw[LOOM_FRAME_HDR_BYTES];
  loomResult_t res = loom_socket_recv_all(fd, raw, sizeof raw, deadline, what);
  *closed = res == loomRemoteError;
  if (res != loomSuccess)
    return res;
  if (loom_frame_hdr_decode(raw, max_len, h) != 0)
    return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                      "malformed bootstrap frame from %s", what);
  return loomSuccess;
}

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
  if (!loom_auth_check(secret, LOOM_ROOT_LABEL_ERROR, 'a', st->challenge, st->nonce, body, blen,
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
static loomResult_t recv_placement(const struct loom_rendezvous *rv, const struct talk *t,
                                   uint32_t len, uint64_t deadline, struct loom_placement *out) {
  uint8_t tag[LOOM_AUTH_TAG_BYTES], digest[LOOM_SHA256_BYTES];
  if (len < LOOM_PLACEMENT_BYTES(1) + sizeof tag ||
      len > LOOM_PLACEMENT_BYTES(rv->nranks) + sizeof tag)
    return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                      "unexpected answer from %s (%u bytes for %d ranks)", t->what, len,
                      rv->nranks);
  size_t bytes = len - sizeof tag;
  uint8_t *body = malloc(bytes);
  if (body == NULL)
    return loom_error(loomSystemError, LOOM_LOG_BOOTSTRAP, "out of memory (placement)");
  loomResult_t res = loom_socket_recv_all(t->fd, body, bytes, deadline, t->what);
  if (res == loomSuccess)
    res = loom_socket_recv_all(t->fd, tag, sizeof tag, deadline, t->what);
  loom_sha256(body, bytes, digest);
  if (res == loomSuccess && !loom_auth_check(t->id->secret, LOOM_ROOT_LABEL_PLACEMENT, 'a',
                                             t->st.challenge, t->st.nonce, digest,
                                             sizeof digest, tag))
    res = loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                     "the placement from %s does not carry this job's tag: refused (a forged "
                     "or foreign root)",
                     t->what);
  if (res == loomSuccess && loom_placement_decode(body, bytes, rv->rank, rv->nranks, out) != 0)
    res = loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                     "corrupt placement from %s (rank %d of %d)", t->what, rv->rank,
                     rv->nranks);
  free(body);
  return res;
}

/* A neighbour's answer: the root's tag alone. */
static loomResult_t recv_ack(const struct talk *t, uint32_t len, uint64_t deadline) {
  uint8_t tag[LOOM_AUTH_TAG_BYTES];
  static const uint8_t nothing[1];
  if (len != sizeof tag)
    return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                      "unexpected answer from %s (%u bytes)", t->what, len);
  LOOM_CHECK(loom_socket_recv_all(t->fd, tag, sizeof tag, deadline, t->what));
  if (!loom_auth_check(t->id->secret, LOOM_ROOT_LABEL_ACK, 'a', t->st.challenge, t->st.nonce,
                       nothing, 0, tag))
    return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                      "the answer from %s does not carry this job's tag: refused (a forged "
                      "or foreign root)",
                      t->what);
  return loomSuccess;
}

/* Connects to the root and proves the secret with the hello.  *again:
 * the root closed or reset the connection during the handshake (a flood
 * made it drop us): worth another try. */
static loomResult_t say_hello(const struct loom_rendezvous *rv, struct talk *t, int *again) {
  *again = 0;
  int err = loom_socket_connect_quiet(&t->id->root, rv->deadline, 1, &t->fd);
  if (err != 0) /* logged once, here, with the cause */
    return loom_error(err == ETIMEDOUT ? loomTimeout : loomRemoteError, LOOM_LOG_BOOTSTRAP,
                      "rank %d cannot reach %s within %d s (last attempt: %s; is the process "
                      "that made the id, or rank 0 with LOOM_COMM_ID, running? is the "
                      "address reachable?)",
                      rv->rank, t->what, rv->timeout_s, strerror(err));
  uint8_t hello[LOOM_FRAME_HDR_BYTES + LOOM_HELLO_BYTES];
  struct loom_frame_hdr h = {.type = LOOM_FRAME_HELLO, .len = LOOM_HELLO_BYTES};
  loom_frame_hdr_encode(&h, hello);
  struct loom_hello body = {.nranks = rv->nranks, .nroots = rv->nids, .root = t->root,
                            .role = t->role, .info = *rv->self};
  loom_hello_encode(&body, hello + LOOM_FRAME_HDR_BYTES);
  uint64_t challenge_deadline = loom_deadline_ms(ROOT_CHALLENGE_MS);
  loomResult_t res = loom_auth_prove(
      t->fd, t->id->secret, LOOM_ROOT_LABEL, hello, sizeof hello,
      challenge_deadline < rv->deadline ? challenge_deadline : rv->deadline, t->what, &t->st);
  if (res == loomTimeout)
    res = loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                     "rank %d: %s sent no Loom challenge within %d s: the process on that "
                     "port is not a Loom bootstrap root, so this job's root could not start "
                     "(another program holds the port?)",
                     rv->rank, t->what, ROOT_CHALLENGE_MS / 1000);
  if (res == loomRemoteError && t->st.lost)
    *again = 1;
  if (res != loomSuccess) {
    close(t->fd);
    t->fd = -1;
  }
  return res;
}

/* Says hello until the root keeps the connection (or the deadline). */
static loomResult_t hello_kept(const struct loom_rendezvous *rv, struct talk *t) {
  for (;;) {
    int again;
    loomResult_t res = say_hello(rv, t, &again);
    if (!again || loom_ms_left(rv->deadline) == 0)
      return res;
    LOOM_INFO(LOOM_LOG_BOOTSTRAP, "rank %d: %s closed the connection during the handshake; "
              "trying again", rv->rank, t->what);
    usleep(20000);
  }
}

/* Reads the root's answer.  *again: it closed before answering. */
static loomResult_t hear_answer(const struct loom_rendezvous *rv, struct talk *t,
                                struct loom_placement *out, int *again) {
  uint64_t deadline = rv->deadline + (uint64_t)ROOT_ANSWER_GRACE_MS * 1000000ull;
  size_t most = LOOM_PLACEMENT_BYTES(rv->nranks) + LOOM_AUTH_TAG_BYTES;
  struct loom_frame_hdr h;
  loomResult_t res = recv_frame_hdr(t->fd, most > 4096 ? (uint32_t)most : 4096, deadline,
                                    t->what, &h, again);
  if (res == loomTimeout)
    return loom_error(loomTimeout, LOOM_LOG_BOOTSTRAP,
                      "rank %d: %s did not answer within %d s: some ranks never arrived",
                      rv->rank, t->what, rv->timeout_s);
  if (res != loomSuccess)
    return res;
  if (h.type == LOOM_FRAME_ERROR)
    return recv_error_frame(t->fd, h.len, deadline, t->what, t->id->secret, &t->st);
  if (t->role == LOOM_HELLO_MEMBER && h.type == LOOM_FRAME_PLACEMENT)
    return recv_placement(rv, t, h.len, deadline, out);
  if (t->role == LOOM_HELLO_NEIGHBOUR && h.type == LOOM_FRAME_ACK)
    return recv_ack(t, h.len, deadline);
  return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                    "unexpected answer from %s (type %u, %u bytes)", t->what, h.type, h.len);
}

static void name_talk(const struct loom_rendezvous *rv, struct talk *t) {
  char addr[LOOM_ADDR_STRLEN];
  loom_sockaddr_str(&t->id->root, addr, sizeof addr);
  if (rv->nids == 1)
    snprintf(t->what, sizeof t->what, "the bootstrap root at %s", addr);
  else
    snprintf(t->what, sizeof t->what, "bootstrap root %d of %d at %s", t->root, rv->nids, addr);
}

/* This rank's conversations: its own root's first, then each root whose
 * block it borders.  Returns how many (1 to 3). */
static int plan_talks(const struct loom_rendezvous *rv, struct talk talks[3]) {
  int own = loom_roots_of(rv->rank, rv->nranks, rv->nids), n = 0;
  talks[n++] = (struct talk){.root = own, .role = LOOM_HELLO_MEMBER, .fd = -1};
  int sides[2] = {(own + rv->nids - 1) % rv->nids, (own + 1) % rv->nids};
  for (int s = 0; s < 2; s++) {
    int g = sides[s];
    int32_t nb[2];
    if (g == own || (s == 1 && g == sides[0]))
      continue;
    int k = loom_roots_neighbours(g, rv->nranks, rv->nids, nb);
    for (int i = 0; i < k; i++)
      if (nb[i] == rv->rank)
        talks[n++] = (struct talk){.root = g, .role = LOOM_HELLO_NEIGHBOUR, .fd = -1};
  }
  for (int i = 0; i < n; i++) {
    talks[i].id = &rv->ids[talks[i].root];
    name_talk(rv, &talks[i]);
  }
  return n;
}

loomResult_t loom_rendezvous(const struct loom_rendezvous *rv, struct loom_placement *out) {
  struct talk talks[3];
  int n = plan_talks(rv, talks);
  loomResult_t res = loomSuccess;
  for (int i = 0; i < n && res == loomSuccess; i++)
    res = hello_kept(rv, &talks[i]);
  for (int i = 0; i < n && res == loomSuccess; i++) {
    for (;;) {
      int again;
      res = hear_answer(rv, &talks[i], out, &again);
      close(talks[i].fd);
      talks[i].fd = -1;
      if (!again || loom_ms_left(rv->deadline) == 0)
        break;
      LOOM_INFO(LOOM_LOG_BOOTSTRAP, "rank %d: %s closed the connection before answering; "
                "trying again", rv->rank, talks[i].what);
      usleep(20000);
      if ((res = hello_kept(rv, &talks[i])) != loomSuccess)
        break;
    }
  }
  for (int i = 0; i < n; i++)
    if (talks[i].fd >= 0)
      close(talks[i].fd);
  if (res != loomSuccess) {
    free(out->local);
    out->local = NULL;
  }
  return res;
}
