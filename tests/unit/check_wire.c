/*
 * check_wire.c — unit tests of the bootstrap wire formats
 * (src/bootstrap/wire.c) and the socket helpers (src/net/socket.c):
 * unique ids, frame headers, peer info, hello and notice payloads, address
 * parsing and printing, interface selection, and listening in
 * LOOM_PORT_RANGE.
 */
#include "loom.h"
#include "net/socket.h"
#include "bootstrap/wire.h"
#include "net/bytes.h"
#include "core/config.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- helpers ----------------------------------------------------------------- */

static union loom_sockaddr make_v4(const char *ip, int port) {
  union loom_sockaddr a;
  memset(&a, 0, sizeof a);
  a.sin.sin_family = AF_INET;
  ck_assert_int_eq(inet_pton(AF_INET, ip, &a.sin.sin_addr), 1);
  a.sin.sin_port = htons((uint16_t)port);
  return a;
}

static union loom_sockaddr make_v6(const char *ip, int port) {
  union loom_sockaddr a;
  memset(&a, 0, sizeof a);
  a.sin6.sin6_family = AF_INET6;
  ck_assert_int_eq(inet_pton(AF_INET6, ip, &a.sin6.sin6_addr), 1);
  a.sin6.sin6_port = htons((uint16_t)port);
  return a;
}

/* Same family, address and port. */
static void expect_same_addr(const union loom_sockaddr *a, const union loom_sockaddr *b) {
  ck_assert_int_eq(a->sa.sa_family, b->sa.sa_family);
  ck_assert_int_eq(loom_sockaddr_port(a), loom_sockaddr_port(b));
  if (a->sa.sa_family == AF_INET6)
    ck_assert_mem_eq(&a->sin6.sin6_addr, &b->sin6.sin6_addr, 16);
  else
    ck_assert_mem_eq(&a->sin.sin_addr, &b->sin.sin_addr, 4);
}

static void fill_secret(uint8_t *s, uint8_t seed) {
  for (int i = 0; i < LOOM_SECRET_BYTES; i++)
    s[i] = (uint8_t)(seed + 17 * i);
}

static void quiet(void) {
  unsetenv("LOOM_PORT_RANGE");
  unsetenv("LOOM_COMM_ID");
  setenv("LOOM_DEBUG", "NONE", 1);
  loom_config_reload();
  loom_clear_last_error();
}

/* ---- big-endian helpers and 20-byte addresses --------------------------------- */

START_TEST(u32_big_endian) {
  uint8_t b[4];
  loom_put_u32(b, 0x01020304u);
  ck_assert_int_eq(b[0], 1);
  ck_assert_int_eq(b[1], 2);
  ck_assert_int_eq(b[2], 3);
  ck_assert_int_eq(b[3], 4);
  ck_assert_uint_eq(loom_get_u32(b), 0x01020304u);
  loom_put_u32(b, 0xfffffffeu);
  ck_assert_uint_eq(loom_get_u32(b), 0xfffffffeu);
}
END_TEST

START_TEST(sockaddr_20_bytes) {
  uint8_t raw[21];
  union loom_sockaddr in = make_v4("10.1.2.3", 0x1234), out;
  memset(raw, 0xee, sizeof raw);
  loom_sockaddr_encode(&in, raw);
  ck_assert_int_eq(raw[20], 0xee); /* 20 bytes exactly */
  ck_assert_int_eq(raw[0], 4);
  ck_assert_int_eq(raw[1], 0);
  ck_assert_int_eq(raw[2], 0x12);
  ck_assert_int_eq(raw[3], 0x34);
  ck_assert_int_eq(raw[4], 10);
  ck_assert_int_eq(raw[7], 3);
  ck_assert_int_eq(loom_sockaddr_decode(raw, &out), 0);
  expect_same_addr(&in, &out);

  in = make_v6("2001:db8::7", 65535);
  memset(raw, 0xee, sizeof raw);
  loom_sockaddr_encode(&in, raw);
  ck_assert_int_eq(raw[20], 0xee);
  ck_assert_int_eq(raw[0], 6);
  ck_assert_int_eq(loom_sockaddr_decode(raw, &out), 0);
  expect_same_addr(&in, &out);

  raw[0] = 5;
  ck_assert_int_eq(loom_sockaddr_decode(raw, &out), -1);
  raw[0] = 0;
  ck_assert_int_eq(loom_sockaddr_decode(raw, &out), -1);
  raw[0] = 6;
  raw[1] = 1;
  ck_assert_int_eq(loom_sockaddr_decode(raw, &out), -1);
}
END_TEST

/* ---- unique id ---------------------------------------------------------------- */

static void id_roundtrip(const union loom_sockaddr *root, int from_env) {
  struct loom_id_fields f, g;
  memset(&f, 0, sizeof f);
  f.root = *root;
  fill_secret(f.secret, (uint8_t)(from_env + 3));
  f.from_env = from_env;
  loomUniqueId id;
  memset(&id, 0xcc, sizeof id);
  loom_id_encode(&f, &id);
  memset(&g, 0xab, sizeof g);
  ck_assert_int_eq(loom_id_decode(&id, &g), 0);
  expect_same_addr(&f.root, &g.root);
  ck_assert_mem_eq(f.secret, g.secret, LOOM_SECRET_BYTES);
  ck_assert_int_eq(g.from_env, from_env);
  /* Deterministic: encoding twice gives the same bytes. */
  loomUniqueId id2;
  memset(&id2, 0x11, sizeof id2);
  loom_id_encode(&f, &id2);
  ck_assert_mem_eq(&id, &id2, sizeof id);
}

