/*
 * check_shm.c — the shared-memory transport in one process: two "ranks"
 * (contexts) connected by two threads, then messages of every protocol
 * (inline, one cell, many cells, more than the FIFO holds, single copy,
 * hundreds queued) moved by progress calls, compared byte by byte; receives
 * read in place (loom_shm_peek, as the engine reduces from the FIFO);
 * fingerprint and size mismatches; segments gone from /dev/shm once
 * connected; a rank whose peer maps its segment late sleeps meanwhile.
 */
#include "core/config.h"
#include "core/timeutil.h"
#include "transport.h"
#include "shm/shm.h"
#include "shm/shm_layout.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ADDR 64 /* loom_transport_shm.addr_bytes */

static const struct loom_transport *tp = &loom_transport_shm;

struct pair {
  void *ctx[2], *conn[2];
  char addrs[2 * ADDR];
};

struct connect_arg {
  struct pair *pr;
  int rank;
  loomResult_t res;
  long switches; /* voluntary context switches of this thread during connect */
  uint64_t cpu_ns; /* CPU time this thread used in connect */
  uint64_t start_ns, end_ns; /* when connect began and returned (CLOCK_MONOTONIC) */
};

static long my_voluntary_switches(void) {
  struct rusage ru;
  ck_assert_int_eq(getrusage(RUSAGE_THREAD, &ru), 0);
  return ru.ru_nvcsw;
}

static void *connect_main(void *p) {
  struct connect_arg *a = p;
  int peer = 1 - a->rank;
  long before = my_voluntary_switches();
  uint64_t cpu0 = loom_clock_ns(CLOCK_THREAD_CPUTIME_ID);
  a->start_ns = loom_now_ns();
  a->res = tp->connect(a->pr->ctx[a->rank], 1, &peer, a->pr->addrs, loom_deadline_ms(10000),
                       &a->pr->conn[a->rank]);
  a->end_ns = loom_now_ns();
  a->cpu_ns = loom_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  a->switches = my_voluntary_switches() - before;
  return NULL;
}

static void pair_init(struct pair *pr) {
  static const int local[2] = {0, 1};
  ck_assert_int_eq(tp->addr_bytes, ADDR);
  for (int r = 0; r < 2; r++) {
    struct loom_transport_comm info = {.rank = r, .nranks = 2, .comm_name = "check_shm",
                                       .local_ranks = local, .nlocal = 2};
    ck_assert_int_eq(tp->init(&info, &pr->ctx[r], pr->addrs + r * ADDR), loomSuccess);
  }
}

static void pair_open(struct pair *pr) {
  pair_init(pr);
  pthread_t th[2];
  struct connect_arg args[2] = {{.pr = pr, .rank = 0, .res = loomInternalError},
                                {.pr = pr, .rank = 1, .res = loomInternalError}};
  for (int r = 0; r < 2; r++)
    ck_assert_int_eq(pthread_create(&th[r], NULL, connect_main, &args[r]), 0);
  for (int r = 0; r < 2; r++) {
    pthread_join(th[r], NULL);
    ck_assert_int_eq(args[r].res, loomSuccess);
  }
}

static void pair_close(struct pair *pr) {
  for (int r = 0; r < 2; r++)
    tp->fini(pr->ctx[r]);
}

/* Progresses both sides until every xfer is done; returns the first error. */
static loomResult_t run_until(struct pair *pr, struct loom_xfer **xs, int n, int *failed) {
  uint64_t end = loom_deadline_ms(10000);
  for (;;) {
    int all = 1, progressed = 0;
    for (int i = 0; i < n; i++)
      all &= xs[i]->done;
    if (all)
      return loomSuccess;
    for (int r = 0; r < 2; r++) {
      loomResult_t res = tp->progress(pr->ctx[r], &progressed, failed);
      if (res != loomSuccess)
        return res;
    }
    if (loom_ms_left(end) == 0)
      return loomTimeout;
  }
}

static void fill(uint8_t *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    b[i] = (uint8_t)(i * 131u + seed * 7u + (i >> 9));
}

