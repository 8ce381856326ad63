/*
 * coll_test — a multi-rank test of every collective and point-to-point
 * call: every datatype x op (reductions) x size x root (rooted
 * collectives), in place and out of place where NCCL defines it, compared
 * element by element with the exact expected result computed here.  Also
 * checked: send buffers and buffers a rank must not write (non-root
 * receive buffers, all-to-all-v gaps, guard bytes around every buffer)
 * are untouched.  Run under loomrun.
 *
 *   coll_test [-c collectives] [-s sizes] [-t types] [-o ops] [-r repeat]
 *             [-d host|sim|cuda [-S 1]] [-D 0] [-P ms]
 *
 * collectives: comma list of allreduce, allgather, reducescatter,
 *   broadcast, reduce, alltoall, alltoallv, gather, scatter, sendrecv,
 *   barrier; "all" (the default); "both" = allreduce,allgather.
 * sizes: comma list of element counts (K/M suffixes allowed); the count is
 *   per rank where NCCL says so (all-gather, reduce-scatter, all-to-all,
 *   gather, scatter).
 * types: comma list of int8 ... bfloat16, or "all".
 * ops: comma list of sum, prod, max, min, avg, premulsum (an op from
 *   loomRedOpCreatePreMulSum with scalar rank + 1), or "all".
 * Roots: every rank up to 4 ranks, else 0, n-1 and n/2.
 * -d: every buffer lives in that device's memory (loomMemAlloc; devbuf.h);
 *   -S 1: every call is queued on a stream of that device, between an
 *   upload and a download queued on it too, with no host sync between.
 * -D 0: the process makes itself not dumpable (PR_SET_DUMPABLE), so other
 *   processes of its user cannot open its files through /proc.
 * -P ms: the last rank pauses that long before each repetition's calls (a
 *   slow peer the others wait on).
 */
#include "core/config.h"
#include "device/reduce.h"
#include "loom.h"
#include "testdata.h"
#include "devbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static int rank, nranks;

#define TEST_NAME "coll_test"
#include "rankcheck.h"

/* ---- what is tested ---- */

enum coll {
  C_ALLREDUCE,
  C_ALLGATHER,
  C_REDUCESCATTER,
  C_BROADCAST,
  C_REDUCE,
  C_ALLTOALL,
  C_ALLTOALLV,
  C_GATHER,
  C_SCATTER,
  C_SENDRECV,
  C_BARRIER,
  C_COUNT
};
static const char *const coll_name_list[C_COUNT] = {
    "allreduce", "allgather", "reducescatter", "broadcast", "reduce",  "alltoall",
    "alltoallv", "gather",    "scatter",       "sendrecv",  "barrier",
};

/* Ops: the built-in ones, then PreMulSum. */
#define OP_PREMUL ((int)loomNumOps)
#define NOPS ((int)loomNumOps + 1)
static const char *const op_names[NOPS] = {"sum", "prod", "max", "min", "avg", "premulsum"};

static long cases, coll_cases[C_COUNT];

/* The case being run, for messages: "reduce float32 op sum count 1021
 * root 2 out of place (5 ranks)". */
static char case_desc[512];

static void describe(enum coll c, loomDataType_t dt, int opi, size_t count, int root,
                     const char *mode) {
  int len = snprintf(case_desc, sizeof case_desc, "%s %s", coll_name_list[c],
                     loom_datatype_name(dt));
  if (opi >= 0)
    len += snprintf(case_desc + len, sizeof case_desc - (size_t)len, " op %s", op_names[opi]);
  len += snprintf(case_desc + len, sizeof case_desc - (size_t)len, " count %zu", count);
  if (root >= 0)
    len += snprintf(case_desc + len, sizeof case_desc - (size_t)len, " root %d", root);
  snprintf(case_desc + len, sizeof case_desc - (size_t)len, " %s (%d ranks)", mode, nranks);
}

static void passed(enum coll c) {
  cases++;
  coll_cases[c]++;
}

#define CHECK_CASE(call)                                                       \
  do {                                                                         \
    devbuf_before();                                                           \
    loomResult_t r_ = devbuf_after(call);                                      \
    if (r_ != loomSuccess)                                                     \
      FAIL("%s: %s -> %s: %s", case_desc, #call, loomGetErrorString(r_),       \
           loomGetLastError(NULL));                                            \
  } while (0)

/* ---- buffers with poisoned guard bytes ---- */

#define POISON 0xA5
enum { GUARD = 64 }; /* bytes of poison before and after every buffer */

struct buf {
  unsigned char *base;
  size_t bytes;
  const char *name; /* for messages */
};

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (p == NULL)
    FAIL("out of memory (%zu bytes)", bytes);
  return p;
}

/* A buffer of `bytes`, all poison, with poisoned guards around it. */
static char *buf_new(struct buf *b, size_t bytes, const char *name) {
  b->base = xmalloc(bytes + 2 * GUARD);
  b->bytes = bytes;
  b->name = name;
  memset(b->base, POISON, bytes + 2 * GUARD);
  devbuf_add(b->base, bytes + 2 * GUARD);
  return (char *)b->base + GUARD;
}

/* Fails if a guard byte was written, else frees the buffer. */
static void buf_free(struct buf *b) {
  for (size_t i = 0; i < GUARD; i++) {
    if (b->base[i] != POISON)
      FAIL("%s: %s: byte %zu before its start was written (0x%02x)", case_desc, b->name,
           GUARD - i, b->base[i]);
    if (b->base[GUARD + b->bytes + i] != POISON)
      FAIL("%s: %s: byte %zu after its end (%zu bytes) was written (0x%02x)", case_desc,
           b->name, i, b->bytes, b->base[GUARD + b->bytes + i]);
  }
  devbuf_remove(b->base);
  free(b->base);
  b->base = NULL;
}