START_TEST(id_roundtrip_v4) {
  union loom_sockaddr a = make_v4("192.168.10.20", 29500);
  id_roundtrip(&a, 0);
  id_roundtrip(&a, 1);
  a = make_v4("127.0.0.1", 1);
  id_roundtrip(&a, 0);
  a = make_v4("255.255.255.254", 65535);
  id_roundtrip(&a, 1);
}
END_TEST

START_TEST(id_roundtrip_v6) {
  union loom_sockaddr a = make_v6("fe80::1:2:3:4", 29500);
  id_roundtrip(&a, 0);
  id_roundtrip(&a, 1);
  a = make_v6("::1", 443);
  id_roundtrip(&a, 0);
  a = make_v6("2001:db8:ffff:ffff:ffff:ffff:ffff:fffe", 65535);
  id_roundtrip(&a, 1);
}
END_TEST

START_TEST(id_decode_rejects) {
  struct loom_id_fields f, g;
  memset(&f, 0, sizeof f);
  f.root = make_v4("10.0.0.1", 29500);
  fill_secret(f.secret, 9);
  loomUniqueId good, id;
  loom_id_encode(&f, &good);

  memset(&id, 0, sizeof id);
  ck_assert_int_eq(loom_id_decode(&id, &g), -1); /* zeroed */

  for (int byte = 0; byte < 4; byte++) { /* magic */
    id = good;
    id.internal[byte] ^= 0x20;
    ck_assert_msg(loom_id_decode(&id, &g) == -1, "bad magic byte %d accepted", byte);
  }
  for (int byte = 4; byte < 8; byte++) { /* version */
    id = good;
    id.internal[byte] ^= 0x02;
    ck_assert_msg(loom_id_decode(&id, &g) == -1, "bad version byte %d accepted", byte);
  }
  id = good; /* flags > 1 */
  id.internal[11] = 2;
  ck_assert_int_eq(loom_id_decode(&id, &g), -1);
  id = good; /* unknown address family */
  id.internal[12] = 5;
  ck_assert_int_eq(loom_id_decode(&id, &g), -1);
  /* port 0 */
  f.root = make_v4("10.0.0.1", 0);
  loom_id_encode(&f, &id);
  ck_assert_int_eq(loom_id_decode(&id, &g), -1);
  /* the good one still decodes */
  ck_assert_int_eq(loom_id_decode(&good, &g), 0);
}
END_TEST

/* ---- frame headers ------------------------------------------------------------- */

START_TEST(frame_hdr_roundtrip) {
  static const uint32_t types[] = {LOOM_FRAME_HELLO, LOOM_FRAME_ERROR, LOOM_FRAME_DATA,
                                   LOOM_FRAME_NOTICE, LOOM_FRAME_PLACEMENT, LOOM_FRAME_ACK};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    uint32_t type = types[i];
    struct loom_frame_hdr h = {type, 1000 + type}, g = {0, 0};
    uint8_t raw[LOOM_FRAME_HDR_BYTES + 1];
    raw[LOOM_FRAME_HDR_BYTES] = 0x5a;
    loom_frame_hdr_encode(&h, raw);
    ck_assert_int_eq(raw[LOOM_FRAME_HDR_BYTES], 0x5a);
    ck_assert_uint_eq(loom_get_u32(raw), LOOM_FRAME_MAGIC);
    ck_assert_int_eq(loom_frame_hdr_decode(raw, 4096, &g), 0);
    ck_assert_uint_eq(g.type, type);
    ck_assert_uint_eq(g.len, 1000 + type);
  }
  struct loom_frame_hdr h = {LOOM_FRAME_DATA, 0}, g;
  uint8_t raw[LOOM_FRAME_HDR_BYTES];
  loom_frame_hdr_encode(&h, raw);
  ck_assert_int_eq(loom_frame_hdr_decode(raw, 0, &g), 0);
  ck_assert_uint_eq(g.len, 0);
  h.len = LOOM_FRAME_MAX_PAYLOAD; /* the limit itself is allowed */
  loom_frame_hdr_encode(&h, raw);
  ck_assert_int_eq(loom_frame_hdr_decode(raw, UINT32_MAX, &g), 0);
  ck_assert_uint_eq(g.len, LOOM_FRAME_MAX_PAYLOAD);
}
END_TEST

