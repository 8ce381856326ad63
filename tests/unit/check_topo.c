/*
 * check_topo.c — unit tests of src/topo: grouping ranks into nodes
 * (group.c) on odd shapes, the JSON dump and its strict reader (json.c),
 * this machine's discovery (discover.c; RDMA devices also from a fake
 * sysfs tree) and the init-time exchange with a fake allgather
 * (exchange.c), including LOOM_TOPO_FILE and LOOM_TOPO_DUMP_FILE.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* setenv, mkdtemp, open_memstream */
#endif
#include "topo/topo.h"
#include "core/config.h"
#include "core/timeutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- grouping ------------------------------------------------------------------- */

/* What every grouping must satisfy, whatever the ids: nodes numbered by
 * lowest rank, ranks ascending inside a node, all arrays consistent, and
 * two ranks on one node exactly when their ids are equal. */
static void check_invariants(const struct loom_topo *t, const int *id) {
  int n = t->nranks;
  ck_assert_int_ge(t->nnodes, 1);
  ck_assert_int_le(t->nnodes, n);
  ck_assert_int_eq(t->node_first[0], 0);
  ck_assert_int_eq(t->node_first[t->nnodes], n);
  for (int k = 0; k < t->nnodes; k++) {
    ck_assert_int_ge(loom_topo_node_size(t, k), 1);
    if (k > 0)
      ck_assert_int_lt(loom_topo_rank_at(t, k - 1, 0), loom_topo_rank_at(t, k, 0));
    for (int i = 0; i < loom_topo_node_size(t, k); i++) {
      int r = loom_topo_rank_at(t, k, i);
      ck_assert_int_eq(t->node_of[r], k);
      ck_assert_int_eq(t->local_of[r], i);
      if (i > 0)
        ck_assert_int_lt(loom_topo_rank_at(t, k, i - 1), r);
    }
  }
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++)
      ck_assert_int_eq(t->node_of[a] == t->node_of[b], id[a] == id[b]);
}

static void expect_ints(const int *got, const int *want, int n, const char *what) {
  for (int i = 0; i < n; i++)
    ck_assert_msg(got[i] == want[i], "%s[%d] = %d, expected %d", what, i, got[i], want[i]);
}

START_TEST(group_one_rank) {
  struct loom_topo t;
  int id = 42;
  ck_assert_int_eq(loom_topo_from_nodes(&t, 1, &id), 0);
  ck_assert_int_eq(t.nranks, 1);
  ck_assert_int_eq(t.nnodes, 1);
  ck_assert_int_eq(t.node_of[0], 0);
  ck_assert_int_eq(t.local_of[0], 0);
  ck_assert_int_eq(t.node_first[0], 0);
  ck_assert_int_eq(t.node_first[1], 1);
  ck_assert_int_eq(t.by_node[0], 0);
  ck_assert_ptr_null(t.hw);
  ck_assert(loom_topo_uniform(&t));
  loom_topo_free(&t);
  ck_assert_ptr_null(t.node_of);
}
END_TEST

static const char *string_id(int r, void *arg) { return ((const char *const *)arg)[r]; }

/* Nodes {0,2} and {1,3,4}: numbered by lowest rank, not by id order. */
START_TEST(group_interleaved_five) {
  const char *ids[] = {"zeta", "alpha", "zeta", "alpha", "alpha"};
  int num[] = {1, 0, 1, 0, 0};
  struct loom_topo t;
  ck_assert_int_eq(loom_topo_group(&t, 5, string_id, (void *)ids), 0);
  ck_assert_int_eq(t.nnodes, 2);
  expect_ints(t.node_of, (int[]){0, 1, 0, 1, 1}, 5, "node_of");
  expect_ints(t.local_of, (int[]){0, 0, 1, 1, 2}, 5, "local_of");
  expect_ints(t.node_first, (int[]){0, 2, 5}, 3, "node_first");
  expect_ints(t.by_node, (int[]){0, 2, 1, 3, 4}, 5, "by_node");
  ck_assert(!loom_topo_uniform(&t));
  check_invariants(&t, num);
  loom_topo_free(&t);
  /* the same from explicit node ids (sparse, larger id first) */
  int sparse[] = {700, 3, 700, 3, 3};
  ck_assert_int_eq(loom_topo_from_nodes(&t, 5, sparse), 0);
  expect_ints(t.node_of, (int[]){0, 1, 0, 1, 1}, 5, "node_of");
  expect_ints(t.by_node, (int[]){0, 2, 1, 3, 4}, 5, "by_node");
  loom_topo_free(&t);
}
END_TEST

/* 64 ranks, each its own node, ids sorting opposite to the ranks. */
START_TEST(group_every_rank_its_own_node) {
  char names[64][8];
  const char *ids[64];
  int num[64];
  for (int r = 0; r < 64; r++) {
    snprintf(names[r], sizeof names[r], "n%02d", 63 - r);
    ids[r] = names[r];
    num[r] = 63 - r;
  }
  struct loom_topo t;
  ck_assert_int_eq(loom_topo_group(&t, 64, string_id, ids), 0);
  ck_assert_int_eq(t.nnodes, 64);
  for (int r = 0; r < 64; r++) {
    ck_assert_int_eq(t.node_of[r], r);
    ck_assert_int_eq(t.local_of[r], 0);
    ck_assert_int_eq(t.by_node[r], r);
  }
  ck_assert(loom_topo_uniform(&t));
  check_invariants(&t, num);
  loom_topo_free(&t);
}
END_TEST

