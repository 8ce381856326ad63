/*
 * check_ofi.c — unit tests of the libfabric transport (transports/ofi) and
 * of the choice of the transport between nodes (transports/select.c,
 * net_plugin.c): tag encoding, part headers and sizes, the address blob,
 * LOOM_OFI_PROVIDER parsing and the default provider, the registration
 * cache (LRU, in-use entries, invalidation) over counting fake calls, the
 * LOOM_NET / LOOM_NET_PLUGIN decision; then the transport end to end with
 * two "ranks" in this process over libfabric's tcp and shm providers:
 * messages split into many parts, registered buffers, a fingerprint and
 * two length mismatches.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "loom.h"
#include "net/socket.h"
#include "core/config.h"
#include "core/error.h"
#include "core/timeutil.h"
#include "ofi/ofi_fabric.h"
#include "select.h"
#include "transport.h"

#include <arpa/inet.h>
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_expect.h"

/* ---- tags, headers, parts, address blobs -------------------------------------- */

START_TEST(tag_roundtrip) {
  static const int ranks[] = {0, 1, 2, 1000, OFI_MAX_RANKS - 1};
  static const uint32_t seqs[] = {0, 1, 65535, 65536, UINT32_MAX};
  for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++)
    for (size_t j = 0; j < sizeof seqs / sizeof seqs[0]; j++) {
      uint64_t t = ofi_tag_make(ranks[i], seqs[j]);
      EXPECT(ofi_tag_sender(t) == ranks[i] && ofi_tag_seq(t) == seqs[j] && !ofi_tag_is_hello(t),
             "tag(%d, %u) = %#llx decodes as (%d, %u, hello %d)", ranks[i], seqs[j],
             (unsigned long long)t, ofi_tag_sender(t), ofi_tag_seq(t), ofi_tag_is_hello(t));
      EXPECT(t >> 56 == 0, "tag(%d, %u) uses bits above 55: %#llx", ranks[i], seqs[j],
             (unsigned long long)t);
    }
  ck_assert_uint_eq(ofi_tag_make(3, 7), 0x0000000300000007ull);
  ck_assert_uint_eq(ofi_tag_make(OFI_MAX_RANKS - 1, UINT32_MAX), 0x00ffffffffffffffull);
  uint64_t h = ofi_tag_hello(5);
  ck_assert_uint_eq(h, 0x0100000500000000ull);
  EXPECT(ofi_tag_is_hello(h) && ofi_tag_sender(h) == 5, "hello tag %#llx", (unsigned long long)h);
  /* A hello never matches a data tag, of any sender or sequence. */
  ck_assert_uint_ne(h, ofi_tag_make(5, 0));
}
END_TEST

START_TEST(tag_distinct_per_sender_and_seq) {
  /* Tags of different (sender, seq) pairs never collide. */
  for (int a = 0; a < 40; a++)
    for (int b = 0; b < 40; b++)
      if (a != b) {
        ck_assert_uint_ne(ofi_tag_make(a % 5, (uint32_t)(a / 5)),
                          ofi_tag_make(b % 5, (uint32_t)(b / 5)));
      }
}
END_TEST

START_TEST(header_roundtrip) {
  struct ofi_hdr h = {OFI_HDR_MAGIC, 7, 0x0102030405060708ull,
                      {0x1112131415161718ull, 0x2122232425262728ull}}, back;
  uint8_t b[OFI_HDR_BYTES];
  ofi_hdr_encode(b, &h);
  static const uint8_t want[OFI_HDR_BYTES] = {
      0x4c, 0x4d, 0x4f, 0x48, 0, 0, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8,
      0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28};
  ck_assert_mem_eq(b, want, OFI_HDR_BYTES);
  ck_assert_int_eq(ofi_hdr_decode(b, &back), 0);
  ck_assert_uint_eq(back.part, 7);
  ck_assert_uint_eq(back.msg_len, h.msg_len);
  ck_assert_uint_eq(back.fp[0], h.fp[0]);
  ck_assert_uint_eq(back.fp[1], h.fp[1]);
  b[0] ^= 1;
  ck_assert_int_eq(ofi_hdr_decode(b, &back), -1);
}
END_TEST