START_TEST(frame_hdr_rejects) {
  struct loom_frame_hdr h = {LOOM_FRAME_PLACEMENT, 100}, g;
  uint8_t raw[LOOM_FRAME_HDR_BYTES];
  loom_frame_hdr_encode(&h, raw);
  ck_assert_int_eq(loom_frame_hdr_decode(raw, 100, &g), 0);
  ck_assert_int_eq(loom_frame_hdr_decode(raw, 99, &g), -1); /* len > max_len */
  raw[3] ^= 1;                                              /* bad magic */
  ck_assert_int_eq(loom_frame_hdr_decode(raw, 1000, &g), -1);

  h.type = 0;
  loom_frame_hdr_encode(&h, raw);
  ck_assert_int_eq(loom_frame_hdr_decode(raw, 1000, &g), -1);
  /* 2 (the old whole table), 4 (the old ring hello) and 9 are no types */
  static const uint32_t retired[] = {2, 4, 9};
  for (size_t i = 0; i < sizeof retired / sizeof retired[0]; i++) {
    h.type = retired[i];
    loom_frame_hdr_encode(&h, raw);
    ck_assert_int_eq(loom_frame_hdr_decode(raw, 1000, &g), -1);
  }
  h.type = 0x80000001u;
  loom_frame_hdr_encode(&h, raw);
  ck_assert_int_eq(loom_frame_hdr_decode(raw, 1000, &g), -1);
  /* above the global maximum even when the caller allows more */
  h.type = LOOM_FRAME_DATA;
  h.len = LOOM_FRAME_MAX_PAYLOAD + 1;
  loom_frame_hdr_encode(&h, raw);
  ck_assert_int_eq(loom_frame_hdr_decode(raw, UINT32_MAX, &g), -1);
}
END_TEST

/* ---- peer info, hello, notice -------------------------------------------------- */

static struct loom_peer_info make_peer(int rank, int pid, const union loom_sockaddr *a) {
  struct loom_peer_info p;
  memset(&p, 0, sizeof p);
  p.rank = rank;
  p.pid = pid;
  snprintf(p.hostname, sizeof p.hostname, "node-%d", rank);
  snprintf(p.hostid, sizeof p.hostid, "node-%d:0123456789abcdef", rank);
  p.listen_addr = *a;
  return p;
}

static void expect_same_peer(const struct loom_peer_info *a, const struct loom_peer_info *b) {
  ck_assert_int_eq(a->rank, b->rank);
  ck_assert_int_eq(a->pid, b->pid);
  ck_assert_str_eq(a->hostname, b->hostname);
  ck_assert_str_eq(a->hostid, b->hostid);
  expect_same_addr(&a->listen_addr, &b->listen_addr);
}

START_TEST(peer_info_roundtrip) {
  union loom_sockaddr a4 = make_v4("172.16.0.9", 40001), a6 = make_v6("fd00::42", 40002);
  uint8_t raw[LOOM_PEER_INFO_BYTES + 1];
  for (int v6 = 0; v6 < 2; v6++) {
    struct loom_peer_info p = make_peer(5 + v6, 123456, v6 ? &a6 : &a4), q;
    memset(raw, 0x77, sizeof raw);
    loom_peer_info_encode(&p, raw);
    ck_assert_int_eq(raw[LOOM_PEER_INFO_BYTES], 0x77);
    memset(&q, 0x55, sizeof q);
    ck_assert_int_eq(loom_peer_info_decode(raw, &q), 0);
    expect_same_peer(&p, &q);
  }
  /* A full-length hostname is cut to 63 characters and stays terminated. */
  struct loom_peer_info p = make_peer(0, 1, &a4), q;
  memset(p.hostname, 'h', sizeof p.hostname); /* no NUL at all */
  memset(p.hostid, 'i', sizeof p.hostid);
  memset(raw, 0x77, sizeof raw);
  loom_peer_info_encode(&p, raw);
  ck_assert_int_eq(raw[LOOM_PEER_INFO_BYTES], 0x77);
  ck_assert_int_eq(loom_peer_info_decode(raw, &q), 0);
  ck_assert_uint_eq(strlen(q.hostname), LOOM_HOSTNAME_BYTES - 1);
  ck_assert_uint_eq(strlen(q.hostid), LOOM_HOSTID_BYTES - 1);
  ck_assert_int_eq(q.hostname[0], 'h');
  ck_assert_int_eq(q.hostid[LOOM_HOSTID_BYTES - 2], 'i');
}
END_TEST

START_TEST(peer_info_rejects) {
  union loom_sockaddr a = make_v4("10.0.0.2", 1234);
  uint8_t raw[LOOM_PEER_INFO_BYTES];
  struct loom_peer_info q, p = make_peer(-1, 100, &a);
  loom_peer_info_encode(&p, raw);
  ck_assert_int_eq(loom_peer_info_decode(raw, &q), -1);
  p = make_peer(1, 0, &a);
  loom_peer_info_encode(&p, raw);
  ck_assert_int_eq(loom_peer_info_decode(raw, &q), -1);
  p = make_peer(1, -5, &a);
  loom_peer_info_encode(&p, raw);
  ck_assert_int_eq(loom_peer_info_decode(raw, &q), -1);
  p = make_peer(1, 5, &a);
  loom_peer_info_encode(&p, raw);
  raw[8 + LOOM_HOSTNAME_BYTES + LOOM_HOSTID_BYTES] = 9; /* address family */
  ck_assert_int_eq(loom_peer_info_decode(raw, &q), -1);
}
END_TEST

static struct loom_hello make_hello(int rank, int nranks, int nroots, int root, int role) {
  union loom_sockaddr a = make_v4("10.9.8.7", 50000);
  return (struct loom_hello){.nranks = nranks, .nroots = nroots, .root = root, .role = role,
                             .info = make_peer(rank, 4242, &a)};
}

static int hello_decodes(const struct loom_hello *h) {
  uint8_t raw[LOOM_HELLO_BYTES];
  struct loom_hello q;
  loom_hello_encode(h, raw);
  return loom_hello_decode(raw, &q);
}