static void exchange(size_t len) {
  struct pair pr;
  pair_open(&pr);
  uint8_t *s = malloc(len + 1), *r = malloc(len + 1);
  fill(s, len, (unsigned)len);
  memset(r, 0xee, len + 1);
  struct loom_xfer sx = {.buf = s, .len = len, .fp = {7, (uint64_t)len}};
  struct loom_xfer rx = {.buf = r, .len = len, .fp = {7, (uint64_t)len}};
  ck_assert_int_eq(tp->irecv(pr.conn[1], &rx), loomSuccess);
  ck_assert_int_eq(tp->isend(pr.conn[0], &sx), loomSuccess);
  struct loom_xfer *xs[] = {&sx, &rx};
  int failed = -1;
  ck_assert_int_eq(run_until(&pr, xs, 2, &failed), loomSuccess);
  ck_assert_msg(memcmp(s, r, len) == 0, "%zu bytes arrived changed", len);
  ck_assert_int_eq(r[len], 0xee); /* nothing written past the message */
  pair_close(&pr);
  free(s);
  free(r);
}

static void all_sizes(void) {
  /* a cell carries 65536 bytes; a FIFO of 2 local ranks has 16 cells */
  static const size_t lens[] = {1,     23,    24,     25,     31,     32 /* last inline */,
                                33,    64,    4096,   65472,  65473,  65535,
                                65536 /* single copy from here */,
                                65537, 131072, (2u << 20) + 3}; /* twice the FIFO */
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
    exchange(lens[i]);
}

/* Single copy (process_vm_readv, allowed on oneself) from 64 KiB. */
START_TEST(sizes) {
  setenv("LOOM_SHM_CMA", "1", 1);
  loom_config_reload();
  all_sizes();
  unsetenv("LOOM_SHM_CMA");
  loom_config_reload();
}
END_TEST

/* Everything through the FIFO cells. */
START_TEST(sizes_two_copies) {
  setenv("LOOM_SHM_CMA", "0", 1);
  loom_config_reload();
  all_sizes();
  unsetenv("LOOM_SHM_CMA");
  loom_config_reload();
}
END_TEST

/* Every size through the smallest cells: a 64 KiB budget gives 2 ranks 2
 * cells of 4 KiB, so messages cross many cells and the ring wraps often. */
START_TEST(sizes_small_cells) {
  setenv("LOOM_SHM_CMA", "0", 1);
  setenv("LOOM_SHM_NODE_BYTES", "64K", 1);
  loom_config_reload();
  struct shm_layout l = shm_layout_for(2, 64 << 10);
  ck_assert_uint_eq(l.cells, 2);
  ck_assert_uint_eq(l.cell_bytes, SHM_LINE + SHM_PAYLOAD_MIN);
  all_sizes();
  unsetenv("LOOM_SHM_CMA");
  unsetenv("LOOM_SHM_NODE_BYTES");
  loom_config_reload();
}
END_TEST

/* The layout: today's for a few ranks, within the budget for many, never
 * below the minimum, cells a power of two. */
START_TEST(layout_bounded) {
  const uint64_t gib = 1ull << 30;
  struct shm_layout l = shm_layout_for(2, gib);
  ck_assert_uint_eq(l.cells, SHM_CELLS_FEW_RANKS);
  ck_assert_uint_eq(l.cell_bytes, SHM_LINE + SHM_PAYLOAD_MAX);
  l = shm_layout_for(8, gib);
  ck_assert_uint_eq(l.cells, SHM_CELLS_MANY_RANKS);
  ck_assert_uint_eq(l.cell_bytes, SHM_LINE + SHM_PAYLOAD_MAX);
  for (int n = 1; n <= 256; n++)
    for (uint64_t budget = 32ull << 20; budget <= gib; budget *= 32) {
      l = shm_layout_for(n, budget);
      ck_assert_msg((l.cells & (l.cells - 1)) == 0 && l.cells >= SHM_CELLS_MIN, "%u cells",
                    l.cells);
      ck_assert_uint_eq(l.node_bytes, (uint64_t)n * shm_seg_bytes((uint32_t)n, l.cells,
                                                                  l.cell_bytes));
      int at_min = l.cells == SHM_CELLS_MIN && l.cell_bytes == SHM_LINE + SHM_PAYLOAD_MIN;
      ck_assert_msg(l.node_bytes <= budget || at_min, "%d ranks: %llu bytes over %llu", n,
                    (unsigned long long)l.node_bytes, (unsigned long long)budget);
    }
  /* issue 22's bounds: 128 ranks within 1 GiB, 8 within half of 64 MiB */
  ck_assert_uint_le(shm_layout_for(128, gib).node_bytes, gib);
  ck_assert_uint_le(shm_layout_for(8, 32u << 20).node_bytes, 32u << 20);
  /* the budget: the parameter, or half of the file system's size */
  ck_assert_uint_eq(shm_layout_budget(12345, "/no/such/dir"), 12345);
  ck_assert_uint_le(shm_layout_budget(1ull << 40, "/dev/shm"), 1ull << 39);
}
END_TEST