/* ---- element checks ---- */

/* "value (0xbits)" of one element. */
static const char *fmt_elem(loomDataType_t dt, const void *p, char *out, size_t len) {
  uint64_t bits = 0;
  size_t es = loom_datatype_size(dt);
  memcpy(&bits, p, es); /* little-endian: the element's bits */
  int digits = (int)es * 2;
  switch (dt) {
  case loomInt8: snprintf(out, len, "%d", (int8_t)bits); break;
  case loomInt32: snprintf(out, len, "%d", (int32_t)bits); break;
  case loomInt64: snprintf(out, len, "%lld", (long long)(int64_t)bits); break;
  case loomUint8:
  case loomUint32:
  case loomUint64: snprintf(out, len, "%llu", (unsigned long long)bits); break;
  case loomFloat16: snprintf(out, len, "%g", (double)loom_half_to_float((uint16_t)bits)); break;
  case loomBfloat16: snprintf(out, len, "%g", (double)loom_bf16_to_float((uint16_t)bits)); break;
  case loomFloat32: snprintf(out, len, "%.9g", (double)loom_bits_f32((uint32_t)bits)); break;
  case loomFloat64: {
    double d;
    memcpy(&d, p, 8);
    snprintf(out, len, "%.17g", d);
    break;
  }
  default: snprintf(out, len, "?"); break;
  }
  size_t used = strlen(out);
  snprintf(out + used, len - used, " (0x%0*llx)", digits, (unsigned long long)bits);
  return out;
}

static void fail_elem(const char *what, loomDataType_t dt, size_t index, const void *got,
                      const void *want, const char *note) {
  char g[64], w[64];
  FAIL("%s: %s element %zu%s: expected %s, got %s", case_desc, what, index, note,
       fmt_elem(dt, want, w, sizeof w), fmt_elem(dt, got, g, sizeof g));
}

/* got[0..count) must equal want[0..count); elements are reported as
 * first + i. */
static void check_elems(const char *what, loomDataType_t dt, const void *got, const void *want,
                        size_t count, size_t first) {
  size_t es = loom_datatype_size(dt);
  if (memcmp(got, want, count * es) == 0)
    return;
  for (size_t i = 0; i < count; i++)
    if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0)
      fail_elem(what, dt, first + i, (const char *)got + i * es, (const char *)want + i * es,
                "");
}

/* got[0..count) must still be poison. */
static void check_untouched(const char *what, loomDataType_t dt, const void *got, size_t count,
                            size_t first) {
  size_t es = loom_datatype_size(dt);
  unsigned char poison[8];
  memset(poison, POISON, sizeof poison);
  for (size_t i = 0; i < count; i++)
    if (memcmp((const char *)got + i * es, poison, es) != 0)
      fail_elem(what, dt, first + i, (const char *)got + i * es, poison,
                " (must be left untouched)");
}

/* ---- reference data ---- */

/* Rank r's reduction input elements [first, first + count) for op opi. */
static void fill_red(void *buf, loomDataType_t dt, int opi, int r, size_t first, size_t count) {
  for (size_t i = 0; i < count; i++)
    td_store(buf, i, dt,
             opi == OP_PREMUL ? td_premul_input(r, first + i, dt)
                              : td_input(r, first + i, dt, (loomRedOp_t)opi));
}

/* The reduced elements [first, first + count). */
static void want_red(void *buf, loomDataType_t dt, int opi, size_t first, size_t count) {
  size_t es = loom_datatype_size(dt);
  for (size_t i = 0; i < count; i++) {
    if (opi == OP_PREMUL)
      td_expected_premul(nranks, first + i, dt, (char *)buf + i * es);
    else
      td_expected(nranks, first + i, dt, (loomRedOp_t)opi, (char *)buf + i * es);
  }
}

/* Rank r's data elements [first, first + count). */
static void fill_data(void *buf, loomDataType_t dt, int r, size_t first, size_t count) {
  for (size_t i = 0; i < count; i++)
    td_store(buf, i, dt, td_data(r, first + i, dt));
}

/* ---- reductions ---- */

static void test_allreduce(loomComm_t comm, loomDataType_t dt, int opi, loomRedOp_t op,
                           size_t count) {
  size_t es = loom_datatype_size(dt), bytes = count * es;
  struct buf sb, rb;
  char *send = buf_new(&sb, bytes, "sendbuff"), *recv = buf_new(&rb, bytes, "recvbuff");
  char *orig = xmalloc(bytes), *want = xmalloc(bytes);
  fill_red(orig, dt, opi, rank, 0, count);
  want_red(want, dt, opi, 0, count);
  memcpy(send, orig, bytes);

  describe(C_ALLREDUCE, dt, opi, count, -1, "out of place");
  CHECK_CASE(loomAllReduce(D(send), D(recv), count, dt, op, comm, STREAM));
  check_elems("recvbuff", dt, recv, want, count, 0);
  check_elems("sendbuff", dt, send, orig, count, 0);
  passed(C_ALLREDUCE);

  describe(C_ALLREDUCE, dt, opi, count, -1, "in place");
  CHECK_CASE(loomAllReduce(D(send), D(send), count, dt, op, comm, STREAM));
  check_elems("buffer", dt, send, want, count, 0);
  buf_free(&sb);
  buf_free(&rb);
  passed(C_ALLREDUCE);
  free(orig);
  free(want);
}