START_TEST(hello_roundtrip) {
  uint8_t raw[LOOM_HELLO_BYTES + 1];
  /* rank, nranks, nroots, root, role: one root; 8 ranks over 3 roots
   * (blocks [0,2) [2,5) [5,8)): members, and the neighbours 1 and 5 of
   * root 1's block */
  static const int cases[][5] = {{0, 1, 1, 0, 0},       {5, 8, 1, 0, 0},
                                 {7, 8, 1, 0, 0},       {0, 1000000, 1, 0, 0},
                                 {999999, 1000000, 1, 0, 0}, {3, 8, 3, 1, 0},
                                 {1, 8, 3, 1, 1},       {5, 8, 3, 1, 1},
                                 {7, 8, 3, 2, 0},       {0, 8, 3, 2, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int *c = cases[i];
    struct loom_hello h = make_hello(c[0], c[1], c[2], c[3], c[4]), q;
    memset(raw, 0x66, sizeof raw);
    loom_hello_encode(&h, raw);
    ck_assert_int_eq(raw[LOOM_HELLO_BYTES], 0x66);
    memset(&q, 0x55, sizeof q);
    ck_assert_msg(loom_hello_decode(raw, &q) == 0, "hello case %zu refused", i);
    ck_assert_int_eq(q.nranks, c[1]);
    ck_assert_int_eq(q.nroots, c[2]);
    ck_assert_int_eq(q.root, c[3]);
    ck_assert_int_eq(q.role, c[4]);
    expect_same_peer(&h.info, &q.info);
  }
}
END_TEST

START_TEST(hello_rejects) {
  /* rank, nranks, nroots, root, role */
  static const int bad[][5] = {
      {0, 0, 1, 0, 0},  {0, -1, 1, 0, 0}, {0, INT32_MIN, 1, 0, 0}, {8, 8, 1, 0, 0},
      {9, 8, 1, 0, 0},  {1, 1, 1, 0, 0},  {0, 8, 0, 0, 0},  {0, 8, 9, 0, 0},
      {0, 8, 3, 3, 0},  {0, 8, 3, -1, 0}, {0, 8, 3, 0, 2},  {3, 8, 3, 0, 0}, /* not its block */
      {6, 8, 3, 1, 1},  {2, 8, 3, 1, 1},  /* in no edge of root 1, or inside it */
      {0, 8, 1, 0, 1},  /* one root has no neighbours */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const int *c = bad[i];
    struct loom_hello h = make_hello(c[0], c[1], c[2], c[3], c[4]);
    ck_assert_msg(hello_decodes(&h) == -1, "hello case %zu accepted", i);
  }
  struct loom_hello h = make_hello(2, 4, 1, 0, 0);
  h.info.pid = 0; /* bad peer info inside */
  ck_assert_int_eq(hello_decodes(&h), -1);
}
END_TEST

/* Blocks of n ranks over k roots: each rank in exactly one, contiguous,
 * sizes within one of each other; a root's neighbours are exactly the
 * ring neighbours of its block's edge ranks that lie outside it. */
START_TEST(roots_blocks) {
  for (int n = 1; n <= 40; n++)
    for (int k = 1; k <= n; k++) {
      int lo = n, hi = 0;
      for (int g = 0; g < k; g++) {
        int first = loom_roots_first(g, n, k), end = loom_roots_first(g + 1, n, k);
        lo = end - first < lo ? end - first : lo;
        hi = end - first > hi ? end - first : hi;
        for (int r = first; r < end; r++)
          ck_assert_int_eq(loom_roots_of(r, n, k), g);
        int32_t nb[2], want[2], nw = 0;
        int cand[2] = {(first + n - 1) % n, end % n};
        for (int i = 0; i < 2; i++)
          if ((cand[i] < first || cand[i] >= end) && (nw == 0 || want[0] != cand[i]))
            want[nw++] = cand[i];
        int got = loom_roots_neighbours(g, n, k, nb);
        ck_assert_int_eq(got, nw);
        for (int i = 0; i < got; i++)
          ck_assert_int_eq(nb[i], want[i]);
      }
      ck_assert_int_eq(loom_roots_first(k, n, k), n);
      ck_assert_int_ge(lo, 1);
      ck_assert_int_le(hi - lo, 1);
    }
  ck_assert_int_eq(loom_roots_of(16383, 16384, 7), 6);
}
END_TEST

/* Rank 5 of 8, on a host with ranks 1, 5 and 6. */
static void make_placement(struct loom_placement *p, int32_t *local) {
  union loom_sockaddr a = make_v4("10.1.2.3", 4000);
  local[0] = 1, local[1] = 5, local[2] = 6;
  *p = (struct loom_placement){.prev = make_peer(4, 44, &a), .next = make_peer(6, 66, &a),
                               .nlocal = 3, .local = local};
}

START_TEST(placement_roundtrip) {
  int32_t local[3];
  struct loom_placement p, q;
  make_placement(&p, local);
  uint8_t raw[LOOM_PLACEMENT_BYTES(3) + 1];
  ck_assert_uint_eq(LOOM_PLACEMENT_BYTES(3), 2 * LOOM_PEER_INFO_BYTES + 16);
  raw[LOOM_PLACEMENT_BYTES(3)] = 0x5a;
  loom_placement_encode(&p, raw);
  ck_assert_int_eq(raw[LOOM_PLACEMENT_BYTES(3)], 0x5a);
  ck_assert_int_eq(loom_placement_decode(raw, LOOM_PLACEMENT_BYTES(3), 5, 8, &q), 0);
  expect_same_peer(&p.prev, &q.prev);
  expect_same_peer(&p.next, &q.next);
  ck_assert_int_eq(q.nlocal, 3);
  ck_assert_int_eq(q.local[0], 1);
  ck_assert_int_eq(q.local[1], 5);
  ck_assert_int_eq(q.local[2], 6);
  free(q.local);
  /* one rank: both neighbours are itself */
  union loom_sockaddr a = make_v4("10.1.2.3", 4000);
  int32_t alone = 0;
  struct loom_placement one = {.prev = make_peer(0, 9, &a), .next = make_peer(0, 9, &a),
                               .nlocal = 1, .local = &alone};
  loom_placement_encode(&one, raw);
  ck_assert_int_eq(loom_placement_decode(raw, LOOM_PLACEMENT_BYTES(1), 0, 1, &q), 0);
  ck_assert_int_eq(q.nlocal, 1);
  ck_assert_int_eq(q.local[0], 0);
  free(q.local);
}
END_TEST

/* Decodes a placement changed by `edit` as rank `rank` of `nranks`. */
static int decode_edited(void (*edit)(struct loom_placement *), size_t len_delta, int rank,
                         int nranks) {
  int32_t local[3];
  struct loom_placement p, q;
  make_placement(&p, local);
  if (edit != NULL)
    edit(&p);
  uint8_t raw[LOOM_PLACEMENT_BYTES(3) + 8] = {0};
  loom_placement_encode(&p, raw);
  int rc = loom_placement_decode(raw, LOOM_PLACEMENT_BYTES(p.nlocal) + len_delta, rank, nranks, &q);
  if (rc != 0)
    ck_assert_ptr_null(q.local); /* nothing left allocated on failure */
  free(q.local);
  return rc;
}
static void unordered(struct loom_placement *p) { p->local[1] = 0; }
static void repeated(struct loom_placement *p) { p->local[2] = 5; }
static void out_of_range(struct loom_placement *p) { p->local[2] = 8; }
static void without_self(struct loom_placement *p) { p->local[1] = 4; }
static void wrong_prev(struct loom_placement *p) { p->prev.rank = 3; }
static void wrong_next(struct loom_placement *p) { p->next.rank = 7; }
static void bad_peer(struct loom_placement *p) { p->next.pid = 0; }
static void none_local(struct loom_placement *p) { p->nlocal = 0; }

START_TEST(placement_rejects) {
  void (*const edits[])(struct loom_placement *) = {unordered,  repeated,   out_of_range,
                                                    without_self, wrong_prev, wrong_next,
                                                    bad_peer,   none_local};
  for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++)
    ck_assert_msg(decode_edited(edits[i], 0, 5, 8) == -1, "edit %zu accepted", i);
  ck_assert_int_eq(decode_edited(NULL, 1, 5, 8), -1);  /* length says more */
  ck_assert_int_eq(decode_edited(NULL, 4, 5, 8), -1);  /* a whole rank more */
  ck_assert_int_eq(decode_edited(NULL, 0, 5, 2), -1);  /* rank past nranks */
  ck_assert_int_eq(decode_edited(NULL, 0, 4, 8), -1);  /* another rank's placement */
  ck_assert_int_eq(decode_edited(NULL, 0, 5, 5 + 1), -1); /* next would be 0 */
  ck_assert_int_eq(decode_edited(NULL, 0, 5, 8), 0);
}
END_TEST