START_TEST(many_queued_both_ways) {
  struct pair pr;
  pair_open(&pr);
  enum { N = 300 };
  static uint8_t sbuf[2][N][40], rbuf[2][N][40];
  static struct loom_xfer sx[2][N], rx[2][N];
  struct loom_xfer *xs[4 * N];
  int k = 0;
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < N; i++) {
      size_t len = 1 + (size_t)(i % 40);
      fill(sbuf[d][i], len, (unsigned)(i + d * 1000));
      memset(rbuf[d][i], 0, sizeof rbuf[d][i]);
      sx[d][i] = (struct loom_xfer){.buf = sbuf[d][i], .len = len, .fp = {1, 2}};
      rx[d][i] = (struct loom_xfer){.buf = rbuf[d][i], .len = len, .fp = {1, 2}};
      ck_assert_int_eq(tp->isend(pr.conn[d], &sx[d][i]), loomSuccess);
      ck_assert_int_eq(tp->irecv(pr.conn[1 - d], &rx[d][i]), loomSuccess);
      xs[k++] = &sx[d][i];
      xs[k++] = &rx[d][i];
    }
  int failed = -1;
  ck_assert_int_eq(run_until(&pr, xs, k, &failed), loomSuccess);
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < N; i++)
      ck_assert_msg(memcmp(sbuf[d][i], rbuf[d][i], 1 + (size_t)(i % 40)) == 0,
                    "message %d of direction %d changed or out of order", i, d);
  pair_close(&pr);
}
END_TEST

static void mismatch(size_t slen, size_t rlen, uint64_t sfp, uint64_t rfp) {
  struct pair pr;
  pair_open(&pr);
  uint8_t s[100] = {0}, r[100];
  struct loom_xfer sx = {.buf = s, .len = slen, .fp = {sfp, 9}};
  struct loom_xfer rx = {.buf = r, .len = rlen, .fp = {rfp, 9}};
  ck_assert_int_eq(tp->isend(pr.conn[0], &sx), loomSuccess);
  ck_assert_int_eq(tp->irecv(pr.conn[1], &rx), loomSuccess);
  struct loom_xfer *xs[] = {&sx, &rx};
  int failed = -1;
  ck_assert_int_eq(run_until(&pr, xs, 2, &failed), loomInvalidUsage);
  ck_assert_int_eq(failed, 0);
  ck_assert_int_eq(rx.done, 0);
  ck_assert_int_eq(rx.fp_mismatch, sfp != rfp);
  if (sfp != rfp)
    ck_assert(rx.peer_fp[0] == sfp && rx.peer_fp[1] == 9);
  /* The failure sticks to the connection. */
  struct loom_xfer rx2 = {.buf = r, .len = 1};
  ck_assert_int_eq(tp->irecv(pr.conn[1], &rx2), loomInvalidUsage);
  pair_close(&pr);
}

START_TEST(fingerprint_mismatch) { mismatch(10, 10, 5, 6); }
END_TEST

START_TEST(size_mismatch) { mismatch(10, 20, 5, 5); }
END_TEST

/* Reads receive x of conn in place, as the engine does, into out: parts
 * in order, whole cells, each handed back once copied. */