static void test_reducescatter(loomComm_t comm, loomDataType_t dt, int opi, loomRedOp_t op,
                               size_t count) {
  size_t es = loom_datatype_size(dt), bytes = count * es, total = count * (size_t)nranks;
  size_t mine = (size_t)rank * count;
  struct buf sb, rb;
  char *send = buf_new(&sb, total * es, "sendbuff"), *recv = buf_new(&rb, bytes, "recvbuff");
  char *orig = xmalloc(total * es), *want = xmalloc(bytes);
  fill_red(orig, dt, opi, rank, 0, total);
  want_red(want, dt, opi, mine, count);
  memcpy(send, orig, total * es);

  describe(C_REDUCESCATTER, dt, opi, count, -1, "out of place");
  CHECK_CASE(loomReduceScatter(D(send), D(recv), count, dt, op, comm, STREAM));
  check_elems("recvbuff", dt, recv, want, count, 0);
  check_elems("sendbuff", dt, send, orig, total, 0);
  passed(C_REDUCESCATTER);

  describe(C_REDUCESCATTER, dt, opi, count, -1, "in place");
  CHECK_CASE(loomReduceScatter(D(send), D(send + mine * es), count, dt, op, comm, STREAM));
  check_elems("sendbuff (this rank's block, the recvbuff)", dt, send + mine * es, want, count,
              mine);
  /* only recvbuff may be written: the other blocks keep their input */
  check_elems("sendbuff (before this rank's block)", dt, send, orig, mine, 0);
  check_elems("sendbuff (after this rank's block)", dt, send + (mine + count) * es,
              orig + (mine + count) * es, total - mine - count, mine + count);
  buf_free(&sb);
  buf_free(&rb);
  passed(C_REDUCESCATTER);
  free(orig);
  free(want);
}

/* Three forms: out of place with a poisoned recvbuff on non-roots (must
 * stay untouched), out of place with recvbuff NULL on non-roots, and in
 * place (sendbuff == recvbuff everywhere; non-roots' buffers keep their
 * input). */
static void test_reduce(loomComm_t comm, loomDataType_t dt, int opi, loomRedOp_t op,
                        size_t count, int root) {
  size_t es = loom_datatype_size(dt), bytes = count * es;
  char *orig = xmalloc(bytes), *want = xmalloc(bytes);
  fill_red(orig, dt, opi, rank, 0, count);
  want_red(want, dt, opi, 0, count);
  for (int form = 0; form < 3; form++) {
    static const char *const forms[3] = {"out of place", "out of place, recvbuff NULL on non-roots",
                                         "in place"};
    struct buf sb, rb;
    char *send = buf_new(&sb, bytes, "sendbuff"), *recv = buf_new(&rb, bytes, "recvbuff");
    memcpy(send, orig, bytes);
    describe(C_REDUCE, dt, opi, count, root, forms[form]);
    if (form == 2) {
      CHECK_CASE(loomReduce(D(send), D(send), count, dt, op, root, comm, STREAM));
      if (rank == root)
        check_elems("buffer (root)", dt, send, want, count, 0);
      else
        check_elems("buffer (non-root: sendbuff == recvbuff, must keep its input)", dt, send,
                    orig, count, 0);
    } else {
      char *r = form == 1 && rank != root ? NULL : recv;
      CHECK_CASE(loomReduce(D(send), D(r), count, dt, op, root, comm, STREAM));
      if (rank == root)
        check_elems("recvbuff (root)", dt, recv, want, count, 0);
      else
        check_untouched("recvbuff (non-root)", dt, recv, count, 0);
      check_elems("sendbuff", dt, send, orig, count, 0);
    }
    buf_free(&sb);
    buf_free(&rb);
    passed(C_REDUCE);
  }
  free(orig);
  free(want);
}

/* ---- data movement ---- */

static void test_allgather(loomComm_t comm, loomDataType_t dt, size_t count) {
  size_t es = loom_datatype_size(dt), total = count * (size_t)nranks;
  struct buf sb, rb;
  char *send = buf_new(&sb, count * es, "sendbuff"), *recv = buf_new(&rb, total * es, "recvbuff");
  char *want = xmalloc(total * es);
  for (int r = 0; r < nranks; r++)
    fill_data(want + (size_t)r * count * es, dt, r, 0, count);
  fill_data(send, dt, rank, 0, count);

  describe(C_ALLGATHER, dt, -1, count, -1, "out of place");
  CHECK_CASE(loomAllGather(D(send), D(recv), count, dt, comm, STREAM));
  check_elems("recvbuff", dt, recv, want, total, 0);
  check_elems("sendbuff", dt, send, want + (size_t)rank * count * es, count, 0);
  passed(C_ALLGATHER);

  describe(C_ALLGATHER, dt, -1, count, -1, "in place");
  memset(recv, POISON, total * es);
  char *mine = recv + (size_t)rank * count * es;
  memcpy(mine, send, count * es);
  CHECK_CASE(loomAllGather(D(mine), D(recv), count, dt, comm, STREAM));
  check_elems("recvbuff", dt, recv, want, total, 0);
  buf_free(&sb);
  buf_free(&rb);
  passed(C_ALLGATHER);
  free(want);
}

/* Out of place with a poisoned sendbuff on non-roots (neither read nor
 * written), out of place with sendbuff NULL on non-roots, in place. */