START_TEST(part_sizes) {
  ck_assert_uint_eq(ofi_part_bytes(UINT64_MAX), OFI_MAX_PART);
  ck_assert_uint_eq(ofi_part_bytes((uint64_t)OFI_MAX_PART + OFI_HDR_BYTES), OFI_MAX_PART);
  ck_assert_uint_eq(ofi_part_bytes(1000 + OFI_HDR_BYTES), 1000);
  ck_assert_uint_eq(ofi_part_bytes(OFI_HDR_BYTES), 1);
  ck_assert_uint_eq(ofi_part_bytes(0), 1);
  ck_assert_uint_eq(ofi_nparts(0, 1000), 1);
  ck_assert_uint_eq(ofi_nparts(1, 1000), 1);
  ck_assert_uint_eq(ofi_nparts(1000, 1000), 1);
  ck_assert_uint_eq(ofi_nparts(1001, 1000), 2);
  ck_assert_uint_eq(ofi_nparts(2000, 1000), 2);
  ck_assert_uint_eq(ofi_nparts(2001, 1000), 3);
  ck_assert_uint_eq(ofi_nparts((size_t)3 << 30, OFI_MAX_PART), 3);
  ck_assert_uint_eq(ofi_nparts(((size_t)3 << 30) + 1, OFI_MAX_PART), 4);
}
END_TEST

START_TEST(address_roundtrip) {
  struct ofi_addr a, b;
  memset(&a, 0, sizeof a);
  a.max_msg_size = 123456789012ull;
  strcpy(a.prov, "tcp;ofi_rxm");
  a.name_len = OFI_EP_NAME_MAX;
  for (size_t i = 0; i < a.name_len; i++)
    a.name[i] = (uint8_t)(i * 7 + 1);
  uint8_t blob[OFI_ADDR_BYTES];
  ck_assert_int_eq(ofi_addr_encode(blob, &a), 0);
  ck_assert_int_eq(ofi_addr_decode(blob, &b), 0);
  ck_assert_uint_eq(b.max_msg_size, a.max_msg_size);
  ck_assert_str_eq(b.prov, "tcp;ofi_rxm");
  ck_assert_uint_eq(b.name_len, a.name_len);
  ck_assert_mem_eq(b.name, a.name, a.name_len);
  a.name_len = OFI_EP_NAME_MAX + 1;
  ck_assert_int_eq(ofi_addr_encode(blob, &a), -1);
  a.name_len = 16;
  memset(a.prov, 'x', sizeof a.prov); /* no room for the NUL */
  ck_assert_int_eq(ofi_addr_encode(blob, &a), -1);
  uint8_t zeros[OFI_ADDR_BYTES] = {0};
  ck_assert_int_eq(ofi_addr_decode(zeros, &b), -1); /* a rank without ofi */
}
END_TEST

/* ---- providers ------------------------------------------------------------------ */

START_TEST(provider_spec_syntax) {
  static const char *const good[] = {"tcp", "tcp;ofi_rxm", "efa,tcp", "shm", "udp;ofi_rxd",
                                     "verbs;ofi_rxm,tcp;ofi_rxm,sockets", "psm3", "opx"};
  static const char *const bad[] = {"", ",", "tcp,", ",tcp", "tc p", ";tcp", "tcp;",
                                    "a;;b", "tcp,,shm", "tcp/x",
                                    "a_name_that_is_far_too_long_for_a_provider_x"};
  char err[256];
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    EXPECT(ofi_spec_check(good[i], err, sizeof err) == 0, "\"%s\" rejected: %s", good[i], err);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = '\0';
    EXPECT(ofi_spec_check(bad[i], err, sizeof err) == -1, "\"%s\" accepted", bad[i]);
    EXPECT(strstr(err, "LOOM_OFI_PROVIDER") != NULL, "\"%s\": message \"%s\" names no variable",
           bad[i], err);
  }
}
END_TEST