START_TEST(notice_roundtrip_and_rejects) {
  uint8_t raw[LOOM_NOTICE_BYTES + 1];
  for (int kind = LOOM_NOTICE_DIED; kind <= LOOM_NOTICE_REVOKE; kind++) {
    struct loom_notice n = {3 + kind, 65536 + kind, kind, {0x0102030405060708ull, 7u + (unsigned)kind},
                            {0xfedcba9876543210ull, 1ull << 63}},
                       m = {-9, -9, -9, {0, 0}, {0, 0}};
    raw[LOOM_NOTICE_BYTES] = 0x12;
    loom_notice_encode(&n, raw);
    ck_assert_int_eq(raw[LOOM_NOTICE_BYTES], 0x12);
    ck_assert_uint_eq(loom_get_u32(raw), (uint32_t)n.suspect);
    ck_assert_uint_eq(loom_get_u32(raw + 4), (uint32_t)n.reporter);
    ck_assert_uint_eq(loom_get_u32(raw + 8), (uint32_t)kind);
    ck_assert_int_eq(loom_notice_decode(raw, &m), 0);
    ck_assert_int_eq(m.suspect, n.suspect);
    ck_assert_int_eq(m.reporter, n.reporter);
    ck_assert_int_eq(m.kind, kind);
    for (int i = 0; i < 2; i++) {
      ck_assert(m.suspect_fp[i] == n.suspect_fp[i]);
      ck_assert(m.reporter_fp[i] == n.reporter_fp[i]);
    }
  }
  static const struct loom_notice bad[] = {
#define NOFP {0, 0}, { 0, 0 }
      {1, 2, 0, NOFP},  {1, 2, LOOM_NOTICE_REVOKE + 1, NOFP},     {1, 2, -1, NOFP},
      {-1, 2, 1, NOFP}, {1, -1, 1, NOFP},                       {1, 2, 0x7fffffff, NOFP}};
#undef NOFP
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct loom_notice m;
    loom_notice_encode(&bad[i], raw);
    ck_assert_msg(loom_notice_decode(raw, &m) == -1, "notice %d/%d/%d accepted",
                  bad[i].suspect, bad[i].reporter, bad[i].kind);
  }
}
END_TEST