static loomResult_t read_in_place(struct pair *pr, void *conn, struct loom_xfer *x, uint8_t *out,
                                  int *failed) {
  uint64_t end = loom_deadline_ms(10000);
  size_t off = 0;
  while (!x->done) {
    int progressed = 0;
    for (int r = 0; r < 2; r++) {
      loomResult_t res = tp->progress(pr->ctx[r], &progressed, failed);
      if (res != loomSuccess)
        return res;
    }
    const void *data;
    size_t len = loom_shm_peek(conn, x, &data);
    if (len > 0) {
      ck_assert_uint_le(off + len, x->len);
      memcpy(out + off, data, len);
      off += len;
      loom_shm_consume(conn, x);
    }
    if (loom_ms_left(end) == 0)
      return loomTimeout;
  }
  ck_assert_uint_eq(off, x->len);
  return loomSuccess;
}

/* An in-place receive, then a copied one behind it on the same
 * connection: both arrive whole and in order, whatever their sizes. */
static void in_place_then_copied(size_t len) {
  struct pair pr;
  pair_open(&pr);
  ck_assert_int_eq(loom_shm_can_peek(pr.conn[1], len), 1);
  uint8_t *s1 = malloc(len), *s2 = malloc(len), *r1 = malloc(len), *r2 = malloc(len + 1);
  fill(s1, len, 1);
  fill(s2, len, 2);
  memset(r2, 0xee, len + 1);
  struct loom_xfer sx1 = {.buf = s1, .len = len, .fp = {3, 4}};
  struct loom_xfer sx2 = {.buf = s2, .len = len, .fp = {3, 4}};
  struct loom_xfer rx1 = {.buf = NULL, .len = len, .fp = {3, 4}};
  struct loom_xfer rx2 = {.buf = r2, .len = len, .fp = {3, 4}};
  ck_assert_int_eq(tp->irecv(pr.conn[1], &rx1), loomSuccess);
  ck_assert_int_eq(tp->irecv(pr.conn[1], &rx2), loomSuccess);
  ck_assert_int_eq(tp->isend(pr.conn[0], &sx1), loomSuccess);
  ck_assert_int_eq(tp->isend(pr.conn[0], &sx2), loomSuccess);
  const void *data;
  ck_assert_uint_eq(loom_shm_peek(pr.conn[1], &rx2, &data), 0); /* not the front */
  int failed = -1;
  ck_assert_int_eq(read_in_place(&pr, pr.conn[1], &rx1, r1, &failed), loomSuccess);
  struct loom_xfer *xs[] = {&sx1, &sx2, &rx2};
  ck_assert_int_eq(run_until(&pr, xs, 3, &failed), loomSuccess);
  ck_assert_msg(memcmp(s1, r1, len) == 0, "%zu bytes read in place arrived changed", len);
  ck_assert_msg(memcmp(s2, r2, len) == 0, "%zu bytes copied after them arrived changed", len);
  ck_assert_int_eq(r2[len], 0xee);
  pair_close(&pr);
  free(s1);
  free(s2);
  free(r1);
  free(r2);
}

START_TEST(read_in_place_sizes) {
  static const size_t lens[] = {1, 24, 32, 33, 65536, 65537, 131072, (2u << 20) + 8};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
    in_place_then_copied(lens[i]);
}
END_TEST

START_TEST(read_in_place_mismatch) {
  struct pair pr;
  pair_open(&pr);
  uint8_t s[100] = {0}, r[100];
  struct loom_xfer sx = {.buf = s, .len = 100, .fp = {5, 9}};
  struct loom_xfer rx = {.buf = NULL, .len = 100, .fp = {6, 9}};
  ck_assert_int_eq(tp->isend(pr.conn[0], &sx), loomSuccess);
  ck_assert_int_eq(tp->irecv(pr.conn[1], &rx), loomSuccess);
  int failed = -1;
  ck_assert_int_eq(read_in_place(&pr, pr.conn[1], &rx, r, &failed), loomInvalidUsage);
  ck_assert_int_eq(failed, 0);
  ck_assert_int_eq(rx.done, 0);
  ck_assert_int_eq(rx.fp_mismatch, 1);
  ck_assert(rx.peer_fp[0] == 5 && rx.peer_fp[1] == 9);
  pair_close(&pr);
}
END_TEST

/* Every size, one data line included; off with single copy (the data is
 * not in a cell) or when turned off. */