START_TEST(provider_matching) {
  ck_assert_int_eq(ofi_prov_matches("tcp", "tcp;ofi_rxm"), 1);
  ck_assert_int_eq(ofi_prov_matches("tcp", "tcp"), 1);
  ck_assert_int_eq(ofi_prov_matches("tcp;ofi_rxm", "tcp;ofi_rxm"), 1);
  ck_assert_int_eq(ofi_prov_matches("tcp;ofi_rxm", "tcp"), 0);
  ck_assert_int_eq(ofi_prov_matches("tc", "tcp;ofi_rxm"), 0);
  ck_assert_int_eq(ofi_prov_matches("tcpx", "tcp"), 0);
  ck_assert_int_eq(ofi_prov_matches("ofi_rxm", "tcp;ofi_rxm"), 0);
  ck_assert_int_eq(ofi_prov_matches("verbs", "verbs;ofi_rxm"), 1);
  ck_assert_int_eq(ofi_prov_matches("shm", "sm2"), 0);
  static const char *const not_fabric[] = {"tcp", "tcp;ofi_rxm", "sockets", "udp;ofi_rxd",
                                           "shm", "net", "net;ofi_rxm", "sm2", ""};
  static const char *const fabric[] = {"efa", "verbs;ofi_rxm", "cxi", "psm3", "psm2", "opx",
                                       "verbs;ofi_rxd"};
  for (size_t i = 0; i < sizeof not_fabric / sizeof not_fabric[0]; i++)
    EXPECT(!ofi_prov_is_fabric(not_fabric[i]), "%s taken for a fabric", not_fabric[i]);
  for (size_t i = 0; i < sizeof fabric / sizeof fabric[0]; i++)
    EXPECT(ofi_prov_is_fabric(fabric[i]), "%s not taken for a fabric", fabric[i]);
}
END_TEST

START_TEST(provider_pick) {
  /* What libfabric 1.17 lists on the development machine, in its order. */
  const char *here[] = {"tcp;ofi_rxm", "tcp;ofi_rxm", "net", "net;ofi_rxm", "udp;ofi_rxd",
                        "shm", "sockets"};
  int n = 7;
  char err[512];
  ck_assert_int_eq(ofi_pick(NULL, here, n, err, sizeof err), 0);
  ck_assert_int_eq(ofi_pick("", here, n, err, sizeof err), 0);
  ck_assert_int_eq(ofi_pick("shm", here, n, err, sizeof err), 5);
  ck_assert_int_eq(ofi_pick("sockets,shm", here, n, err, sizeof err), 6);
  ck_assert_int_eq(ofi_pick("efa,tcp", here, n, err, sizeof err), 0);
  ck_assert_int_eq(ofi_pick("udp", here, n, err, sizeof err), 4);
  ck_assert_int_eq(ofi_pick("efa", here, n, err, sizeof err), -1);
  ck_assert_str_eq(err, "LOOM_OFI_PROVIDER=\"efa\" matches none of the providers found: "
                        "tcp;ofi_rxm, net, net;ofi_rxm, udp;ofi_rxd, shm, sockets");
  /* A fabric comes first by default, wherever libfabric lists it. */
  const char *cluster[] = {"shm", "tcp;ofi_rxm", "sockets", "efa", "verbs;ofi_rxm"};
  ck_assert_int_eq(ofi_pick(NULL, cluster, 5, err, sizeof err), 3);
  const char *sockets_only[] = {"udp;ofi_rxd", "shm", "sockets"};
  ck_assert_int_eq(ofi_pick(NULL, sockets_only, 3, err, sizeof err), 2);
  ck_assert_int_eq(ofi_pick(NULL, here, 0, err, sizeof err), -1);
  EXPECT(strstr(err, "FI_EP_RDM") != NULL, "no-provider message: %s", err);
}
END_TEST

/* (The registration cache is tested in check_mr_cache: it is common code.) */


/* ---- LOOM_NET, LOOM_NET_PLUGIN ---------------------------------------------------- */

static loomResult_t decide(const char *net, const char *plugin, struct loom_net_facts f,
                           struct loom_net_choice *c, char *err) {
  return loom_net_decide(net, plugin, &f, c, err, 512);
}