START_TEST(secret_equal) {
  uint8_t a[LOOM_SECRET_BYTES], b[LOOM_SECRET_BYTES];
  fill_secret(a, 77);
  memcpy(b, a, sizeof b);
  ck_assert_int_eq(loom_secret_equal(a, b), 1);
  for (int i = 0; i < LOOM_SECRET_BYTES; i++) {
    for (int bit = 0; bit < 8; bit += 7) {
      memcpy(b, a, sizeof b);
      b[i] ^= (uint8_t)(1u << bit);
      ck_assert_msg(loom_secret_equal(a, b) == 0, "byte %d bit %d difference missed", i, bit);
    }
  }
  memset(a, 0, sizeof a);
  memset(b, 0, sizeof b);
  ck_assert_int_eq(loom_secret_equal(a, b), 1);
}
END_TEST

/* ---- addresses ------------------------------------------------------------------ */

START_TEST(sockaddr_parse_ok) {
  union loom_sockaddr a;
  memset(&a, 0xff, sizeof a);
  ck_assert_int_eq(loom_sockaddr_parse("127.0.0.1:29500", &a), 0);
  ck_assert_int_eq(a.sa.sa_family, AF_INET);
  ck_assert_int_eq(loom_sockaddr_port(&a), 29500);
  ck_assert_uint_eq(ntohl(a.sin.sin_addr.s_addr), 0x7f000001u);
  ck_assert_int_eq(loom_sockaddr_len(&a), (int)sizeof(struct sockaddr_in));
  ck_assert_int_eq(loom_sockaddr_is_loopback(&a), 1);

  ck_assert_int_eq(loom_sockaddr_parse("10.20.30.40:1", &a), 0);
  ck_assert_int_eq(a.sa.sa_family, AF_INET);
  ck_assert_int_eq(loom_sockaddr_port(&a), 1);
  ck_assert_uint_eq(ntohl(a.sin.sin_addr.s_addr), 0x0a141e28u);
  ck_assert_int_eq(loom_sockaddr_is_loopback(&a), 0);

  memset(&a, 0xff, sizeof a);
  ck_assert_int_eq(loom_sockaddr_parse("[::1]:80", &a), 0);
  ck_assert_int_eq(a.sa.sa_family, AF_INET6);
  ck_assert_int_eq(loom_sockaddr_port(&a), 80);
  ck_assert_int_eq(IN6_IS_ADDR_LOOPBACK(&a.sin6.sin6_addr), 1);
  ck_assert_int_eq(loom_sockaddr_len(&a), (int)sizeof(struct sockaddr_in6));
  ck_assert_int_eq(loom_sockaddr_is_loopback(&a), 1);

  ck_assert_int_eq(loom_sockaddr_parse("[2001:db8::5]:65535", &a), 0);
  union loom_sockaddr want = make_v6("2001:db8::5", 65535);
  expect_same_addr(&a, &want);

  ck_assert_int_eq(loom_sockaddr_parse("localhost:1234", &a), 0);
  ck_assert(a.sa.sa_family == AF_INET || a.sa.sa_family == AF_INET6);
  ck_assert_int_eq(loom_sockaddr_port(&a), 1234);
  ck_assert_int_eq(loom_sockaddr_is_loopback(&a), 1);
}
END_TEST

START_TEST(sockaddr_parse_rejects) {
  static const char *bad[] = {
      "127.0.0.1",   "127.0.0.1:0", "127.0.0.1:70000", "127.0.0.1:65536", ":80",
      "[::1]80",     "[::1]:0",     "[::1",            "127.0.0.1:",      "127.0.0.1:abc",
      "127.0.0.1:-1", "",           "[::1]:",          "127.0.0.1:80x",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    union loom_sockaddr a;
    ck_assert_msg(loom_sockaddr_parse(bad[i], &a) == -1, "\"%s\" accepted", bad[i]);
  }
  union loom_sockaddr a;
  ck_assert_int_eq(loom_sockaddr_parse(NULL, &a), -1);
}
END_TEST

START_TEST(sockaddr_str) {
  char buf[LOOM_ADDR_STRLEN];
  union loom_sockaddr a = make_v4("10.0.0.1", 5), b;
  loom_sockaddr_str(&a, buf, sizeof buf);
  ck_assert_str_eq(buf, "10.0.0.1:5");
  ck_assert_int_eq(loom_sockaddr_parse(buf, &b), 0);
  expect_same_addr(&a, &b);

  a = make_v6("::1", 80);
  loom_sockaddr_str(&a, buf, sizeof buf);
  ck_assert_str_eq(buf, "[::1]:80");
  ck_assert_int_eq(loom_sockaddr_parse(buf, &b), 0);
  expect_same_addr(&a, &b);

  a = make_v6("2001:db8::ffff:1", 65535);
  loom_sockaddr_str(&a, buf, sizeof buf);
  ck_assert_str_eq(buf, "[2001:db8::ffff:1]:65535");

  loom_sockaddr_set_port(&a, 12);
  ck_assert_int_eq(loom_sockaddr_port(&a), 12);
  loom_sockaddr_str(&a, buf, sizeof buf);
  ck_assert_str_eq(buf, "[2001:db8::ffff:1]:12");

  /* Truncation stays terminated. */
  char small[6];
  a = make_v4("192.168.100.200", 65535);
  loom_sockaddr_str(&a, small, sizeof small);
  ck_assert_str_eq(small, "192.1");
}
END_TEST