START_TEST(group_all_on_one_node) {
  const char *ids[17];
  int num[17];
  for (int r = 0; r < 17; r++) {
    ids[r] = "same-host";
    num[r] = 0;
  }
  struct loom_topo t;
  ck_assert_int_eq(loom_topo_group(&t, 17, string_id, ids), 0);
  ck_assert_int_eq(t.nnodes, 1);
  ck_assert_int_eq(loom_topo_node_size(&t, 0), 17);
  for (int r = 0; r < 17; r++) {
    ck_assert_int_eq(t.node_of[r], 0);
    ck_assert_int_eq(t.local_of[r], r);
    ck_assert_int_eq(loom_topo_rank_at(&t, 0, r), r);
  }
  ck_assert(loom_topo_uniform(&t));
  check_invariants(&t, num);
  loom_topo_free(&t);
}
END_TEST

/* Scrambled ids over many shapes: the invariants hold every time. */
START_TEST(group_scrambled_shapes) {
  int id[97];
  for (int n = 1; n <= 97; n += 8) {
    for (int m = 1; m <= 9; m++) {
      for (int r = 0; r < n; r++)
        id[r] = (int)((unsigned)(r * 7919 + m * 104729) % (unsigned)m) * 13 - 40;
      struct loom_topo t;
      ck_assert_int_eq(loom_topo_from_nodes(&t, n, id), 0);
      ck_assert_int_eq(t.nranks, n);
      check_invariants(&t, id);
      loom_topo_free(&t);
    }
  }
}
END_TEST

/* ---- JSON ------------------------------------------------------------------------ */

static void set_nic(struct loom_topo_nic *n, const char *name, const char *kind, const char *addr,
                    int32_t speed, int32_t numa) {
  memset(n, 0, sizeof *n);
  snprintf(n->name, sizeof n->name, "%s", name);
  snprintf(n->kind, sizeof n->kind, "%s", kind);
  snprintf(n->addr, sizeof n->addr, "%s", addr);
  n->speed_mbps = speed;
  n->numa = numa;
}

/* 5 ranks on nodes {0,2}, {1,3,4} and a third {5}: 6 ranks, three nodes
 * with 16, 0 and 2 NICs, and strings that need escaping. */
static void synthetic(struct loom_topo *t) {
  int ids[] = {5, 9, 5, 9, 9, 1};
  ck_assert_int_eq(loom_topo_from_nodes(t, 6, ids), 0);
  t->hw = calloc(3, sizeof *t->hw);
  ck_assert_ptr_nonnull(t->hw);
  struct loom_topo_hw *a = &t->hw[0], *b = &t->hw[1], *c = &t->hw[2];
  snprintf(a->hostid, sizeof a->hostid, "node-a/0123456789abcdef");
  snprintf(a->hostname, sizeof a->hostname, "node-a.example.org");
  a->cores = 64;
  a->pus = 128;
  a->numa_nodes = 8;
  a->sockets = 2;
  a->l3_bytes = 256ll << 20;
  a->memory_bytes = 2ll << 40;
  a->nnics = LOOM_TOPO_MAX_NICS;
  for (int i = 0; i < LOOM_TOPO_MAX_NICS; i++) {
    char name[32], addr[64];
    snprintf(name, sizeof name, "mlx5_%d", i);
    snprintf(addr, sizeof addr, "fe80:0000:0000:0000:0202:c9ff:fe00:%04x", i);
    set_nic(&a->nics[i], name, "ibverbs", addr, 200000, i / 2);
  }
  snprintf(b->hostid, sizeof b->hostid, "quote\" back\\slash tab\t nl\n");
  snprintf(b->hostname, sizeof b->hostname, "h\xc3\xa9te");
  b->cores = 1;
  b->pus = 1; /* unknowns stay 0 */
  snprintf(c->hostid, sizeof c->hostid, "%063d", 7); /* the longest that fits */
  snprintf(c->hostname, sizeof c->hostname, "c");
  c->cores = 2;
  c->pus = 4;
  c->numa_nodes = 1;
  c->sockets = 1;
  c->l3_bytes = 32768;
  c->memory_bytes = INT64_MAX;
  c->nnics = 2;
  set_nic(&c->nics[0], "eth0", "ip", "192.0.2.2", 10000, -1);
  set_nic(&c->nics[1], "tcp;ofi_rxm", "ofi", "eth0,lo", 0, -1);
}

static char *to_json(const struct loom_topo *t, size_t *len) {
  char *text = NULL;
  FILE *f = open_memstream(&text, len);
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(loom_topo_write_json(t, f), 0);
  fclose(f);
  return text;
}

static void expect_same(const struct loom_topo *a, const struct loom_topo *b) {
  ck_assert_int_eq(a->nranks, b->nranks);
  ck_assert_int_eq(a->nnodes, b->nnodes);
  expect_ints(b->node_of, a->node_of, a->nranks, "node_of");
  expect_ints(b->local_of, a->local_of, a->nranks, "local_of");
  expect_ints(b->by_node, a->by_node, a->nranks, "by_node");
  expect_ints(b->node_first, a->node_first, a->nnodes + 1, "node_first");
  ck_assert_int_eq(a->hw == NULL, b->hw == NULL);
  for (int k = 0; a->hw != NULL && k < a->nnodes; k++)
    ck_assert_msg(memcmp(&a->hw[k], &b->hw[k], sizeof a->hw[k]) == 0,
                  "node %d's hardware differs after the round trip", k);
}

