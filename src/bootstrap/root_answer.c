/*
 * root_answer.c — what the bootstrap root sends back once every rank it
 * waits for arrived: each member its placement (ring neighbours' infos and
 * the ranks of its host, grouped here), each neighbour an acknowledgement,
 * and anyone an error; every answer tagged so the rank knows it came from
 * its own job's root.
 */
#include "bootstrap/root.h"
#include "net/bytes.h"
#include "core/hmac.h"
#include "core/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An error frame: code, text, and the root's tag over both, so that the
 * rank can tell its own job's root from another's. */
void loom_root_send_error(int fd, const struct loom_auth_state *auth, const uint8_t *secret,
                          loomResult_t code, const char *text) {
  uint8_t hdr[LOOM_FRAME_HDR_BYTES], body[4 + 512], tag[LOOM_AUTH_TAG_BYTES];
  size_t len = strnlen(text, sizeof body - 4);
  loom_put_u32(body, (uint32_t)code);
  memcpy(body + 4, text, len);
  loom_auth_tag(secret, LOOM_ROOT_LABEL_ERROR, 'a', auth->challenge, auth->nonce, body, len + 4,
                tag);
  struct loom_frame_hdr h = {.type = LOOM_FRAME_ERROR, .len = (uint32_t)(len + 4 + sizeof tag)};
  loom_frame_hdr_encode(&h, hdr);
  uint64_t deadline = loom_deadline_ms(1000);
  if (loom_socket_send_all(fd, hdr, sizeof hdr, deadline, NULL) == loomSuccess &&
      loom_socket_send_all(fd, body, len + 4, deadline, NULL) == loomSuccess)
    loom_socket_send_all(fd, tag, sizeof tag, deadline, NULL);
}

/* Replies go to ranks of other processes first: a rank in this process may
 * return and end the process (and this thread) as soon as it has its own.
 * Pass 0 answers the others, pass 1 this process's ranks. */
int loom_root_answer_in_pass(const struct root_state *st, int r, int pass, pid_t self) {
  return (st->infos[r].pid == self) == (pass == 1);
}

/* Groups the member ranks by host id: `order` lists them, those of one
 * host together and ascending; member r's host starts at
 * order[first[r - lo]] and holds count[r - lo] ranks.  O(m log m), once
 * per rendezvous.  With several roots a host's ranks may fall in two
 * blocks; each root then knows only its part (api/comm_transport.c
 * warns). */
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
  size_t n = (size_t)(st->hi - st->lo);
  struct host_key *keys = malloc(sizeof *keys * n);
  g->order = malloc(sizeof *g->order * n);
  g->first = malloc(sizeof *g->first * n);
  g->count = malloc(sizeof *g->count * n);
  if (keys == NULL || g->order == NULL || g->first == NULL || g->count == NULL) {
    free(keys);
    free_groups(g);
    return -1;
  }
  for (size_t m = 0; m < n; m++) {
    int32_t r = st->lo + (int32_t)m;
    keys[m] = (struct host_key){.hostid = st->infos[r].hostid, .rank = r};
  }
  qsort(keys, n, sizeof *keys, compare_host_keys);
  for (size_t i = 0, run = 0; i < n; i++) {
    g->order[i] = keys[i].rank;
    if (i > 0 && strcmp(keys[i].hostid, keys[run].hostid) != 0)
      run = i;
    g->first[keys[i].rank - st->lo] = (int)run;
  }
  for (size_t i = 0; i < n; i++) {
    int m = keys[i].rank - st->lo;
    size_t end = (size_t)g->first[m];
    while (end < n && strcmp(keys[end].hostid, keys[i].hostid) == 0)
      end++;
    g->count[m] = (int)(end - (size_t)g->first[m]);
  }
  free(keys);
  return 0;
}

static void send_out_of_memory(struct root_state *st) {
  for (int r = 0; r < st->nranks; r++)
    if (st->rank_fd[r] >= 0)
      loom_root_send_error(st->rank_fd[r], &st->rank_auth[r], st->secret, loomSystemError,
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
                             .nlocal = g->count[r - st->lo],
                             .local = g->order + g->first[r - st->lo]};
  size_t bytes = LOOM_PLACEMENT_BYTES(p.nlocal);
  struct loom_frame_hdr h = {.type = LOOM_FRAME_PLACEMENT,
                             .len = (uint32_t)(bytes + LOOM_AUTH_TAG_BYTES)};
  loom_frame_hdr_encode(&h, frame);
  loom_placement_encode(&p, frame + LOOM_FRAME_HDR_BYTES);
  uint8_t digest[LOOM_SHA256_BYTES];
  loom_sha256(frame + LOOM_FRAME_HDR_BYTES, bytes, digest);
  loom_auth_tag(st->secret, LOOM_ROOT_LABEL_PLACEMENT, 'a', st->rank_auth[r].challenge,
                st->rank_auth[r].nonce, digest, sizeof digest,
                frame + LOOM_FRAME_HDR_BYTES + bytes);
  char what[64];
  snprintf(what, sizeof what, "rank %d (placement)", r);
  loom_socket_send_all(st->rank_fd[r], frame, LOOM_FRAME_HDR_BYTES + bytes + LOOM_AUTH_TAG_BYTES,
                       loom_deadline_ms(ROOT_REPLY_MS), what);
}

/* A NEIGHBOUR hello's answer: only the root's tag, so that the rank
 * knows its hello reached its job's root and the rendezvous completed. */
static void send_ack(struct root_state *st, int r) {
  uint8_t frame[LOOM_FRAME_HDR_BYTES + LOOM_AUTH_TAG_BYTES];
  struct loom_frame_hdr h = {.type = LOOM_FRAME_ACK, .len = LOOM_AUTH_TAG_BYTES};
  loom_frame_hdr_encode(&h, frame);
  static const uint8_t nothing[1];
  loom_auth_tag(st->secret, LOOM_ROOT_LABEL_ACK, 'a', st->rank_auth[r].challenge,
                st->rank_auth[r].nonce, nothing, 0, frame + LOOM_FRAME_HDR_BYTES);
  char what[64];
  snprintf(what, sizeof what, "rank %d (neighbour's answer)", r);
  loom_socket_send_all(st->rank_fd[r], frame, sizeof frame, loom_deadline_ms(ROOT_REPLY_MS),
                       what);
}

/* Every member gets its placement: O(ranks on its host) bytes, not the
 * whole table (which made the root send n^2 entries); every neighbour
 * its acknowledgement. */
void loom_root_answer_all(struct root_state *st) {
  struct host_groups g = {0};
  if (group_hosts(st, &g) != 0) {
    send_out_of_memory(st);
    return;
  }
  int most = 0;
  for (int m = 0; m < st->hi - st->lo; m++)
    most = g.count[m] > most ? g.count[m] : most;
  uint8_t *frame = malloc(LOOM_FRAME_HDR_BYTES + LOOM_PLACEMENT_BYTES(most) + LOOM_AUTH_TAG_BYTES);
  if (frame == NULL)
    send_out_of_memory(st);
  pid_t self = getpid();
  for (int pass = 0; frame != NULL && pass < 2; pass++)
    for (int r = 0; r < st->nranks; r++) {
      if (st->rank_fd[r] < 0 || !loom_root_answer_in_pass(st, r, pass, self))
        continue;
      if (r >= st->lo && r < st->hi)
        send_placement(st, &g, r, frame);
      else
        send_ack(st, r);
    }
  free(frame);
  free_groups(&g);
}