START_TEST(ifname_match) {
  ck_assert_int_eq(loom_ifname_match(NULL, "eth0"), 1);
  ck_assert_int_eq(loom_ifname_match("", "eth0"), 1);
  ck_assert_int_eq(loom_ifname_match("eth", "eth0"), 1);
  ck_assert_int_eq(loom_ifname_match("eth", "ib0"), 0);
  ck_assert_int_eq(loom_ifname_match("^eth", "eth0"), 0);
  ck_assert_int_eq(loom_ifname_match("^eth", "ib0"), 1);
  ck_assert_int_eq(loom_ifname_match("=eth0", "eth0"), 1);
  ck_assert_int_eq(loom_ifname_match("=eth", "eth0"), 0);
  ck_assert_int_eq(loom_ifname_match("=eth0", "eth01"), 0);
  ck_assert_int_eq(loom_ifname_match("^=eth0", "eth0"), 0);
  ck_assert_int_eq(loom_ifname_match("^=eth0", "eth01"), 1);
  ck_assert_int_eq(loom_ifname_match("ib,eth", "eth3"), 1);
  ck_assert_int_eq(loom_ifname_match("ib,eth", "ib1"), 1);
  ck_assert_int_eq(loom_ifname_match("ib,eth", "lo"), 0);
  ck_assert_int_eq(loom_ifname_match("^ib,eth", "eth3"), 0);
  ck_assert_int_eq(loom_ifname_match("^ib,eth", "lo"), 1);
  ck_assert_int_eq(loom_ifname_match("=ib0,eth0", "eth0"), 1);
  ck_assert_int_eq(loom_ifname_match("=ib0,eth0", "eth0.1"), 0);
  ck_assert_int_eq(loom_ifname_match("eth0", "eth"), 0); /* prefix of the spec only */
}
END_TEST

/* ---- listening in LOOM_PORT_RANGE ------------------------------------------------ */

/* Whether `port` on 127.0.0.1 can be bound and listened on right now. */
static int port_free(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ck_assert_int_ge(fd, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  union loom_sockaddr a = make_v4("127.0.0.1", port);
  int ok = bind(fd, &a.sa, sizeof a.sin) == 0 && listen(fd, 1) == 0;
  close(fd);
  return ok;
}

/* A base port b with b, b+1 and b+2 free on 127.0.0.1. */
static int find_free_ports(void) {
  for (int attempt = 0; attempt < 200; attempt++) {
    int b = 40000 + (int)((getpid() + attempt * 37) % 10000) * 2;
    if (port_free(b) && port_free(b + 1) && port_free(b + 2))
      return b;
  }
  ck_abort_msg("no three free consecutive ports found");
  return -1;
}

START_TEST(listen_port_range) {
  quiet();
  int base = find_free_ports();
  char range[32];
  snprintf(range, sizeof range, "%d-%d", base, base + 2);
  setenv("LOOM_PORT_RANGE", range, 1);
  loom_config_reload();

  union loom_sockaddr local = make_v4("127.0.0.1", 0), bound;
  int fds[3], ports[3];
  for (int i = 0; i < 3; i++) {
    memset(&bound, 0, sizeof bound);
    loomResult_t r = loom_socket_listen(&local, &fds[i], &bound);
    ck_assert_msg(r == loomSuccess, "listen %d in %s failed: %s", i, range,
                  loomGetLastError(NULL));
    ports[i] = loom_sockaddr_port(&bound);
    ck_assert_int_eq(bound.sa.sa_family, AF_INET);
    ck_assert_uint_eq(ntohl(bound.sin.sin_addr.s_addr), 0x7f000001u);
    ck_assert_msg(ports[i] >= base && ports[i] <= base + 2, "port %d outside %s", ports[i],
                  range);
    for (int j = 0; j < i; j++)
      ck_assert_int_ne(ports[i], ports[j]);
  }
  int fd4 = -1;
  loom_clear_last_error();
  ck_assert_int_eq(loom_socket_listen(&local, &fd4, &bound), loomSystemError);
  ck_assert_msg(strstr(loomGetLastError(NULL), "LOOM_PORT_RANGE") != NULL,
                "error text \"%s\" does not name LOOM_PORT_RANGE", loomGetLastError(NULL));
  ck_assert_msg(strstr(loomGetLastError(NULL), range) != NULL,
                "error text \"%s\" does not show the range", loomGetLastError(NULL));

  /* Once one is closed its port is usable again. */
  close(fds[1]);
  ck_assert_int_eq(loom_socket_listen(&local, &fd4, &bound), loomSuccess);
  ck_assert_int_eq(loom_sockaddr_port(&bound), ports[1]);
  close(fd4);
  close(fds[0]);
  close(fds[2]);
}
END_TEST

/* The LOOM_COMM_ID port is kept free for the root. */
START_TEST(listen_port_range_skips_comm_id) {
  quiet();
  int base = find_free_ports();
  char range[32], comm_id[64];
  snprintf(range, sizeof range, "%d-%d", base, base + 2);
  snprintf(comm_id, sizeof comm_id, "127.0.0.1:%d", base + 1);
  setenv("LOOM_PORT_RANGE", range, 1);
  setenv("LOOM_COMM_ID", comm_id, 1);
  loom_config_reload();
  union loom_sockaddr local = make_v4("127.0.0.1", 0), bound;
  int fds[2], fd3 = -1;
  ck_assert_int_eq(loom_socket_listen(&local, &fds[0], &bound), loomSuccess);
  ck_assert_int_eq(loom_sockaddr_port(&bound), base);
  ck_assert_int_eq(loom_socket_listen(&local, &fds[1], &bound), loomSuccess);
  ck_assert_int_eq(loom_sockaddr_port(&bound), base + 2);
  ck_assert_int_eq(loom_socket_listen(&local, &fd3, &bound), loomSystemError);
  ck_assert_ptr_nonnull(strstr(loomGetLastError(NULL), "LOOM_PORT_RANGE"));
  /* An explicit port is not subject to the range. */
  local = make_v4("127.0.0.1", base + 1);
  ck_assert_int_eq(loom_socket_listen(&local, &fd3, &bound), loomSuccess);
  ck_assert_int_eq(loom_sockaddr_port(&bound), base + 1);
  close(fd3);
  close(fds[0]);
  close(fds[1]);
}
END_TEST

START_TEST(listen_port_range_invalid) {
  quiet();
  static const char *bad[] = {"2000-1000", "abc", "0-10", "10-70000", "10-"};
  union loom_sockaddr local = make_v4("127.0.0.1", 0), bound;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("LOOM_PORT_RANGE", bad[i], 1);
    loom_config_reload();
    loom_clear_last_error();
    int fd = -1;
    ck_assert_msg(loom_socket_listen(&local, &fd, &bound) == loomInvalidArgument,
                  "LOOM_PORT_RANGE=%s not rejected", bad[i]);
    ck_assert_msg(strstr(loomGetLastError(NULL), "LOOM_PORT_RANGE") != NULL,
                  "error text \"%s\"", loomGetLastError(NULL));
  }
}
END_TEST