START_TEST(json_round_trip) {
  struct loom_topo t, back;
  synthetic(&t);
  size_t len;
  char *text = to_json(&t, &len);
  char err[256] = "";
  ck_assert_msg(loom_topo_parse_json(&back, text, len, "mem", err, sizeof err) == 0, "%s", err);
  expect_same(&t, &back);
  /* and the text it gives back is the same text */
  size_t len2;
  char *again = to_json(&back, &len2);
  ck_assert_uint_eq(len, len2);
  ck_assert_str_eq(text, again);
  free(again);
  loom_topo_free(&back);
  /* through a file */
  char dir[] = "/tmp/check_topo.XXXXXX", path[64];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/t.json", dir);
  FILE *f = fopen(path, "w");
  ck_assert_int_eq(loom_topo_write_json(&t, f), 0);
  fclose(f);
  ck_assert_msg(loom_topo_read_json(&back, path, err, sizeof err) == 0, "%s", err);
  expect_same(&t, &back);
  loom_topo_free(&back);
  unlink(path);
  rmdir(dir);
  free(text);
  loom_topo_free(&t);
}
END_TEST

/* Documented layout: one member a line, NICs one a line, node index and
 * ranks as written in json.c's header. */
START_TEST(json_layout) {
  struct loom_topo t;
  synthetic(&t);
  size_t len;
  char *text = to_json(&t, &len);
  const char *start = "{\n  \"loom_topo\": 1,\n  \"nranks\": 6,\n  \"nnodes\": 3,\n"
                      "  \"nodes\": [\n    {\n      \"node\": 0,\n      \"ranks\": [0, 2],\n"
                      "      \"hw\": {\n        \"hostid\": \"node-a/0123456789abcdef\",\n";
  ck_assert_msg(strncmp(text, start, strlen(start)) == 0, "unexpected start:\n%s", text);
  ck_assert_ptr_nonnull(strstr(text, "\"ranks\": [1, 3, 4],"));
  ck_assert_ptr_nonnull(
      strstr(text, "\"hostid\": \"quote\\\" back\\\\slash tab\\u0009 nl\\u000a\""));
  ck_assert_ptr_nonnull(strstr(text, "\"nics\": []"));
  ck_assert_ptr_nonnull(strstr(
      text, "\n          {\"name\": \"eth0\", \"kind\": \"ip\", \"addr\": \"192.0.2.2\", "
            "\"speed_mbps\": 10000, \"numa\": -1},\n"));
  ck_assert_ptr_nonnull(strstr(text, "\"memory_bytes\": 9223372036854775807,"));
  free(text);
  loom_topo_free(&t);
}
END_TEST

START_TEST(json_round_trip_without_hw) {
  int ids[40];
  for (int r = 0; r < 40; r++)
    ids[r] = r % 3;
  struct loom_topo t, back;
  ck_assert_int_eq(loom_topo_from_nodes(&t, 40, ids), 0);
  size_t len;
  char *text = to_json(&t, &len);
  ck_assert_ptr_nonnull(strstr(text, "\"hw\": null"));
  char err[256] = "";
  ck_assert_msg(loom_topo_parse_json(&back, text, len, "mem", err, sizeof err) == 0, "%s", err);
  expect_same(&t, &back);
  loom_topo_free(&back);
  free(text);
  loom_topo_free(&t);
}
END_TEST

/* Whitespace, member order and node order are free; renumbering follows
 * the lowest rank, hardware follows its node. */
START_TEST(json_tolerant_layout) {
  const char *text =
      " {\"nodes\":[{\"hw\":{\"nics\":[],\"hostname\":\"b\",\"hostid\":\"B\",\"cores\":1,"
      "\"pus\":2,\"numa_nodes\":0,\"sockets\":0,\"l3_bytes\":0,\"memory_bytes\":0},"
      "\"ranks\":[1],\"node\":0},\r\n\t{\"node\":1,\"ranks\":[2,0],\"hw\":{\"hostid\":\"A\","
      "\"hostname\":\"a\",\"cores\":3,\"pus\":3,\"numa_nodes\":1,\"sockets\":1,\"l3_bytes\":5,"
      "\"memory_bytes\":6,\"nics\":[{\"numa\":0,\"speed_mbps\":1,\"addr\":\"\\u00e9\\/\","
      "\"kind\":\"ip\",\"name\":\"e\"}]}}],\"nnodes\":2,\"nranks\":3,\"loom_topo\":1}\n\n";
  struct loom_topo t;
  char err[256] = "";
  ck_assert_msg(loom_topo_parse_json(&t, text, strlen(text), "mem", err, sizeof err) == 0, "%s",
                err);
  ck_assert_int_eq(t.nnodes, 2);
  expect_ints(t.node_of, (int[]){0, 1, 0}, 3, "node_of");
  ck_assert_str_eq(t.hw[0].hostid, "A");
  ck_assert_str_eq(t.hw[1].hostid, "B");
  ck_assert_int_eq(t.hw[0].nnics, 1);
  ck_assert_str_eq(t.hw[0].nics[0].addr, "\xc3\xa9/");
  loom_topo_free(&t);
}
END_TEST