START_TEST(select_default) {
  struct loom_net_choice c;
  char err[512];
  struct loom_net_facts here = {.ofi_built = 1, .ofi_fabric = 0,
                                .ofi_why = "libfabric's provider tcp;ofi_rxm is not a fabric"};
  ck_assert_int_eq(decide(NULL, NULL, here, &c, err), loomSuccess);
  ck_assert_int_eq(c.kind, LOOM_NET_TCP);
  ck_assert_str_eq(c.name, "tcp");
  ck_assert_int_eq(c.tcp_fallback, 0);
  EXPECT(strstr(c.why, "tcp;ofi_rxm is not a fabric") != NULL, "why: %s", c.why);
  ck_assert_int_eq(decide("", "", here, &c, err), loomSuccess); /* empty = unset */
  ck_assert_int_eq(c.kind, LOOM_NET_TCP);
  struct loom_net_facts fabric = {.ofi_built = 1, .ofi_fabric = 1, .ofi_why = "efa"};
  ck_assert_int_eq(decide(NULL, NULL, fabric, &c, err), loomSuccess);
  ck_assert_int_eq(c.kind, LOOM_NET_OFI);
  ck_assert_int_eq(c.tcp_fallback, 1);
  struct loom_net_facts rdma = {.ofi_built = 1, .ofi_fabric = 1, .ib_built = 1,
                                .ib_available = 1};
  ck_assert_int_eq(decide(NULL, NULL, rdma, &c, err), loomSuccess);
  ck_assert_int_eq(c.kind, LOOM_NET_IB);
  ck_assert_str_eq(c.name, "ib");
  ck_assert_int_eq(c.tcp_fallback, 1);
  rdma.ib_available = 0;
  ck_assert_int_eq(decide(NULL, NULL, rdma, &c, err), loomSuccess);
  ck_assert_int_eq(c.kind, LOOM_NET_OFI);
}
END_TEST

START_TEST(select_forced) {
  struct loom_net_choice c;
  char err[512];
  struct loom_net_facts none = {0}, all = {.ofi_built = 1, .ib_built = 1, .ib_available = 1};
  ck_assert_int_eq(decide("tcp", NULL, all, &c, err), loomSuccess);
  ck_assert_int_eq(c.kind, LOOM_NET_TCP);
  ck_assert_int_eq(decide("ofi", NULL, all, &c, err), loomSuccess);
  ck_assert_int_eq(c.kind, LOOM_NET_OFI);
  ck_assert_int_eq(c.tcp_fallback, 0); /* forced: no fallback */
  ck_assert_str_eq(c.why, "LOOM_NET=ofi");
  ck_assert_int_eq(decide("ib", NULL, all, &c, err), loomSuccess);
  ck_assert_int_eq(c.kind, LOOM_NET_IB);
  ck_assert_int_eq(decide("ofi", NULL, none, &c, err), loomInvalidArgument);
  EXPECT(strstr(err, "without libfabric") != NULL, "%s", err);
  none.ib_missing = "no libibverbs";
  ck_assert_int_eq(decide("ib", NULL, none, &c, err), loomInvalidArgument);
  EXPECT(strstr(err, "without the ibverbs transport (no libibverbs)") != NULL, "%s", err);
  struct loom_net_facts no_device = {.ib_built = 1};
  ck_assert_int_eq(decide("ib", NULL, no_device, &c, err), loomSystemError);
  EXPECT(strstr(err, "no RDMA device") != NULL, "%s", err);
  ck_assert_int_eq(decide("IB", NULL, all, &c, err), loomInvalidArgument);
  ck_assert_str_eq(err, "LOOM_NET=\"IB\": expected tcp, ofi or ib");
  ck_assert_int_eq(decide(NULL, "vendor", none, &c, err), loomSuccess);
  ck_assert_int_eq(c.kind, LOOM_NET_PLUGIN);
  ck_assert_str_eq(c.name, "plugin vendor");
  ck_assert_str_eq(c.plugin, "vendor");
  ck_assert_int_eq(decide("tcp", "vendor", all, &c, err), loomInvalidArgument);
  EXPECT(strstr(err, "unset one") != NULL, "%s", err);
}
END_TEST