static void test_broadcast(loomComm_t comm, loomDataType_t dt, size_t count, int root) {
  size_t es = loom_datatype_size(dt), bytes = count * es;
  char *want = xmalloc(bytes);
  fill_data(want, dt, root, 0, count);
  for (int form = 0; form < 3; form++) {
    static const char *const forms[3] = {"out of place", "out of place, sendbuff NULL on non-roots",
                                         "in place"};
    struct buf sb, rb;
    char *send = buf_new(&sb, bytes, "sendbuff"), *recv = buf_new(&rb, bytes, "recvbuff");
    if (rank == root)
      memcpy(send, want, bytes);
    describe(C_BROADCAST, dt, -1, count, root, forms[form]);
    if (form == 2) {
      CHECK_CASE(loomBroadcast(D(send), D(send), count, dt, root, comm, STREAM));
      check_elems(rank == root ? "buffer (root)" : "buffer", dt, send, want, count, 0);
    } else {
      const char *s = form == 1 && rank != root ? NULL : send;
      CHECK_CASE(loomBroadcast(D(s), D(recv), count, dt, root, comm, STREAM));
      check_elems("recvbuff", dt, recv, want, count, 0);
      if (rank == root)
        check_elems("sendbuff (root)", dt, send, want, count, 0);
      else
        check_untouched("sendbuff (non-root)", dt, send, count, 0);
    }
    buf_free(&sb);
    buf_free(&rb);
    passed(C_BROADCAST);
  }
  free(want);
}

/* Out of place with a poisoned recvbuff on non-roots (must stay
 * untouched), out of place with recvbuff NULL on non-roots, in place
 * (sendbuff == recvbuff + rank*count on every rank). */
static void test_gather(loomComm_t comm, loomDataType_t dt, size_t count, int root) {
  size_t es = loom_datatype_size(dt), bytes = count * es, total = count * (size_t)nranks;
  char *want = xmalloc(total * es);
  for (int r = 0; r < nranks; r++)
    fill_data(want + (size_t)r * bytes, dt, r, 0, count);
  char *mydata = want + (size_t)rank * bytes;
  for (int form = 0; form < 3; form++) {
    static const char *const forms[3] = {"out of place", "out of place, recvbuff NULL on non-roots",
                                         "in place"};
    struct buf sb, rb;
    char *send = buf_new(&sb, bytes, "sendbuff"), *recv = buf_new(&rb, total * es, "recvbuff");
    describe(C_GATHER, dt, -1, count, root, forms[form]);
    if (form == 2) {
      char *mine = recv + (size_t)rank * bytes;
      memcpy(mine, mydata, bytes);
      CHECK_CASE(loomGather(D(mine), D(recv), count, dt, root, comm, STREAM));
      if (rank == root) {
        check_elems("recvbuff (root)", dt, recv, want, total, 0);
      } else {
        check_untouched("recvbuff (non-root, before sendbuff)", dt, recv, (size_t)rank * count, 0);
        check_elems("sendbuff (non-root)", dt, mine, mydata, count, (size_t)rank * count);
        check_untouched("recvbuff (non-root, after sendbuff)", dt, mine + bytes,
                        total - (size_t)(rank + 1) * count, (size_t)(rank + 1) * count);
      }
    } else {
      memcpy(send, mydata, bytes);
      char *r = form == 1 && rank != root ? NULL : recv;
      CHECK_CASE(loomGather(D(send), D(r), count, dt, root, comm, STREAM));
      if (rank == root)
        check_elems("recvbuff (root)", dt, recv, want, total, 0);
      else
        check_untouched("recvbuff (non-root)", dt, recv, total, 0);
      check_elems("sendbuff", dt, send, mydata, count, 0);
    }
    buf_free(&sb);
    buf_free(&rb);
    passed(C_GATHER);
  }
  free(want);
}

/* Root's block i goes to rank i.  Out of place with a poisoned sendbuff on
 * non-roots (neither read nor written), out of place with sendbuff NULL on
 * non-roots, in place (recvbuff == sendbuff + rank*count everywhere). */
static void test_scatter(loomComm_t comm, loomDataType_t dt, size_t count, int root) {
  size_t es = loom_datatype_size(dt), bytes = count * es, total = count * (size_t)nranks;
  char *all = xmalloc(total * es); /* root's sendbuff */
  for (int r = 0; r < nranks; r++)
    fill_data(all + (size_t)r * bytes, dt, root, (size_t)r * TD_BLOCK, count);
  char *want = all + (size_t)rank * bytes;
  for (int form = 0; form < 3; form++) {
    static const char *const forms[3] = {"out of place", "out of place, sendbuff NULL on non-roots",
                                         "in place"};
    struct buf sb, rb;
    char *send = buf_new(&sb, total * es, "sendbuff"), *recv = buf_new(&rb, bytes, "recvbuff");
    if (rank == root)
      memcpy(send, all, total * es);
    describe(C_SCATTER, dt, -1, count, root, forms[form]);
    if (form == 2) {
      char *mine = send + (size_t)rank * bytes;
      CHECK_CASE(loomScatter(D(send), D(mine), count, dt, root, comm, STREAM));
      if (rank == root) {
        check_elems("sendbuff (root, recvbuff inside)", dt, send, all, total, 0);
      } else {
        check_untouched("sendbuff (non-root, before recvbuff)", dt, send, (size_t)rank * count, 0);
        check_elems("recvbuff", dt, mine, want, count, (size_t)rank * count);
        check_untouched("sendbuff (non-root, after recvbuff)", dt, mine + bytes,
                        total - (size_t)(rank + 1) * count, (size_t)(rank + 1) * count);
      }
    } else {
      const char *s = form == 1 && rank != root ? NULL : send;
      CHECK_CASE(loomScatter(D(s), D(recv), count, dt, root, comm, STREAM));
      check_elems("recvbuff", dt, recv, want, count, 0);
      if (rank == root)
        check_elems("sendbuff (root)", dt, send, all, total, 0);
      else
        check_untouched("sendbuff (non-root)", dt, send, total, 0);
    }
    buf_free(&sb);
    buf_free(&rb);
    passed(C_SCATTER);
  }
  free(all);
}