/* A small valid document with one replacement applied, for the bad cases. */
static const char *good_doc =
    "{\n"
    "  \"loom_topo\": 1,\n"
    "  \"nranks\": 2,\n"
    "  \"nnodes\": 1,\n"
    "  \"nodes\": [\n"
    "    {\n"
    "      \"node\": 0,\n"
    "      \"ranks\": [0, 1],\n"
    "      \"hw\": {\n"
    "        \"hostid\": \"h\",\n"
    "        \"hostname\": \"h\",\n"
    "        \"cores\": 2,\n"
    "        \"pus\": 2,\n"
    "        \"numa_nodes\": 1,\n"
    "        \"sockets\": 1,\n"
    "        \"l3_bytes\": 0,\n"
    "        \"memory_bytes\": 0,\n"
    "        \"nics\": [\n"
    "          {\"name\": \"lo\", \"kind\": \"ip\", \"addr\": \"127.0.0.1\", "
    "\"speed_mbps\": 0, \"numa\": -1}\n"
    "        ]\n"
    "      }\n"
    "    }\n"
    "  ]\n"
    "}\n";

static char *replaced(const char *from, const char *to) {
  const char *at = strstr(good_doc, from);
  ck_assert_msg(at != NULL, "test bug: \"%s\" not in the document", from);
  size_t head = (size_t)(at - good_doc), n = strlen(good_doc) - strlen(from) + strlen(to);
  char *out = malloc(n + 1);
  memcpy(out, good_doc, head);
  strcpy(out + head, to);
  strcat(out, at + strlen(from));
  return out;
}

static void expect_error(const char *text, const char *want) {
  struct loom_topo t;
  char err[256] = "";
  int rc = loom_topo_parse_json(&t, text, strlen(text), "t.json", err, sizeof err);
  ck_assert_msg(rc == -1, "accepted a bad document (wanted \"%s\"):\n%s", want, text);
  ck_assert_msg(strstr(err, want) != NULL, "error \"%s\" lacks \"%s\"", err, want);
  ck_assert_ptr_null(t.node_of); /* nothing half-built escapes */
}

static void expect_replaced_error(const char *from, const char *to, const char *want) {
  char *text = replaced(from, to);
  expect_error(text, want);
  free(text);
}

START_TEST(json_good_doc_parses) {
  struct loom_topo t;
  char err[256] = "";
  ck_assert_msg(loom_topo_parse_json(&t, good_doc, strlen(good_doc), "t", err, sizeof err) == 0,
                "%s", err);
  ck_assert_int_eq(t.nranks, 2);
  ck_assert_str_eq(t.hw[0].nics[0].addr, "127.0.0.1");
  loom_topo_free(&t);
}
END_TEST

START_TEST(json_bad_input) {
  expect_error("", "t.json:1: empty file");
  expect_error("  \n\n", "t.json:3: empty file");
  expect_error("[]", "t.json:1: expected '{' at the start of the topology, found '['");
  expect_error("{\"loom_topo\": 1", "t.json:1: expected ',' or '}' after a member of the "
                                    "topology, found the end of the file");
  expect_replaced_error("\"loom_topo\": 1", "\"loom_topo\": 2",
                        "t.json:2: format version 2; this Loom reads version 1");
  expect_replaced_error("  \"nnodes\": 1,\n", "", "t.json:23: the topology lacks \"nnodes\"");
  expect_replaced_error("\"nnodes\": 1", "\"nnodes\": 1, \"extra\": 0",
                        "t.json:4: unknown member \"extra\" in the topology");
  expect_replaced_error("\"nnodes\": 1", "\"nnodes\": 1, \"nranks\": 2",
                        "t.json:4: \"nranks\" appears twice in the topology");
  expect_replaced_error("\"cores\": 2", "\"cores\": 2.5",
                        "t.json:12: \"cores\" of node 0: expected an integer, found a fraction");
  expect_replaced_error("\"cores\": 2", "\"cores\": \"2\"",
                        "t.json:12: \"cores\" of node 0: expected an integer, found '\"'");
  expect_replaced_error("\"cores\": 2", "\"cores\": 2147483648",
                        "t.json:12: \"cores\" of node 0: 2147483648 is out of range");
  expect_replaced_error("\"cores\": 2", "\"cores\": 99999999999999999999",
                        "\"cores\" of node 0: out of range");
  expect_replaced_error("\"cores\": 2", "\"cores\": 02", "leading zeros");
  expect_replaced_error("\"numa\": -1", "\"numa\": -2",
                        "t.json:19: \"numa\" of NIC 0 of node 0: -2 is out of range [-1, ");
  expect_replaced_error("\"hostid\": \"h\"",
                        "\"hostid\": \"0123456789012345678901234567890123456789"
                        "012345678901234567890123\"",
                        "t.json:10: \"hostid\" of node 0: longer than 63 bytes");
  expect_replaced_error("\"kind\": \"ip\"", "\"kind\": \"ip\\x\"",
                        "\"kind\" of NIC 0 of node 0: unknown escape \\x");
  expect_replaced_error("\"kind\": \"ip\"", "\"kind\": \"i\np\"", "t.json:19: \"kind\" of NIC 0 "
                                                                  "of node 0: control byte 0x0a");
  expect_replaced_error("\"kind\": \"ip\"", "\"kind\": \"\\u0000\"", "\\u0000 is not allowed");
  expect_replaced_error("\"ranks\": [0, 1]", "\"ranks\": [0, 1, 2]",
                        "t.json:6: node 0: rank 2, but \"nranks\" is 2");
  expect_replaced_error("\"ranks\": [0, 1]", "\"ranks\": [0, 0]",
                        "t.json:6: node 0: rank 0 is already on node 0");
  expect_replaced_error("\"ranks\": [0, 1]", "\"ranks\": [1]", "rank 0 is on no node");
  expect_replaced_error("\"ranks\": [0, 1]", "\"ranks\": []", "t.json:8: node 0 has no ranks");
  expect_replaced_error("\"ranks\": [0, 1]", "\"ranks\": [0, 1,]", "t.json:8: trailing ','");
  expect_replaced_error("\"node\": 0", "\"node\": 1",
                        "t.json:7: \"node\" of node 0 says 1 but it is entry 0 of \"nodes\"");
  expect_replaced_error("\"nnodes\": 1", "\"nnodes\": 2",
                        "\"nnodes\" is 2 but \"nodes\" lists 1");
  expect_replaced_error("\"memory_bytes\": 0,", "\"memory_bytes\": 0,,",
                        "t.json:17: member name in node 0: expected a string, found ','");
  expect_replaced_error("\"nics\": [\n", "\"nics\": [\n{}, ",
                        "t.json:19: NIC 0 of node 0 lacks \"name\"");
  expect_replaced_error("}\n    }\n  ]\n}\n", "}\n    }\n  ]\n}\n}",
                        "t.json:25: unexpected text after the topology");
  expect_replaced_error("\"hw\": {", "\"hw\": nul{", "t.json:9: expected '{' node 0, found 'n'");
}
END_TEST