/* Built, but the module (or the library it links) does not load here. */
START_TEST(select_module_missing) {
  struct loom_net_choice c;
  char err[512];
  struct loom_net_facts f = {
      .ofi_built = 1,
      .ofi_load_error = "cannot load libloom-net-ofi.so (libfabric.so.1: cannot open shared "
                        "object file): install libfabric1 (Debian, Ubuntu)",
      .ib_built = 1,
      .ib_load_error = "cannot load libloom-net-ib.so: it is in none of /x",
      .ib_why = "cannot load libloom-net-ib.so: it is in none of /x"};
  ck_assert_int_eq(decide("ofi", NULL, f, &c, err), loomSystemError);
  ck_assert_str_eq(err, "LOOM_NET=ofi: cannot load libloom-net-ofi.so (libfabric.so.1: cannot "
                        "open shared object file): install libfabric1 (Debian, Ubuntu), or "
                        "unset LOOM_NET");
  ck_assert_int_eq(decide("ib", NULL, f, &c, err), loomSystemError);
  ck_assert_str_eq(err, "LOOM_NET=ib: cannot load libloom-net-ib.so: it is in none of /x, or "
                        "unset LOOM_NET");
  ck_assert_int_eq(decide("tcp", NULL, f, &c, err), loomSuccess);
  /* The default does not fail: it stays on tcp and says why. */
  ck_assert_int_eq(decide(NULL, NULL, f, &c, err), loomSuccess);
  ck_assert_int_eq(c.kind, LOOM_NET_TCP);
  EXPECT(strstr(c.why, "cannot load libloom-net-ib.so") != NULL, "why: %s", c.why);
}
END_TEST

START_TEST(plugin_names_and_missing) {
  setenv("LOOM_DEBUG", "NONE", 1);
  loom_config_reload();
  const struct loom_transport *t = NULL;
  static const char *const bad[] = {"", "../x", "a/b", ".hidden", "-x", "sp ace"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert_int_eq(loom_net_plugin_load(bad[i], &t), loomInvalidArgument);
    EXPECT(strstr(loom_last_error(), "libloom-net-NAME.so") != NULL, "\"%s\": %s", bad[i],
           loom_last_error());
  }
  ck_assert_int_eq(loom_net_plugin_load("surely-not-installed", &t), loomInvalidArgument);
  EXPECT(strstr(loom_last_error(), "libloom-net-surely-not-installed.so") != NULL, "%s",
         loom_last_error());
  ck_assert_ptr_null(t);
}
END_TEST

/* ---- the transport over libfabric, two ranks in this process ------------------------ */

struct pair {
  void *ctx[2];
  struct ofi_conn *conn[2];
  uint8_t addrs[2 * OFI_ADDR_BYTES];
  union loom_sockaddr local;
  uint8_t secret[LOOM_NET_SECRET_BYTES];
  loomResult_t connect_res[2];
};

static struct pair *connecting;

static void *connect_thread(void *arg) {
  int r = (int)(intptr_t)arg, peer = 1 - r;
  void *conn = NULL;
  connecting->connect_res[r] = loom_transport_ofi.connect(
      connecting->ctx[r], 1, &peer, connecting->addrs, loom_deadline_ms(20000), &conn);
  connecting->conn[r] = conn;
  return NULL;
}

/* Returns 0 when the provider is not available here (the test then
 * passes vacuously, saying so). */
static int pair_open(struct pair *p, const char *provider) {
  setenv("LOOM_DEBUG", "NONE", 1);
  setenv("LOOM_OFI_PROVIDER", provider, 1);
  loom_config_reload();
  memset(p, 0, sizeof *p);
  memset(p->secret, 0x5c, sizeof p->secret);
  p->local.sin.sin_family = AF_INET;
  p->local.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int local_ranks[2] = {0, 1};
  for (int r = 0; r < 2; r++) {
    struct loom_transport_comm info = {.rank = r, .nranks = 2, .secret = p->secret,
                                       .local_sockaddr = &p->local, .comm_name = "check_ofi",
                                       .local_ranks = local_ranks, .nlocal = 2};
    loomResult_t res = loom_transport_ofi.init(&info, &p->ctx[r], p->addrs + r * OFI_ADDR_BYTES);
    if (res != loomSuccess) {
      EXPECT(r == 0, "rank 1 failed where rank 0 did not: %s", loom_last_error());
      fprintf(stderr, "check_ofi: provider %s not available here (%s): skipped\n", provider,
              loom_last_error());
      return 0;
    }
  }
  connecting = p;
  pthread_t th[2];
  for (int r = 0; r < 2; r++)
    pthread_create(&th[r], NULL, connect_thread, (void *)(intptr_t)r);
  for (int r = 0; r < 2; r++)
    pthread_join(th[r], NULL);
  for (int r = 0; r < 2; r++)
    EXPECT(p->connect_res[r] == loomSuccess, "connect of rank %d failed", r);
  return 1;
}