static void test_alltoall(loomComm_t comm, loomDataType_t dt, size_t count) {
  size_t es = loom_datatype_size(dt), bytes = count * es, total = count * (size_t)nranks;
  struct buf sb, rb;
  char *send = buf_new(&sb, total * es, "sendbuff"), *recv = buf_new(&rb, total * es, "recvbuff");
  char *orig = xmalloc(total * es), *want = xmalloc(total * es);
  for (int j = 0; j < nranks; j++) {
    fill_data(orig + (size_t)j * bytes, dt, rank, (size_t)j * TD_BLOCK, count);
    fill_data(want + (size_t)j * bytes, dt, j, (size_t)rank * TD_BLOCK, count);
  }
  memcpy(send, orig, total * es);
  describe(C_ALLTOALL, dt, -1, count, -1, "out of place");
  CHECK_CASE(loomAllToAll(D(send), D(recv), count, dt, comm, STREAM));
  check_elems("recvbuff", dt, recv, want, total, 0);
  check_elems("sendbuff", dt, send, orig, total, 0);
  buf_free(&sb);
  buf_free(&rb);
  passed(C_ALLTOALL);
  free(orig);
  free(want);
}

/* Elements from rank i to rank j: k * (count + 1) / 2 with
 * k = (i + 2j + pattern) % 5, so counts differ by pair and some are 0. */
static size_t a2av_count(int i, int j, size_t count, int pattern) {
  size_t k = (size_t)((i + 2 * j + pattern) % 5);
  return k * (count + 1) / 2;
}

/* Send blocks in reverse rank order, receive blocks in rotated order, with
 * gaps of 1..4 elements between them (and after them) that must stay
 * poisoned in recvbuff and unchanged in sendbuff. */
static void test_alltoallv(loomComm_t comm, loomDataType_t dt, size_t count, int pattern) {
  int n = nranks;
  size_t es = loom_datatype_size(dt);
  size_t *sc = xmalloc(sizeof(size_t) * (size_t)n), *sd = xmalloc(sizeof(size_t) * (size_t)n);
  size_t *rc = xmalloc(sizeof(size_t) * (size_t)n), *rd = xmalloc(sizeof(size_t) * (size_t)n);
  size_t send_total = 0, recv_total = 0;
  for (int t = 0; t < n; t++) {
    int j = n - 1 - t;
    sc[j] = a2av_count(rank, j, count, pattern);
    sd[j] = send_total + (size_t)(j % 3) + 1;
    send_total = sd[j] + sc[j];
  }
  send_total += 2;
  for (int t = 0; t < n; t++) {
    int i = (rank + 1 + t) % n;
    rc[i] = a2av_count(i, rank, count, pattern);
    rd[i] = recv_total + (size_t)((i * 3 + rank) % 4) + 1;
    recv_total = rd[i] + rc[i];
  }
  recv_total += 3;
  struct buf sb, rb;
  char *send = buf_new(&sb, send_total * es, "sendbuff");
  char *recv = buf_new(&rb, recv_total * es, "recvbuff");
  char *want = xmalloc(recv_total * es);
  for (int j = 0; j < n; j++)
    fill_data(send + sd[j] * es, dt, rank, (size_t)j * TD_BLOCK, sc[j]);
  memset(want, POISON, recv_total * es);
  for (int i = 0; i < n; i++)
    fill_data(want + rd[i] * es, dt, i, (size_t)rank * TD_BLOCK, rc[i]);
  char *orig = xmalloc(send_total * es);
  memcpy(orig, send, send_total * es);

  describe(C_ALLTOALLV, dt, -1, count, -1,
           pattern ? "out of place, count(i->j) = ((i+2j+1)%5)*(count+1)/2, gaps"
                   : "out of place, count(i->j) = ((i+2j)%5)*(count+1)/2, gaps");
  CHECK_CASE(loomAllToAllv(D(send), sc, sd, D(recv), rc, rd, dt, comm, STREAM));
  for (size_t e = 0; e < recv_total; e++) {
    if (memcmp(recv + e * es, want + e * es, es) == 0)
      continue;
    char where[96];
    snprintf(where, sizeof where, " (a gap: must be left untouched)");
    for (int i = 0; i < n; i++)
      if (e >= rd[i] && e < rd[i] + rc[i])
        snprintf(where, sizeof where, " (element %zu of %zu from rank %d)", e - rd[i], rc[i], i);
    fail_elem("recvbuff", dt, e, recv + e * es, want + e * es, where);
  }
  check_elems("sendbuff", dt, send, orig, send_total, 0);
  buf_free(&sb);
  buf_free(&rb);
  passed(C_ALLTOALLV);
  free(want);
  free(orig);
  free(sc);
  free(sd);
  free(rc);
  free(rd);
}

/* ---- point to point ---- */