/* More than LOOM_TOPO_MAX_NICS NICs, and hw on some nodes only. */
START_TEST(json_bad_structure) {
  const char *nic =
      "{\"name\": \"lo\", \"kind\": \"ip\", \"addr\": \"\", \"speed_mbps\": 0, \"numa\": -1}";
  char many[4096] = "\"nics\": [";
  for (int i = 0; i <= LOOM_TOPO_MAX_NICS; i++) {
    strcat(many, i ? ", " : "");
    strcat(many, nic);
  }
  strcat(many, "]");
  char *text = replaced("\"nics\": [\n          {\"name\": \"lo\", \"kind\": \"ip\", \"addr\": "
                        "\"127.0.0.1\", \"speed_mbps\": 0, \"numa\": -1}\n        ]",
                        many);
  expect_error(text, "\"nics\" of node 0: more than 16 NICs");
  free(text);
  const char *mixed = "{\"loom_topo\": 1, \"nranks\": 2, \"nnodes\": 2, \"nodes\": [\n"
                      "{\"node\": 0, \"ranks\": [0], \"hw\": null},\n"
                      "{\"node\": 1, \"ranks\": [1], \"hw\": {\"hostid\": \"x\", \"hostname\": "
                      "\"x\", \"cores\": 1, \"pus\": 1, \"numa_nodes\": 0, \"sockets\": 0, "
                      "\"l3_bytes\": 0, \"memory_bytes\": 0, \"nics\": []}}]}";
  expect_error(mixed, "t.json:3: node 1 has an \"hw\" but node 0 not");
}
END_TEST

/* Every proper prefix of a valid dump is rejected, with a located message
 * (a dump cut short by a full disk must not load as a smaller job). */
START_TEST(json_every_prefix_rejected) {
  struct loom_topo t;
  synthetic(&t);
  size_t len;
  char *text = to_json(&t, &len);
  loom_topo_free(&t);
  for (size_t n = 0; n + 1 < len; n++) { /* the last byte is the final newline */
    char err[256] = "";
    struct loom_topo cut;
    ck_assert_msg(loom_topo_parse_json(&cut, text, n, "t.json", err, sizeof err) == -1,
                  "a prefix of %zu bytes of %zu loaded", n, len);
    ck_assert_msg(strncmp(err, "t.json:", 7) == 0, "prefix %zu: \"%s\"", n, err);
  }
  free(text);
}
END_TEST

START_TEST(json_missing_file) {
  struct loom_topo t;
  char err[256] = "";
  ck_assert_int_eq(loom_topo_read_json(&t, "/nonexistent/topo.json", err, sizeof err), -1);
  ck_assert_msg(strstr(err, "cannot open /nonexistent/topo.json") != NULL, "%s", err);
}
END_TEST

/* ---- discovery ------------------------------------------------------------------- */

START_TEST(discover_this_node) {
  struct loom_topo_hw hw;
  char err[128] = "x";
  uint64_t t0 = loom_now_ns();
  ck_assert_int_eq(loom_topo_discover(&hw, "my-id", err, sizeof err), 0);
  double ms = (double)(loom_now_ns() - t0) / 1e6;
  fprintf(stderr, "check_topo: discovery took %.1f ms: %d cores, %d PUs, %d NICs\n", ms,
          hw.cores, hw.pus, hw.nnics);
  ck_assert_str_eq(err, "");
  ck_assert_str_eq(hw.hostid, "my-id");
  ck_assert_int_ge(hw.cores, 1);
  ck_assert_int_ge(hw.pus, hw.cores);
  ck_assert_int_ge(hw.numa_nodes, 0);
  ck_assert_int_ge(hw.sockets, 0);
  ck_assert_int_ge(hw.l3_bytes, 0);
  ck_assert_int_gt(hw.memory_bytes, 0); /* sysconf at least knows this */
  ck_assert(hw.hostname[0] != '\0');
  char host[256] = "";
  gethostname(host, sizeof host);
  ck_assert_int_eq(strncmp(hw.hostname, host, sizeof hw.hostname - 1), 0);
  ck_assert_int_ge(hw.nnics, 0);
  ck_assert_int_le(hw.nnics, LOOM_TOPO_MAX_NICS);
  int ip = 0, loopback = 0;
  for (int i = 0; i < hw.nnics; i++) {
    const struct loom_topo_nic *n = &hw.nics[i];
    ck_assert(n->name[0] != '\0');
    ck_assert_msg(strcmp(n->kind, "ip") == 0 || strcmp(n->kind, "ibverbs") == 0,
                  "NIC %s: kind %s (ofi is listed on request only)", n->name, n->kind);
    ck_assert_int_ge(n->speed_mbps, 0);
    ck_assert_int_ge(n->numa, -1);
    if (strcmp(n->kind, "ip") == 0) {
      ip++;
      ck_assert_msg(n->addr[0] != '\0', "IP interface %s without an address", n->name);
      loopback += strcmp(n->addr, "127.0.0.1") == 0 || strcmp(n->addr, "::1") == 0;
    }
  }
  ck_assert_msg(loopback == 0 || ip == 1, "loopback listed beside %d other interfaces", ip - 1);
  /* unused slots are zero: records compare byte for byte */
  for (int i = hw.nnics; i < LOOM_TOPO_MAX_NICS; i++)
    ck_assert_str_eq(hw.nics[i].name, "");
  /* no id given: the machine's own, as the bootstrap makes it */
  struct loom_topo_hw again;
  char id[LOOM_TOPO_NAME_BYTES];
  loom_topo_local_hostid(id, sizeof id);
  ck_assert_int_eq(loom_topo_discover(&again, NULL, NULL, 0), 0);
  ck_assert_str_eq(again.hostid, id);
  ck_assert_ptr_nonnull(strchr(id, '/'));
  ck_assert_int_eq(loom_topo_discover(NULL, NULL, err, sizeof err), -1);
  ck_assert(err[0] != '\0');
}
END_TEST