/* Without a range, port 0 gets any port; the socket carries data. */
START_TEST(listen_connect_send_recv) {
  quiet();
  union loom_sockaddr local = make_v4("127.0.0.1", 0), bound;
  int lfd, cfd, afd;
  ck_assert_int_eq(loom_socket_listen(&local, &lfd, &bound), loomSuccess);
  ck_assert_int_gt(loom_sockaddr_port(&bound), 0);
  uint64_t deadline = loom_deadline_ms(5000);
  ck_assert_int_eq(loom_socket_connect(&bound, deadline, 0, "test peer", &cfd), loomSuccess);
  ck_assert_int_eq(loom_socket_accept(lfd, deadline, "test peer", &afd), loomSuccess);
  const char msg[] = "hello, loom";
  char got[sizeof msg];
  ck_assert_int_eq(loom_socket_send_all(cfd, msg, sizeof msg, deadline, "x"), loomSuccess);
  ck_assert_int_eq(loom_socket_recv_all(afd, got, sizeof got, deadline, "x"), loomSuccess);
  ck_assert_str_eq(got, msg);
  /* Nothing more comes: the deadline gives loomTimeout. */
  ck_assert_int_eq(loom_socket_recv_all(afd, got, 1, loom_deadline_ms(50), "x"), loomTimeout);
  /* The peer closing gives loomRemoteError. */
  close(cfd);
  ck_assert_int_eq(loom_socket_recv_all(afd, got, 1, deadline, "the peer"), loomRemoteError);
  ck_assert_ptr_nonnull(strstr(loomGetLastError(NULL), "the peer"));
  /* Accept with nobody connecting times out. */
  ck_assert_int_eq(loom_socket_accept(lfd, loom_deadline_ms(50), "nobody", &afd), loomTimeout);
  close(lfd);
}
END_TEST

static Suite *wire_suite(void) {
  Suite *s = suite_create("wire");
  TCase *tc = tcase_create("wire");
  tcase_add_test(tc, u32_big_endian);
  tcase_add_test(tc, sockaddr_20_bytes);
  tcase_add_test(tc, id_roundtrip_v4);
  tcase_add_test(tc, id_roundtrip_v6);
  tcase_add_test(tc, id_decode_rejects);
  tcase_add_test(tc, frame_hdr_roundtrip);
  tcase_add_test(tc, frame_hdr_rejects);
  tcase_add_test(tc, peer_info_roundtrip);
  tcase_add_test(tc, peer_info_rejects);
  tcase_add_test(tc, hello_roundtrip);
  tcase_add_test(tc, hello_rejects);
  tcase_add_test(tc, roots_blocks);
  tcase_add_test(tc, placement_roundtrip);
  tcase_add_test(tc, placement_rejects);
  tcase_add_test(tc, notice_roundtrip_and_rejects);
  tcase_add_test(tc, secret_equal);
  suite_add_tcase(s, tc);

  tc = tcase_create("socket");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, sockaddr_parse_ok);
  tcase_add_test(tc, sockaddr_parse_rejects);
  tcase_add_test(tc, sockaddr_str);
  tcase_add_test(tc, ifname_match);
  tcase_add_test(tc, listen_port_range);
  tcase_add_test(tc, listen_port_range_skips_comm_id);
  tcase_add_test(tc, listen_port_range_invalid);
  tcase_add_test(tc, listen_connect_send_recv);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(wire_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