/* A ring inside one group: send to rank+1, receive from rank-1. */
static void test_sendrecv_ring(loomComm_t comm, loomDataType_t dt, size_t count) {
  size_t es = loom_datatype_size(dt), bytes = count * es;
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  struct buf sb, rb;
  char *send = buf_new(&sb, bytes, "sendbuff"), *recv = buf_new(&rb, bytes, "recvbuff");
  char *orig = xmalloc(bytes), *want = xmalloc(bytes);
  fill_data(orig, dt, rank, (size_t)next * TD_BLOCK, count);
  fill_data(want, dt, prev, (size_t)rank * TD_BLOCK, count);
  memcpy(send, orig, bytes);
  describe(C_SENDRECV, dt, -1, count, -1, "ring in a group (send to rank+1, recv from rank-1)");
  CHECK_CASE(loomGroupStart());
  CHECK_CASE(loomSend(D(send), count, dt, next, comm, STREAM));
  CHECK_CASE(loomRecv(D(recv), count, dt, prev, comm, STREAM));
  CHECK_CASE(loomGroupEnd());
  check_elems("recvbuff (from rank-1)", dt, recv, want, count, 0);
  check_elems("sendbuff", dt, send, orig, count, 0);
  buf_free(&sb);
  buf_free(&rb);
  passed(C_SENDRECV);
  free(orig);
  free(want);
}

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Every rank sends two messages (count and (count+1)/2 elements) to every
 * rank, itself included, and receives them, in one group; each rank posts
 * its sends and receives in its own shuffled order (the two messages of
 * one pair keep their order, as matching is in issue order). */
static void test_sendrecv_all(loomComm_t comm, loomDataType_t dt, size_t count, int rep) {
  int n = nranks;
  size_t es = loom_datatype_size(dt);
  size_t len[2] = {count, (count + 1) / 2};
  size_t off[2] = {0, TD_BLOCK / 2};
  struct buf *sb = xmalloc(sizeof(struct buf) * 2 * (size_t)n);
  struct buf *rb = xmalloc(sizeof(struct buf) * 2 * (size_t)n);
  char **send = xmalloc(sizeof(char *) * 2 * (size_t)n);
  char **recv = xmalloc(sizeof(char *) * 2 * (size_t)n);
  for (int p = 0; p < n; p++)
    for (int m = 0; m < 2; m++) {
      send[2 * p + m] = buf_new(&sb[2 * p + m], len[m] * es, "sendbuff");
      recv[2 * p + m] = buf_new(&rb[2 * p + m], len[m] * es, "recvbuff");
      fill_data(send[2 * p + m], dt, rank, (size_t)p * TD_BLOCK + off[m], len[m]);
    }
  /* 4n operations, each 2 * peer + kind (kind 0: a send to peer, 1: a
   * receive from it), every value twice (two messages per pair) */
  int nops = 4 * n, *ops = xmalloc(sizeof(int) * (size_t)nops);
  for (int i = 0; i < nops; i++)
    ops[i] = i / 2;
  uint64_t seed = 0x9E3779B97F4A7C15ull ^ ((uint64_t)(rank + 1) * 7919u) ^
                  ((uint64_t)count << 20) ^ (uint64_t)rep;
  for (int i = nops - 1; i > 0; i--) {
    int j = (int)(rng_next(&seed) % (uint64_t)(i + 1));
    int t = ops[i];
    ops[i] = ops[j];
    ops[j] = t;
  }
  int *nsent = xmalloc(sizeof(int) * (size_t)n), *nrecv = xmalloc(sizeof(int) * (size_t)n);
  memset(nsent, 0, sizeof(int) * (size_t)n);
  memset(nrecv, 0, sizeof(int) * (size_t)n);
  describe(C_SENDRECV, dt, -1, count, -1,
           "every rank to every rank (itself too), 2 messages per pair, shuffled order, in a "
           "group");
  CHECK_CASE(loomGroupStart());
  for (int i = 0; i < nops; i++) {
    int kind = ops[i] % 2, p = ops[i] / 2;
    if (kind == 0) {
      int m = nsent[p]++;
      CHECK_CASE(loomSend(D(send[2 * p + m]), len[m], dt, p, comm, STREAM));
    } else {
      int m = nrecv[p]++;
      CHECK_CASE(loomRecv(D(recv[2 * p + m]), len[m], dt, p, comm, STREAM));
    }
  }
  CHECK_CASE(loomGroupEnd());
  char *want = xmalloc(count * es + 1);
  for (int p = 0; p < n; p++)
    for (int m = 0; m < 2; m++) {
      char what[64];
      snprintf(what, sizeof what, "message %d received from rank %d", m + 1, p);
      fill_data(want, dt, p, (size_t)rank * TD_BLOCK + off[m], len[m]);
      check_elems(what, dt, recv[2 * p + m], want, len[m], 0);
      snprintf(what, sizeof what, "sendbuff of message %d to rank %d", m + 1, p);
      fill_data(want, dt, rank, (size_t)p * TD_BLOCK + off[m], len[m]);
      check_elems(what, dt, send[2 * p + m], want, len[m], 0);
      buf_free(&sb[2 * p + m]);
      buf_free(&rb[2 * p + m]);
    }
  passed(C_SENDRECV);
  free(want);
  free(nsent);
  free(nrecv);
  free(ops);
  free(send);
  free(recv);
  free(sb);
  free(rb);
}

/* ---- barrier ---- */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* one clock for every process of the host */
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Rank `late` (none when late == nranks) arrives 20 ms after the others;
 * no rank may leave the barrier before every rank has entered it. */
