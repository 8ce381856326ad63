/*
 * coll_test — a multi-rank test of loomAllReduce and loomAllGather: every
 * datatype x op x size, in place and out of place, compared element by
 * element with the exact expected result.  Run under loomrun.
 *
 *   coll_test [-c allreduce|allgather|both] [-s sizes] [-t types] [-o ops]
 *             [-r repeat]
 * sizes: comma list of element counts (K/M suffixes allowed).
 */
#include "core/config.h"
#include "device/reduce.h"
#include "loom.h"
#include "testdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;

#define TEST_NAME "coll_test"
#include "rankcheck.h"


static int parse_list(const char *text, size_t *out, int max) {
  int n = 0;
  char *copy = strdup(text), *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) {
    int64_t v;
    if (loom_parse_size(tok, &v) != 0)
      FAIL("bad size %s", tok);
    out[n++] = (size_t)v;
  }
  free(copy);
  return n;
}

static int wanted(const char *list, const char *name) {
  if (list == NULL || strcmp(list, "all") == 0)
    return 1;
  size_t len = strlen(name);
  for (const char *p = list; (p = strstr(p, name)) != NULL; p += len)
    if ((p == list || p[-1] == ',') && (p[len] == ',' || p[len] == '\0'))
      return 1;
  return 0;
}

static void check_elems(const char *what, loomDataType_t dt, loomRedOp_t op, size_t count,
                        const void *got, const void *want, size_t first_index, int in_place) {
  size_t es = loom_datatype_size(dt);
  for (size_t i = 0; i < count; i++) {
    if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0) {
      uint64_t g = 0, w = 0;
      memcpy(&g, (const char *)got + i * es, es);
      memcpy(&w, (const char *)want + i * es, es);
      FAIL("%s %s %s count %zu %s: element %zu is 0x%llx, expected 0x%llx", what,
           loom_datatype_name(dt), loom_redop_name(op), count,
           in_place ? "in place" : "out of place", first_index + i,
           (unsigned long long)g, (unsigned long long)w);
    }
  }
}

static void test_allreduce(loomComm_t comm, loomDataType_t dt, loomRedOp_t op, size_t count) {
  size_t es = loom_datatype_size(dt);
  char *send = malloc(count * es + 1), *recv = malloc(count * es + 1), *want = malloc(count * es + 1);
  for (size_t i = 0; i < count; i++) {
    td_store(send, i, dt, td_input(rank, i, dt, op));
    td_expected(nranks, i, dt, op, want + i * es);
  }
  memset(recv, 0xA5, count * es);
  CHECK_LOOM(loomAllReduce(send, recv, count, dt, op, comm, NULL));
  check_elems("allreduce", dt, op, count, recv, want, 0, 0);
  /* the send buffer must be untouched */
  for (size_t i = 0; i < count; i++) {
    char one[8];
    td_store(one, 0, dt, td_input(rank, i, dt, op));
    if (memcmp(one, send + i * es, es) != 0)
      FAIL("allreduce %s %s count %zu modified sendbuff at %zu", loom_datatype_name(dt),
           loom_redop_name(op), count, i);
  }
  CHECK_LOOM(loomAllReduce(send, send, count, dt, op, comm, NULL));
  check_elems("allreduce", dt, op, count, send, want, 0, 1);
  free(send);
  free(recv);
  free(want);
}

static void test_allgather(loomComm_t comm, loomDataType_t dt, size_t count) {
  size_t es = loom_datatype_size(dt), total = count * (size_t)nranks;
  char *send = malloc(count * es + 1), *recv = malloc(total * es + 1), *want = malloc(total * es + 1);
  for (size_t i = 0; i < count; i++)
    td_store(send, i, dt, td_input(rank, i, dt, loomSum));
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < count; i++)
      td_store(want, (size_t)r * count + i, dt, td_input(r, i, dt, loomSum));
  memset(recv, 0xA5, total * es);
  CHECK_LOOM(loomAllGather(send, recv, count, dt, comm, NULL));
  check_elems("allgather", dt, loomSum, total, recv, want, 0, 0);
  memset(recv, 0xA5, total * es);
  memcpy(recv + (size_t)rank * count * es, send, count * es);
  CHECK_LOOM(loomAllGather(recv + (size_t)rank * count * es, recv, count, dt, comm, NULL));
  check_elems("allgather", dt, loomSum, total, recv, want, 0, 1);
  free(send);
  free(recv);
  free(want);
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

int main(int argc, char **argv) {
  const char *coll = "both", *types = "all", *ops = "all";
  const char *sizes_text = "0,1,2,3,7,8,13,31,100,1021,4099,65537";
  int repeat = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "-c") == 0) coll = argv[i + 1];
    else if (strcmp(argv[i], "-s") == 0) sizes_text = argv[i + 1];
    else if (strcmp(argv[i], "-t") == 0) types = argv[i + 1];
    else if (strcmp(argv[i], "-o") == 0) ops = argv[i + 1];
    else if (strcmp(argv[i], "-r") == 0) repeat = atoi(argv[i + 1]);
    else { fprintf(stderr, "coll_test: unknown option %s\n", argv[i]); return 2; }
  }
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
  long cases = 0;
  for (int rep = 0; rep < repeat; rep++) {
    for (int d = 0; d < loomNumTypes; d++) {
      loomDataType_t dt = (loomDataType_t)d;
      if (!wanted(types, loom_datatype_name(dt)))
        continue;
      for (int s = 0; s < nsizes; s++) {
        if (strcmp(coll, "allgather") != 0)
          for (int o = 0; o < loomNumOps; o++)
            if (wanted(ops, loom_redop_name((loomRedOp_t)o))) {
              test_allreduce(comm, dt, (loomRedOp_t)o, sizes[s]);
              cases += 2;
            }
        if (strcmp(coll, "allreduce") != 0) {
          test_allgather(comm, dt, sizes[s]);
          cases += 2;
        }
      }
    }
  }
  test_bitwise_agreement(comm);
  CHECK_LOOM(loomCommFinalize(comm));
  CHECK_LOOM(loomCommDestroy(comm));
  printf("coll_test rank %d of %d: %ld cases passed\n", rank, nranks, cases);
  return 0;
}