static void pair_close(struct pair *p) {
  for (int r = 0; r < 2; r++)
    loom_transport_ofi.fini(p->ctx[r]);
}

/* Progresses both ranks until every xfer is done or one fails; returns the
 * first failure (and the rank that saw it). */
static loomResult_t drive(struct pair *p, struct loom_xfer **xs, int n, int *who, int *peer) {
  uint64_t deadline = loom_deadline_ms(20000);
  for (;;) {
    int all_done = 1;
    for (int i = 0; i < n; i++)
      all_done &= xs[i]->done;
    if (all_done)
      return loomSuccess;
    for (int r = 0; r < 2; r++) {
      int progressed = 0, failed = -1;
      loomResult_t res = loom_transport_ofi.progress(p->ctx[r], &progressed, &failed);
      if (res != loomSuccess) {
        *who = r;
        *peer = failed;
        return res;
      }
    }
    EXPECT(loom_now_ns() < deadline, "transfers did not finish within 20 s");
  }
}

static void fill(uint8_t *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    b[i] = (uint8_t)(i * 131u + seed);
}

/* Both directions at once, sizes around the (shrunk) part size. */
static void exchange_sizes(struct pair *p, size_t part, int rounds) {
  static const size_t sizes[] = {0, 1, 999, 1000, 1001, 4096, 70001};
  for (int r = 0; r < 2; r++)
    p->conn[r]->part_bytes = part;
  for (int round = 0; round < rounds; round++)
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      size_t n = sizes[k];
      uint8_t *s0 = malloc(n + 1), *s1 = malloc(n + 1), *d0 = calloc(1, n + 1),
              *d1 = calloc(1, n + 1);
      fill(s0, n, 1);
      fill(s1, n, 2);
      struct loom_xfer x[4] = {{.buf = s0, .len = n, .fp = {7, n}},
                               {.buf = d1, .len = n, .fp = {7, n}},
                               {.buf = s1, .len = n, .fp = {8, n}},
                               {.buf = d0, .len = n, .fp = {8, n}}};
      /* Receives posted after the sends on one side, before on the other. */
      for (int i = 0; i < 4; i++) {
        static const int order[4] = {0, 1, 3, 2}, side[4] = {0, 1, 1, 0};
        struct loom_xfer *xi = &x[order[i]];
        loomResult_t res = (order[i] % 2 == 0 ? loom_transport_ofi.isend
                                              : loom_transport_ofi.irecv)(p->conn[side[order[i]]], xi);
        EXPECT(res == loomSuccess, "%zu bytes, parts of %zu: posting failed: %s", n, part,
               loom_last_error());
      }
      struct loom_xfer *xs[4] = {&x[0], &x[1], &x[2], &x[3]};
      int who = -1, peer = -1;
      loomResult_t res = drive(p, xs, 4, &who, &peer);
      EXPECT(res == loomSuccess, "%zu bytes, parts of %zu: rank %d failed: %s", n, part, who,
             loom_last_error());
      EXPECT(memcmp(d1, s0, n) == 0, "%zu bytes 0 -> 1 differ (parts of %zu)", n, part);
      EXPECT(memcmp(d0, s1, n) == 0, "%zu bytes 1 -> 0 differ (parts of %zu)", n, part);
      free(s0);
      free(s1);
      free(d0);
      free(d1);
    }
}

static void data_over(const char *provider) {
  struct pair p;
  if (!pair_open(&p, provider))
    return;
  exchange_sizes(&p, 1u << 30, 1);
  exchange_sizes(&p, 1000, 1); /* 70001 bytes: 71 parts */
  exchange_sizes(&p, 1, 1);    /* one byte per part */
  pair_close(&p);
}

START_TEST(data_tcp) { data_over("tcp"); }
END_TEST

START_TEST(data_shm) { data_over("shm"); }
END_TEST

/* The registration path, forced on a provider that does not need it:
 * every part's buffer goes through the cache, with real fi_mr_reg calls;
 * the buffers of later rounds are the same pages, so they hit. */