static void test_barrier(loomComm_t comm, int late) {
  int64_t t[2], *all = xmalloc(sizeof(int64_t) * 2 * (size_t)nranks);
  if (late < nranks)
    snprintf(case_desc, sizeof case_desc, "barrier, rank %d 20 ms late (%d ranks)", late, nranks);
  else
    snprintf(case_desc, sizeof case_desc, "barrier, nobody late (%d ranks)", nranks);
  if (rank == late)
    usleep(20000);
  t[0] = now_ns();
  CHECK_CASE(loomBarrier(comm, STREAM));
  t[1] = now_ns();
  CHECK_CASE(loomAllGather(D(t), D(all), 2, loomInt64, comm, STREAM));
  int last = 0;
  for (int r = 1; r < nranks; r++)
    if (all[2 * r] > all[2 * last])
      last = r;
  for (int r = 0; r < nranks; r++)
    if (all[2 * r + 1] < all[2 * last])
      FAIL("%s: rank %d left the barrier %.3f ms before rank %d entered it", case_desc, r,
           (double)(all[2 * last] - all[2 * r + 1]) / 1e6, last);
  passed(C_BARRIER);
  free(all);
}

/* Every rank must end with the same bits even where ops are commutative
 * only in value: max/min of +0 and -0 and of NaNs with different payloads.
 * (Which NaN payload a sum or product of two NaNs keeps is up to the
 * compiled kernel: there every rank must hold a NaN, payloads may differ.)
 * All-gather the results and compare them. */
static void test_bitwise_agreement(loomComm_t comm) {
  const loomRedOp_t ops[] = {loomMax, loomMin, loomSum, loomProd};
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    for (size_t count = 4; count <= 4096; count *= 32) { /* small and large plans */
      uint32_t *in = malloc(count * 4), *out = malloc(count * 4);
      uint32_t *all = malloc(count * 4 * (size_t)nranks);
      for (size_t i = 0; i < count; i++) {
        if (i % 2 == 0)
          in[i] = (rank + i) % 2 ? 0x80000000u : 0; /* -0 / +0 */
        else
          in[i] = 0x7fc00000u | (uint32_t)(rank * 31 + i); /* NaN payloads */
      }
      CHECK_LOOM(loomAllReduce(in, out, count, loomFloat32, ops[o], comm, NULL));
      CHECK_LOOM(loomAllGather(out, all, count, loomUint32, comm, NULL));
      int payload_free = ops[o] == loomSum || ops[o] == loomProd;
      for (int r = 1; r < nranks; r++)
        for (size_t i = 0; i < count; i++)
          if (all[(size_t)r * count + i] != all[i] &&
              !(payload_free && i % 2 == 1 && (all[(size_t)r * count + i] & 0x7fffffffu) > 0x7f800000u &&
                (all[i] & 0x7fffffffu) > 0x7f800000u))
            FAIL("%s of signed zeros/NaNs, count %zu: rank %d has 0x%08x at %zu, rank 0 "
                 "0x%08x",
                 loom_redop_name(ops[o]), count, r, all[(size_t)r * count + i], i, all[i]);
      free(in);
      free(out);
      free(all);
    }
  }
}

/* ---- options ---- */

static int parse_list(const char *text, size_t *out, int max) {
  int n = 0;
  char *copy = strdup(text), *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int64_t v;
    if (n == max)
      FAIL("more than %d sizes", max);
    if (loom_parse_size(tok, &v) != 0)
      FAIL("bad size %s", tok);
    out[n++] = (size_t)v;
  }
  free(copy);
  return n;
}

static int wanted(const char *list, const char *name) {
  if (strcmp(list, "all") == 0)
    return 1;
  size_t len = strlen(name);
  for (const char *p = list; (p = strstr(p, name)) != NULL; p += len)
    if ((p == list || p[-1] == ',') && (p[len] == ',' || p[len] == '\0'))
      return 1;
  return 0;
}

/* Every name in `list` must be one of names[0..n) (or the list "all"), so
 * that a misspelt option cannot make a run that tests nothing. */
static void validate(const char *opt, const char *list, const char *(*name)(int), int n) {
  if (strcmp(list, "all") == 0)
    return;
  char *copy = strdup(list), *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int ok = 0;
    for (int i = 0; i < n && !ok; i++)
      ok = strcmp(tok, name(i)) == 0;
    if (!ok) {
      fprintf(stderr, "coll_test: %s: unknown name '%s'; known:", opt, tok);
      for (int i = 0; i < n; i++)
        fprintf(stderr, " %s", name(i));
      fprintf(stderr, ", all\n");
      exit(2);
    }
  }
  free(copy);
}

static const char *coll_name(int i) { return coll_name_list[i]; }
static const char *type_name(int i) { return loom_datatype_name((loomDataType_t)i); }
static const char *op_name(int i) { return op_names[i]; }

/* Roots tested: every rank up to 4 ranks, else 0, n-1 and n/2. */
static int roots(int *out) {
  if (nranks <= 4) {
    for (int r = 0; r < nranks; r++)
      out[r] = r;
    return nranks;
  }
  out[0] = 0;
  out[1] = nranks - 1;
  out[2] = nranks / 2;
  return 3;
}