START_TEST(read_in_place_when) {
  struct pair on;
  pair_open(&on);
  ck_assert_int_eq(loom_shm_can_peek(on.conn[0], 1), 1);
  ck_assert_int_eq(loom_shm_can_peek(on.conn[0], SHM_INLINE_BYTES), 1);
  ck_assert_int_eq(loom_shm_can_peek(on.conn[0], SHM_INLINE_BYTES + 1), 1);
  ck_assert_int_eq(loom_shm_can_peek(on.conn[0], SHM_LINE), 1);
  ck_assert_int_eq(loom_shm_can_peek(on.conn[0], SHM_LINE + 1), 1);
  ck_assert_int_eq(loom_shm_can_peek(on.conn[0], 1u << 20), 1);
  pair_close(&on);
  const char *var[2] = {"LOOM_SHM_CMA", "LOOM_SHM_DIRECT_REDUCE"};
  const char *val[2] = {"1", "0"};
  for (int i = 0; i < 2; i++) {
    setenv(var[i], val[i], 1);
    loom_config_reload();
    struct pair pr;
    pair_open(&pr);
    ck_assert_msg(loom_shm_can_peek(pr.conn[0], 1u << 20) == 0, "in place with %s=%s", var[i],
                  val[i]);
    pair_close(&pr);
    unsetenv(var[i]);
    loom_config_reload();
  }
}
END_TEST

START_TEST(segments_unlinked) {
  struct pair pr;
  pair_open(&pr);
  for (int r = 0; r < 2; r++) {
    char path[128] = "/dev/shm";
    size_t n = strnlen(pr.addrs + r * ADDR, 48);
    memcpy(path + 8, pr.addrs + r * ADDR, n);
    path[8 + n] = '\0';
    struct stat st;
    ck_assert_msg(stat(path, &st) != 0, "%s still exists after connect", path);
  }
  pair_close(&pr);
}
END_TEST

/* Rank 1 connects 300 ms after rank 0, which has mapped rank 1's segment
 * by then and waits for rank 1 to map its own: it sleeps on the count of
 * mappers (a few naps and one wake), neither polling (a poll every 100 us
 * gave up the CPU over a thousand times, and with 128 ranks on 2 cores
 * held it) nor spinning (no switches, but the CPU time of the wait). */
START_TEST(late_peer_waited_asleep) {
  struct pair pr;
  pair_init(&pr);
  pthread_t th[2];
  struct connect_arg args[2] = {{.pr = &pr, .rank = 0, .res = loomInternalError},
                                {.pr = &pr, .rank = 1, .res = loomInternalError}};
  ck_assert_int_eq(pthread_create(&th[0], NULL, connect_main, &args[0]), 0);
  nanosleep(&(struct timespec){.tv_nsec = 300 * 1000 * 1000}, NULL);
  ck_assert_int_eq(pthread_create(&th[1], NULL, connect_main, &args[1]), 0);
  for (int r = 0; r < 2; r++) {
    pthread_join(th[r], NULL);
    ck_assert_int_eq(args[r].res, loomSuccess);
  }
  ck_assert_msg(args[0].end_ns > args[1].start_ns,
                "rank 0's connect returned before rank 1's began: nothing was waited for");
  ck_assert_msg(args[0].switches <= 20,
                "rank 0 gave up the CPU %ld times while it waited 300 ms for rank 1",
                args[0].switches);
  ck_assert_msg(args[0].cpu_ns < 100000000u,
                "rank 0 used %.1f ms of CPU while it waited 300 ms for rank 1",
                (double)args[0].cpu_ns / 1e6);
  pair_close(&pr);
}
END_TEST

int main(void) {
  Suite *s = suite_create("shm");
  TCase *tc = tcase_create("shm");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, sizes);
  tcase_add_test(tc, sizes_two_copies);
  tcase_add_test(tc, sizes_small_cells);
  tcase_add_test(tc, layout_bounded);
  tcase_add_test(tc, many_queued_both_ways);
  tcase_add_test(tc, read_in_place_sizes);
  tcase_add_test(tc, read_in_place_mismatch);
  tcase_add_test(tc, read_in_place_when);
  tcase_add_test(tc, fingerprint_mismatch);
  tcase_add_test(tc, size_mismatch);
  tcase_add_test(tc, segments_unlinked);
  tcase_add_test(tc, late_peer_waited_asleep);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