/* Writes text to root/rel, making the directories on the way. */
static void put_file(const char *root, const char *rel, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *slash = strchr(path + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
    *slash = '\0';
    mkdir(path, 0700);
    *slash = '/';
  }
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "%s\n", text);
  fclose(f);
}

/* RDMA devices from a sysfs-shaped tree (as /sys/class/infiniband): sorted
 * by name, the first active port's rate and GID 0 (else the lowest port's),
 * the NUMA node, a device without ports, the NIC limit. */
START_TEST(discover_rdma_from_sysfs) {
  char root[] = "/tmp/check_topo_rdma.XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(root));
  put_file(root, "mlx5_1/ports/1/state", "1: DOWN");
  put_file(root, "mlx5_1/ports/1/rate", "10 Gb/sec (1X QDR)");
  put_file(root, "mlx5_1/ports/1/gids/0", "fe80:0000:0000:0000:0000:0000:0000:0002");
  put_file(root, "mlx5_1/ports/2/state", "4: ACTIVE");
  put_file(root, "mlx5_1/ports/2/rate", "100 Gb/sec (4X EDR)");
  put_file(root, "mlx5_1/ports/2/gids/0", "fe80:0000:0000:0000:0202:c9ff:fe00:0001");
  put_file(root, "mlx5_1/device/numa_node", "1");
  put_file(root, "mlx5_0/ports/1/state", "1: DOWN");
  put_file(root, "mlx5_0/ports/1/rate", "2.5 Gb/sec (1X SDR)");
  put_file(root, "rxe0/node_type", "1: CA");
  struct loom_topo_hw hw;
  memset(&hw, 0, sizeof hw);
  ck_assert_int_eq(loom_topo_list_rdma(&hw, root), 3);
  ck_assert_int_eq(hw.nnics, 3);
  const struct loom_topo_nic *n = hw.nics;
  ck_assert_str_eq(n[0].name, "mlx5_0");
  ck_assert_str_eq(n[0].kind, "ibverbs");
  ck_assert_int_eq(n[0].speed_mbps, 2500);
  ck_assert_str_eq(n[0].addr, "");
  ck_assert_int_eq(n[0].numa, -1);
  ck_assert_str_eq(n[1].name, "mlx5_1");
  ck_assert_int_eq(n[1].speed_mbps, 100000);
  ck_assert_str_eq(n[1].addr, "fe80:0000:0000:0000:0202:c9ff:fe00:0001");
  ck_assert_int_eq(n[1].numa, 1);
  ck_assert_str_eq(n[2].name, "rxe0");
  ck_assert_int_eq(n[2].speed_mbps, 0);
  hw.nnics = LOOM_TOPO_MAX_NICS - 1; /* room for one more */
  ck_assert_int_eq(loom_topo_list_rdma(&hw, root), 1);
  ck_assert_int_eq(hw.nnics, LOOM_TOPO_MAX_NICS);
  ck_assert_int_eq(loom_topo_list_rdma(&hw, "/nonexistent/infiniband"), 0);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(local_hostid_override) {
  setenv("LOOM_HOSTID", "forced-node-7", 1);
  loom_config_reload();
  char id[LOOM_TOPO_NAME_BYTES];
  loom_topo_local_hostid(id, sizeof id);
  ck_assert_str_eq(id, "forced-node-7");
  unsetenv("LOOM_HOSTID");
  loom_config_reload();
}
END_TEST

START_TEST(sanitize_foreign_record) {
  struct loom_topo_hw hw;
  memset(&hw, 'x', sizeof hw);
  hw.nnics = 99;
  loom_topo_hw_sanitize(&hw);
  ck_assert_int_eq(hw.nnics, LOOM_TOPO_MAX_NICS);
  ck_assert_uint_eq(strlen(hw.hostid), sizeof hw.hostid - 1);
  ck_assert_uint_eq(strlen(hw.nics[15].addr), sizeof hw.nics[15].addr - 1);
  hw.nnics = -3;
  loom_topo_hw_sanitize(&hw);
  ck_assert_int_eq(hw.nnics, 0);
  ck_assert_str_eq(hw.nics[0].name, "");
  ck_assert_int_eq(hw.nics[0].numa, 0);
  /* negative numbers are unknown (0; NIC NUMA -1), as the JSON reader wants */
  hw.cores = -1;
  hw.pus = -2;
  hw.numa_nodes = INT32_MIN;
  hw.sockets = -4;
  hw.l3_bytes = -5;
  hw.memory_bytes = INT64_MIN;
  hw.nnics = 1;
  hw.nics[0].speed_mbps = -100;
  hw.nics[0].numa = -7;
  loom_topo_hw_sanitize(&hw);
  ck_assert_int_eq(hw.cores, 0);
  ck_assert_int_eq(hw.pus, 0);
  ck_assert_int_eq(hw.numa_nodes, 0);
  ck_assert_int_eq(hw.sockets, 0);
  ck_assert_int_eq(hw.l3_bytes, 0);
  ck_assert_int_eq(hw.memory_bytes, 0);
  ck_assert_int_eq(hw.nics[0].speed_mbps, 0);
  ck_assert_int_eq(hw.nics[0].numa, -1);
}
END_TEST

/* A record survives the wire encoding field for field, in a layout fixed
 * byte by byte (big-endian integers at known offsets), and any bytes at
 * all decode to a safe record. */
START_TEST(record_round_trip_and_garbage) {
  struct loom_topo_hw hw, back;
  memset(&hw, 0, sizeof hw);
  snprintf(hw.hostid, sizeof hw.hostid, "node-a/1234");
  snprintf(hw.hostname, sizeof hw.hostname, "node-a");
  hw.cores = 64;
  hw.pus = 128;
  hw.numa_nodes = 2;
  hw.sockets = 2;
  hw.l3_bytes = 256ll << 20;
  hw.memory_bytes = 1ll << 40;
  hw.nnics = 2;
  snprintf(hw.nics[0].name, sizeof hw.nics[0].name, "eth0");
  snprintf(hw.nics[0].kind, sizeof hw.nics[0].kind, "ip");
  snprintf(hw.nics[0].addr, sizeof hw.nics[0].addr, "10.0.0.1");
  hw.nics[0].speed_mbps = 100000;
  hw.nics[0].numa = -1;
  snprintf(hw.nics[1].name, sizeof hw.nics[1].name, "mlx5_0");
  hw.nics[1].numa = 1;
  uint8_t wire[LOOM_TOPO_RECORD_BYTES];
  loom_topo_hw_encode(&hw, wire);
  loom_topo_hw_decode(wire, &back);
  ck_assert(memcmp(&hw, &back, sizeof hw) == 0);
  /* cores right after the two 64-byte names, most significant byte first */
  ck_assert_uint_eq(wire[128], 0);
  ck_assert_uint_eq(wire[131], 64);
  /* garbage: names without an end, a NIC count out of range */
  memset(wire, 0xff, sizeof wire);
  loom_topo_hw_decode(wire, &back);
  ck_assert_uint_eq(strlen(back.hostid), sizeof back.hostid - 1);
  ck_assert_int_eq(back.nnics, 0); /* -1 on the wire */
  ck_assert_str_eq(back.nics[0].name, "");
  memset(wire, 'x', sizeof wire);
  loom_topo_hw_decode(wire, &back);
  ck_assert_int_eq(back.nnics, LOOM_TOPO_MAX_NICS);
  ck_assert_uint_eq(strlen(back.nics[15].addr), sizeof back.nics[15].addr - 1);
}
END_TEST

/* ---- the init-time exchange ------------------------------------------------------ */

/* A fake allgather for 4 ranks of encoded records (record.c): ranks 0 and
 * 2 on "far", 1 and 3 on the caller's id; each record as the caller's but
 * for its id and core count. */
struct fake {
  int rank, calls, fail;
  size_t size;
};

static int fake_allgather(void *data, size_t size, void *arg) {
  struct fake *f = arg;
  f->calls++;
  f->size = size;
  if (f->fail)
    return -1;
  uint8_t *wire = data;
  struct loom_topo_hw mine, other;
  loom_topo_hw_decode(wire + (size_t)f->rank * size, &mine);
  for (int r = 0; r < 4; r++) {
    if (r == f->rank)
      continue;
    other = mine;
    if (r % 2 == 0)
      snprintf(other.hostid, sizeof other.hostid, "far");
    other.cores = 100 + r;
    other.nnics = 1000; /* garbage from a peer is clamped */
    loom_topo_hw_encode(&other, wire + (size_t)r * size);
  }
  return 0;
}

static void clear_topo_env(void) {
  unsetenv("LOOM_TOPO_FILE");
  unsetenv("LOOM_TOPO_DUMP_FILE");
  setenv("LOOM_DEBUG", "NONE", 1);
  loom_config_reload();
}

START_TEST(build_groups_and_keeps_one_record_per_node) {
  clear_topo_env();
  struct fake f = {1, 0, 0, 0};
  struct loom_topo t;
  char err[256] = "";
  ck_assert_msg(loom_topo_build(&t, 1, 4, "near", fake_allgather, &f, err, sizeof err) == 0, "%s",
                err);
  ck_assert_int_eq(f.calls, 1);
  ck_assert_uint_eq(f.size, LOOM_TOPO_RECORD_BYTES);
  ck_assert_int_eq(t.nnodes, 2);
  expect_ints(t.node_of, (int[]){0, 1, 0, 1}, 4, "node_of");
  ck_assert_str_eq(t.hw[0].hostid, "far");
  ck_assert_int_eq(t.hw[0].cores, 100); /* rank 0's record */
  ck_assert_str_eq(t.hw[1].hostid, "near");
  ck_assert_int_ge(t.hw[1].cores, 1); /* rank 1's own, discovered */
  ck_assert_int_lt(t.hw[1].cores, 100);
  ck_assert_int_eq(t.hw[0].nnics, LOOM_TOPO_MAX_NICS);
  loom_topo_free(&t);
  /* a failed exchange */
  f.fail = 1;
  ck_assert_int_eq(loom_topo_build(&t, 1, 4, "near", fake_allgather, &f, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "exchanging topology records"));
  ck_assert_ptr_null(t.node_of);
}
END_TEST

START_TEST(build_dump_and_load) {
  clear_topo_env();
  char dir[] = "/tmp/check_topo.XXXXXX", pattern[96], path[128];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(pattern, sizeof pattern, "%s/topo.%%p.json", dir);
  snprintf(path, sizeof path, "%s/topo.%ld.json", dir, (long)getpid());
  setenv("LOOM_TOPO_DUMP_FILE", pattern, 1);
  loom_config_reload();
  struct loom_topo t, back;
  char err[256] = "";
  /* rank 1 does not write it */
  struct fake f1 = {1, 0, 0, 0};
  ck_assert_int_eq(loom_topo_build(&t, 1, 4, "near", fake_allgather, &f1, err, sizeof err), 0);
  loom_topo_free(&t);
  ck_assert_int_eq(access(path, F_OK), -1);
  /* rank 0 does, %p expanded */
  struct fake f0 = {0, 0, 0, 0};
  ck_assert_int_eq(loom_topo_build(&t, 0, 4, "near", fake_allgather, &f0, err, sizeof err), 0);
  ck_assert_msg(loom_topo_read_json(&back, path, err, sizeof err) == 0, "%s", err);
  expect_same(&t, &back);
  loom_topo_free(&back);
  /* LOOM_TOPO_FILE: loaded instead of discovered, after the same exchange */
  unsetenv("LOOM_TOPO_DUMP_FILE");
  setenv("LOOM_TOPO_FILE", path, 1);
  loom_config_reload();
  f1.calls = 0;
  ck_assert_msg(loom_topo_build(&back, 1, 4, "near", fake_allgather, &f1, err, sizeof err) == 0,
                "%s", err);
  ck_assert_int_eq(f1.calls, 1);
  expect_same(&t, &back);
  loom_topo_free(&back);
  /* a rank count that does not match */
  ck_assert_int_eq(loom_topo_build(&back, 1, 5, "near", fake_allgather, &f1, err, sizeof err), -2);
  ck_assert_msg(strstr(err, "describes 4 ranks but the communicator has 5") != NULL, "%s", err);
  ck_assert_ptr_null(back.node_of);
  /* a file that is not there */
  setenv("LOOM_TOPO_FILE", "/nonexistent/t.json", 1);
  loom_config_reload();
  ck_assert_int_eq(loom_topo_build(&back, 1, 4, "near", fake_allgather, &f1, err, sizeof err), -2);
  ck_assert_msg(strstr(err, "LOOM_TOPO_FILE: cannot open /nonexistent/t.json") != NULL, "%s", err);
  loom_topo_free(&t);
  unlink(path);
  rmdir(dir);
  clear_topo_env();
}
END_TEST

/* A dump that cannot be written is a warning; init goes on. */
START_TEST(build_dump_unwritable) {
  clear_topo_env();
  setenv("LOOM_TOPO_DUMP_FILE", "/nonexistent/dir/t.json", 1);
  loom_config_reload();
  struct fake f = {0, 0, 0, 0};
  struct loom_topo t;
  char err[256] = "";
  ck_assert_msg(loom_topo_build(&t, 0, 4, "near", fake_allgather, &f, err, sizeof err) == 0, "%s",
                err);
  ck_assert_int_eq(t.nnodes, 2);
  loom_topo_free(&t);
  clear_topo_env();
}
END_TEST

int main(void) {
  Suite *s = suite_create("topo");
  TCase *group = tcase_create("group");
  tcase_add_test(group, group_one_rank);
  tcase_add_test(group, group_interleaved_five);
  tcase_add_test(group, group_every_rank_its_own_node);
  tcase_add_test(group, group_all_on_one_node);
  tcase_add_test(group, group_scrambled_shapes);
  suite_add_tcase(s, group);
  TCase *json = tcase_create("json");
  tcase_add_test(json, json_round_trip);
  tcase_add_test(json, json_layout);
  tcase_add_test(json, json_round_trip_without_hw);
  tcase_add_test(json, json_tolerant_layout);
  tcase_add_test(json, json_good_doc_parses);
  tcase_add_test(json, json_bad_input);
  tcase_add_test(json, json_bad_structure);
  tcase_add_test(json, json_every_prefix_rejected);
  tcase_add_test(json, json_missing_file);
  suite_add_tcase(s, json);
  TCase *disc = tcase_create("discover");
  tcase_add_test(disc, discover_this_node);
  tcase_add_test(disc, discover_rdma_from_sysfs);
  tcase_add_test(disc, local_hostid_override);
  tcase_add_test(disc, sanitize_foreign_record);
  tcase_add_test(disc, record_round_trip_and_garbage);
  suite_add_tcase(s, disc);
  TCase *ex = tcase_create("exchange");
  tcase_add_test(ex, build_groups_and_keeps_one_record_per_node);
  tcase_add_test(ex, build_dump_and_load);
  tcase_add_test(ex, build_dump_unwritable);
  suite_add_tcase(s, ex);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