int main(int argc, char **argv) {
  const char *colls = "all", *types = "all", *ops = "all";
  const char *sizes_text = "0,1,2,3,7,8,13,31,100,1021,4099,65537";
  int repeat = 1, use_stream = 0, pause_ms = 0;
  const char *device = NULL;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) { fprintf(stderr, "coll_test: %s needs a value\n", argv[i]); return 2; }
    if (strcmp(argv[i], "-c") == 0) colls = argv[i + 1];
    else if (strcmp(argv[i], "-s") == 0) sizes_text = argv[i + 1];
    else if (strcmp(argv[i], "-t") == 0) types = argv[i + 1];
    else if (strcmp(argv[i], "-o") == 0) ops = argv[i + 1];
    else if (strcmp(argv[i], "-r") == 0) repeat = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "-d") == 0) device = argv[i + 1];
    else if (strcmp(argv[i], "-S") == 0) use_stream = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "-D") == 0) prctl(PR_SET_DUMPABLE, atoi(argv[i + 1]));
    else if (strcmp(argv[i], "-P") == 0) pause_ms = atoi(argv[i + 1]);
    else { fprintf(stderr, "coll_test: unknown option %s\n", argv[i]); return 2; }
  }
  if (strcmp(colls, "both") == 0)
    colls = "allreduce,allgather";
  if (device != NULL)
    devbuf_setup(device, use_stream);
  validate("-c", colls, coll_name, C_COUNT);
  validate("-t", types, type_name, loomNumTypes);
  validate("-o", ops, op_name, NOPS);
  int want_coll[C_COUNT];
  for (int c = 0; c < C_COUNT; c++)
    want_coll[c] = wanted(colls, coll_name_list[c]);
  int want_op[NOPS];
  for (int o = 0; o < NOPS; o++)
    want_op[o] = wanted(ops, op_names[o]);

  loomLaunchInfo_t li;
  CHECK_LOOM(loomGetLaunchInfo(&li));
  rank = li.rank;
  nranks = li.nranks;
  loomUniqueId id;
  CHECK_LOOM(loomGetUniqueId(&id));
  loomComm_t comm;
  CHECK_LOOM(loomCommInitRank(&comm, nranks, id, rank));
  size_t sizes[64];
  int nsizes = parse_list(sizes_text, sizes, 64);
  int root_list[4], nroots = roots(root_list);
  int reduces = want_coll[C_ALLREDUCE] || want_coll[C_REDUCE] || want_coll[C_REDUCESCATTER];

  for (int rep = 0; rep < repeat; rep++) {
    if (pause_ms > 0 && rank == nranks - 1)
      usleep((useconds_t)pause_ms * 1000u);
    for (int d = 0; d < loomNumTypes; d++) {
      loomDataType_t dt = (loomDataType_t)d;
      if (!wanted(types, loom_datatype_name(dt)))
        continue;
      for (int s = 0; s < nsizes; s++) {
        size_t count = sizes[s];
        /* the op of every reduction case: built-in, or a fresh PreMulSum
         * with this rank's scalar rank + 1 */
        loomRedOp_t opv[NOPS];
        for (int o = 0; o < (int)loomNumOps; o++)
          opv[o] = (loomRedOp_t)o;
        if (reduces && want_op[OP_PREMUL]) {
          unsigned char scalar[8];
          td_store(scalar, 0, dt, td_premul_scalar(rank));
          snprintf(case_desc, sizeof case_desc, "loomRedOpCreatePreMulSum %s",
                   loom_datatype_name(dt));
          CHECK_CASE(loomRedOpCreatePreMulSum(&opv[OP_PREMUL], scalar, dt,
                                              loomScalarHostImmediate, comm));
        }
        for (int o = 0; o < NOPS; o++) {
          if (!want_op[o])
            continue;
          if (want_coll[C_ALLREDUCE])
            test_allreduce(comm, dt, o, opv[o], count);
          if (want_coll[C_REDUCESCATTER])
            test_reducescatter(comm, dt, o, opv[o], count);
          if (want_coll[C_REDUCE])
            for (int r = 0; r < nroots; r++)
              test_reduce(comm, dt, o, opv[o], count, root_list[r]);
        }
        if (reduces && want_op[OP_PREMUL]) {
          snprintf(case_desc, sizeof case_desc, "loomRedOpDestroy %s", loom_datatype_name(dt));
          CHECK_CASE(loomRedOpDestroy(opv[OP_PREMUL], comm));
        }
        if (want_coll[C_ALLGATHER])
          test_allgather(comm, dt, count);
        for (int r = 0; r < nroots; r++) {
          if (want_coll[C_BROADCAST])
            test_broadcast(comm, dt, count, root_list[r]);
          if (want_coll[C_GATHER])
            test_gather(comm, dt, count, root_list[r]);
          if (want_coll[C_SCATTER])
            test_scatter(comm, dt, count, root_list[r]);
        }
        if (want_coll[C_ALLTOALL])
          test_alltoall(comm, dt, count);
        if (want_coll[C_ALLTOALLV])
          for (int pattern = 0; pattern < 2; pattern++)
            test_alltoallv(comm, dt, count, pattern);
        if (want_coll[C_SENDRECV]) {
          test_sendrecv_ring(comm, dt, count);
          test_sendrecv_all(comm, dt, count, rep);
        }
      }
    }
    if (want_coll[C_BARRIER]) {
      for (int late = 0; late <= nranks; late++)
        test_barrier(comm, late);
      for (int i = 0; i < 10; i++)
        test_barrier(comm, nranks);
    }
  }
  if (want_coll[C_ALLREDUCE])
    test_bitwise_agreement(comm);
  CHECK_LOOM(loomCommFinalize(comm));
  CHECK_LOOM(loomCommDestroy(comm));
  devbuf_teardown();
  if (rank == 0) {
    char line[512];
    int len = 0;
    for (int c = 0; c < C_COUNT; c++)
      if (want_coll[c])
        len += snprintf(line + len, sizeof line - (size_t)len, " %s %ld", coll_name_list[c],
                        coll_cases[c]);
    printf("coll_test rank 0 of %d: by collective:%s\n", nranks, line);
  }
  printf("coll_test rank %d of %d: %ld cases passed\n", rank, nranks, cases);
  return 0;
}