START_TEST(registered_buffers_tcp) {
  struct pair p;
  if (!pair_open(&p, "tcp"))
    return;
  for (int r = 0; r < 2; r++)
    ck_assert_int_eq(ofi_registration_on(p.ctx[r]), 0);
  exchange_sizes(&p, 1000, 3);
  for (int r = 0; r < 2; r++) {
    struct ofi_ctx *ctx = p.ctx[r];
    struct loom_mr_stats st = loom_mr_cache_stats(&ctx->mr);
    EXPECT(st.misses > 0 && st.hits > st.misses, "rank %d: %llu hits, %llu misses", r,
           (unsigned long long)st.hits, (unsigned long long)st.misses);
    EXPECT(ctx->mr.nentries <= OFI_MR_CACHE_ENTRIES, "rank %d: %zu entries", r,
           ctx->mr.nentries);
  }
  pair_close(&p);
}
END_TEST

static void mismatch(size_t send_len, size_t recv_len, uint64_t send_fp1, const char *want) {
  struct pair p;
  if (!pair_open(&p, "tcp"))
    return;
  uint8_t *s = calloc(1, send_len + 1), *d = calloc(1, recv_len + 1);
  struct loom_xfer xs = {.buf = s, .len = send_len, .fp = {9, send_fp1}};
  struct loom_xfer xr = {.buf = d, .len = recv_len, .fp = {9, 1}};
  ck_assert_int_eq(loom_transport_ofi.isend(p.conn[0], &xs), loomSuccess);
  ck_assert_int_eq(loom_transport_ofi.irecv(p.conn[1], &xr), loomSuccess);
  struct loom_xfer *all[2] = {&xs, &xr};
  int who = -1, peer = -1;
  loomResult_t res = drive(&p, all, 2, &who, &peer);
  ck_assert_int_eq(res, loomInvalidUsage);
  ck_assert_int_eq(who, 1);
  ck_assert_int_eq(peer, 0);
  EXPECT(strstr(loom_last_error(), want) != NULL, "error \"%s\" lacks \"%s\"", loom_last_error(),
         want);
  if (send_fp1 != 1) {
    ck_assert_int_eq(xr.fp_mismatch, 1);
    ck_assert_uint_eq(xr.peer_fp[0], 9);
    ck_assert_uint_eq(xr.peer_fp[1], send_fp1);
  }
  /* The failure sticks: later posts on that rank report it too. */
  ck_assert_int_eq(loom_transport_ofi.irecv(p.conn[1], &xr), loomInvalidUsage);
  free(s);
  free(d);
  pair_close(&p);
}

START_TEST(mismatch_fingerprint) { mismatch(64, 64, 2, "belongs to another call"); }
END_TEST

START_TEST(mismatch_longer_sent) {
  /* Whether the provider delivers a truncated message's first bytes is
   * its business: the error names the sender and the expected length. */
  mismatch(100, 50, 1, "rank 0 sent a message");
  EXPECT(strstr(loom_last_error(), "50 ") != NULL, "%s", loom_last_error());
}
END_TEST

START_TEST(mismatch_shorter_sent) {
  mismatch(50, 100, 1, "rank 0 sent a message of 50 bytes where 100 were expected");
}
END_TEST

static Suite *ofi_suite(void) {
  Suite *s = suite_create("ofi");
  TCase *tc = tcase_create("wire");
  tcase_add_test(tc, tag_roundtrip);
  tcase_add_test(tc, tag_distinct_per_sender_and_seq);
  tcase_add_test(tc, header_roundtrip);
  tcase_add_test(tc, part_sizes);
  tcase_add_test(tc, address_roundtrip);
  suite_add_tcase(s, tc);

  tc = tcase_create("providers");
  tcase_add_test(tc, provider_spec_syntax);
  tcase_add_test(tc, provider_matching);
  tcase_add_test(tc, provider_pick);
  suite_add_tcase(s, tc);

  tc = tcase_create("registration cache");
  suite_add_tcase(s, tc);

  tc = tcase_create("selection");
  tcase_add_test(tc, select_default);
  tcase_add_test(tc, select_forced);
  tcase_add_test(tc, select_module_missing);
  tcase_add_test(tc, plugin_names_and_missing);
  suite_add_tcase(s, tc);

  tc = tcase_create("loopback");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, data_tcp);
  tcase_add_test(tc, data_shm);
  tcase_add_test(tc, registered_buffers_tcp);
  tcase_add_test(tc, mismatch_fingerprint);
  tcase_add_test(tc, mismatch_longer_sent);
  tcase_add_test(tc, mismatch_shorter_sent);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(ofi_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
