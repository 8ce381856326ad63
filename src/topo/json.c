/*
 * json.c — a communicator's topology as JSON: LOOM_TOPO_DUMP_FILE writes
 * it, LOOM_TOPO_FILE and `loom-topo FILE` read it back.
 *
 * The format (version 1), as loom_topo_write_json writes it:
 *
 *   {
 *     "loom_topo": 1,                      format version
 *     "nranks": 5,
 *     "nnodes": 2,
 *     "nodes": [                           in order of their lowest rank
 *       {
 *         "node": 0,                       its index in "nodes"
 *         "ranks": [0, 2],                 ascending; every rank on one node
 *         "hw": {                          or null when only the grouping is known
 *           "hostid": "a/1234...",         what grouped the ranks (LOOM_HOSTID)
 *           "hostname": "a",
 *           "cores": 2,                    0 = unknown, as for the next three
 *           "pus": 4,                      hardware threads
 *           "numa_nodes": 1,
 *           "sockets": 1,
 *           "l3_bytes": 33554432,          largest last-level cache; 0 = unknown
 *           "memory_bytes": 7744552960,    0 = unknown
 *           "nics": [                      one a line; kind "ip", "ibverbs" or "ofi";
 *             {"name": "eth0", "kind": "ip", "addr": "10.0.0.1", "speed_mbps": 10000, "numa": -1}
 *           ]                              speed 0 and numa -1 = unknown
 *         }
 *       },
 *       ...
 *     ]
 *   }
 *
 * The reader takes exactly this: members in any order and any whitespace,
 * but no unknown, missing or repeated member, integers only, strings that
 * fit their fields (hostid/hostname 63 bytes, NIC name 31, kind 15, addr
 * 63), at most LOOM_TOPO_MAX_NICS NICs, and either every node with "hw" or
 * none.  Nodes may be listed in any order; they are renumbered by lowest
 * rank, so reading what was written gives back the same struct, byte for
 * byte.  Errors name the file and line.
 */
#include "topo/topo.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_VERSION 1
#define JSON_MAX_BYTES (256 << 20) /* far above any real job; a guard against /dev/zero */
#define JSON_MAX_RANKS (1 << 24)
#define CTX_BYTES 160 /* "\"speed_mbps\" of NIC 15 of node 12345" and the like */

/* ---- writing ---------------------------------------------------------------- */

/* A string field as a JSON string: quotes, backslashes and control bytes
 * escaped; other bytes as they are (host names are ASCII or UTF-8). */
static void put_string(FILE *f, const char *s, size_t cap) {
  size_t n = strnlen(s, cap - 1);
  fputc('"', f);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

#define PUT_FIELD(f, rec, field) put_string((f), (rec)->field, sizeof (rec)->field)

static void put_hw(FILE *f, const struct loom_topo_hw *hw) {
  fputs("{\n        \"hostid\": ", f);
  PUT_FIELD(f, hw, hostid);
  fputs(",\n        \"hostname\": ", f);
  PUT_FIELD(f, hw, hostname);
  fprintf(f,
          ",\n        \"cores\": %d,\n        \"pus\": %d,\n        \"numa_nodes\": %d,"
          "\n        \"sockets\": %d,\n        \"l3_bytes\": %lld,"
          "\n        \"memory_bytes\": %lld,\n        \"nics\": [",
          (int)hw->cores, (int)hw->pus, (int)hw->numa_nodes, (int)hw->sockets,
          (long long)hw->l3_bytes, (long long)hw->memory_bytes);
  int nnics = hw->nnics < 0 ? 0 : hw->nnics > LOOM_TOPO_MAX_NICS ? LOOM_TOPO_MAX_NICS : hw->nnics;
  for (int i = 0; i < nnics; i++) {
    const struct loom_topo_nic *nic = &hw->nics[i];
    fputs(i ? ",\n          {\"name\": " : "\n          {\"name\": ", f);
    PUT_FIELD(f, nic, name);
    fputs(", \"kind\": ", f);
    PUT_FIELD(f, nic, kind);
    fputs(", \"addr\": ", f);
    PUT_FIELD(f, nic, addr);
    fprintf(f, ", \"speed_mbps\": %d, \"numa\": %d}", (int)nic->speed_mbps, (int)nic->numa);
  }
  fputs(nnics ? "\n        ]\n      }" : "]\n      }", f);
}

int loom_topo_write_json(const struct loom_topo *t, FILE *f) {
  fprintf(f, "{\n  \"loom_topo\": %d,\n  \"nranks\": %d,\n  \"nnodes\": %d,\n  \"nodes\": [",
          JSON_VERSION, t->nranks, t->nnodes);
  for (int k = 0; k < t->nnodes; k++) {
    fprintf(f, "%s\n    {\n      \"node\": %d,\n      \"ranks\": [", k ? "," : "", k);
    for (int i = 0; i < loom_topo_node_size(t, k); i++) {
      const char *sep = i == 0 ? "" : i % 16 == 0 ? ",\n                " : ", ";
      fprintf(f, "%s%d", sep, loom_topo_rank_at(t, k, i));
    }
    fputs("],\n      \"hw\": ", f);
    if (t->hw != NULL)
      put_hw(f, &t->hw[k]);
    else
      fputs("null", f);
    fputs("\n    }", f);
  }
  fputs(t->nnodes ? "\n  ]\n}\n" : "]\n}\n", f);
  return ferror(f) ? -1 : 0;
}

/* ---- reading ---------------------------------------------------------------- */

struct jp {
  const char *p, *end;
  int line;
  const char *name;
  char *err;
  size_t errlen;
};

static int fail(struct jp *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct jp *j, const char *fmt, ...) {
  if (j->err != NULL && j->errlen > 0) {
    int n = snprintf(j->err, j->errlen, "%s:%d: ", j->name, j->line);
    if (n >= 0 && (size_t)n < j->errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(j->err + n, j->errlen - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return -1;
}

static void skip_ws(struct jp *j) {
  while (j->p < j->end &&
         (*j->p == ' ' || *j->p == '\t' || *j->p == '\r' || *j->p == '\n')) {
    if (*j->p == '\n')
      j->line++;
    j->p++;
  }
}

/* What stands at the cursor, for messages. */
static const char *found(struct jp *j, char *buf, size_t len) {
  if (j->p >= j->end)
    return "the end of the file";
  unsigned char c = (unsigned char)*j->p;
  if (c >= 0x20 && c < 0x7f)
    snprintf(buf, len, "'%c'", c);
  else
    snprintf(buf, len, "byte 0x%02x", c);
  return buf;
}

static int expect(struct jp *j, char c, const char *where) {
  skip_ws(j);
  if (j->p < j->end && *j->p == c) {
    j->p++;
    return 0;
  }
  char buf[16];
  return fail(j, "expected '%c' %s, found %s", c, where, found(j, buf, sizeof buf));
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* A JSON string into out[cap] (NUL-terminated); what names it in errors. */
static int parse_string(struct jp *j, char *out, size_t cap, const char *what) {
  skip_ws(j);
  if (j->p >= j->end || *j->p != '"') {
    char buf[16];
    return fail(j, "%s: expected a string, found %s", what, found(j, buf, sizeof buf));
  }
  j->p++;
  size_t n = 0;
  for (;;) {
    if (j->p >= j->end)
      return fail(j, "%s: the string does not end", what);
    unsigned char c = (unsigned char)*j->p++;
    if (c == '"')
      break;
    if (c < 0x20)
      return fail(j, "%s: control byte 0x%02x in a string (write it as \\u%04x)", what, c, c);
    unsigned char enc[3];
    size_t k = 1;
    enc[0] = c;
    if (c == '\\') {
      if (j->p >= j->end)
        return fail(j, "%s: the string does not end", what);
      char e = *j->p++;
      switch (e) {
      case '"': case '\\': case '/': enc[0] = (unsigned char)e; break;
      case 'b': enc[0] = '\b'; break;
      case 'f': enc[0] = '\f'; break;
      case 'n': enc[0] = '\n'; break;
      case 'r': enc[0] = '\r'; break;
      case 't': enc[0] = '\t'; break;
      case 'u': {
        unsigned v = 0;
        for (int i = 0; i < 4; i++) {
          int h = j->p < j->end ? hexval(*j->p) : -1;
          if (h < 0)
            return fail(j, "%s: \\u needs four hex digits", what);
          v = v * 16 + (unsigned)h;
          j->p++;
        }
        if (v == 0 || (v >= 0xd800 && v <= 0xdfff))
          return fail(j, "%s: \\u%04x is not allowed here", what, v);
        if (v < 0x80) {
          enc[0] = (unsigned char)v;
        } else if (v < 0x800) {
          enc[0] = (unsigned char)(0xc0 | (v >> 6));
          enc[1] = (unsigned char)(0x80 | (v & 0x3f));
          k = 2;
        } else {
          enc[0] = (unsigned char)(0xe0 | (v >> 12));
          enc[1] = (unsigned char)(0x80 | ((v >> 6) & 0x3f));
          enc[2] = (unsigned char)(0x80 | (v & 0x3f));
          k = 3;
        }
        break;
      }
      default:
        return fail(j, "%s: unknown escape \\%c", what, e);
      }
    }
    if (n + k >= cap)
      return fail(j, "%s: longer than %zu bytes", what, cap - 1);
    memcpy(out + n, enc, k);
    n += k;
  }
  memset(out + n, 0, cap - n);
  return 0;
}

/* A JSON integer in [min, max]. */
static int parse_int(struct jp *j, int64_t *out, int64_t min, int64_t max, const char *what) {
  skip_ws(j);
  const char *s = j->p;
  int neg = s < j->end && *s == '-';
  s += neg;
  if (s >= j->end || *s < '0' || *s > '9') {
    char buf[16];
    return fail(j, "%s: expected an integer, found %s", what, found(j, buf, sizeof buf));
  }
  if (*s == '0' && s + 1 < j->end && s[1] >= '0' && s[1] <= '9')
    return fail(j, "%s: leading zeros are not JSON", what);
  uint64_t v = 0;
  int overflow = 0;
  for (; s < j->end && *s >= '0' && *s <= '9'; s++) {
    unsigned d = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - d) / 10)
      overflow = 1;
    else
      v = v * 10 + d;
  }
  if (s < j->end && (*s == '.' || *s == 'e' || *s == 'E'))
    return fail(j, "%s: expected an integer, found a fraction or exponent", what);
  if (overflow || v > (uint64_t)INT64_MAX + neg)
    return fail(j, "%s: out of range", what);
  int64_t val = neg ? (int64_t)(0 - v) : (int64_t)v;
  if (val < min || val > max)
    return fail(j, "%s: %lld is out of range [%lld, %lld]", what, (long long)val,
                (long long)min, (long long)max);
  j->p = s;
  *out = val;
  return 0;
}

static int parse_i32(struct jp *j, int32_t *out, int32_t min, const char *what) {
  int64_t v;
  if (parse_int(j, &v, min, INT32_MAX, what) != 0)
    return -1;
  *out = (int32_t)v;
  return 0;
}

/* Between the entries of an object or array (close is '}' or ']'): 0
 * after the closing bracket (consumed), 1 when an entry follows (the ','
 * before it consumed), -1 on error.  *count: entries read so far. */
static int next_entry(struct jp *j, int count, char close, const char *kind, const char *what) {
  skip_ws(j);
  if (j->p < j->end && *j->p == close) {
    j->p++;
    return 0;
  }
  if (count > 0) {
    if (j->p >= j->end || *j->p != ',') {
      char buf[16];
      return fail(j, "expected ',' or '%c' after %s of %s, found %s", close, kind, what,
                  found(j, buf, sizeof buf));
    }
    j->p++;
    skip_ws(j);
    if (j->p < j->end && *j->p == close)
      return fail(j, "trailing ',' in %s", what);
  }
  return 1;
}

/* Walks an object's members: call with *count = 0 after '{'; returns 1
 * with the next member's name in key (the ':' consumed), 0 after the
 * closing '}', -1 on error. */
static int next_member(struct jp *j, int *count, char *key, size_t keycap, const char *what) {
  int more = next_entry(j, *count, '}', "a member", what);
  if (more <= 0)
    return more;
  char ctx[CTX_BYTES];
  snprintf(ctx, sizeof ctx, "member name in %.100s", what);
  if (parse_string(j, key, keycap, ctx) != 0)
    return -1;
  (*count)++;
  snprintf(ctx, sizeof ctx, "after \"%.31s\" in %.100s", key, what);
  return expect(j, ':', ctx) == 0 ? 1 : -1;
}

/* The same for an array's items: 1 when an item follows, 0 after ']'. */
static int next_item(struct jp *j, int *count, const char *what) {
  int more = next_entry(j, *count, ']', "an item", what);
  if (more == 1)
    (*count)++;
  return more;
}

/* Which of an object's members were seen, by index in its name list. */
static int member_index(struct jp *j, const char *const *names, int n, unsigned *seen,
                        const char *key, const char *what) {
  for (int i = 0; i < n; i++) {
    if (strcmp(names[i], key) == 0) {
      if (*seen & (1u << i))
        return fail(j, "\"%s\" appears twice in %s", key, what);
      *seen |= 1u << i;
      return i;
    }
  }
  return fail(j, "unknown member \"%s\" in %s", key, what);
}

static int check_all_seen(struct jp *j, const char *const *names, int n, unsigned seen,
                          const char *what) {
  for (int i = 0; i < n; i++)
    if (!(seen & (1u << i)))
      return fail(j, "%s lacks \"%s\"", what, names[i]);
  return 0;
}

static int parse_nic(struct jp *j, struct loom_topo_nic *nic, const char *what) {
  static const char *const names[] = {"name", "kind", "addr", "speed_mbps", "numa"};
  enum { N = sizeof names / sizeof names[0] };
  if (expect(j, '{', what) != 0)
    return -1;
  memset(nic, 0, sizeof *nic);
  unsigned seen = 0;
  int count = 0, more;
  char key[32], ctx[CTX_BYTES];
  while ((more = next_member(j, &count, key, sizeof key, what)) == 1) {
    int i = member_index(j, names, N, &seen, key, what);
    snprintf(ctx, sizeof ctx, "\"%.31s\" of %.100s", key, what);
    int rc = i == 0   ? parse_string(j, nic->name, sizeof nic->name, ctx)
             : i == 1 ? parse_string(j, nic->kind, sizeof nic->kind, ctx)
             : i == 2 ? parse_string(j, nic->addr, sizeof nic->addr, ctx)
             : i == 3 ? parse_i32(j, &nic->speed_mbps, 0, ctx)
             : i == 4 ? parse_i32(j, &nic->numa, -1, ctx)
                      : -1;
    if (rc != 0)
      return -1;
  }
  return more < 0 ? -1 : check_all_seen(j, names, N, seen, what);
}

static int parse_nics(struct jp *j, struct loom_topo_hw *hw, const char *what) {
  char ctx[CTX_BYTES];
  snprintf(ctx, sizeof ctx, "at the start of \"nics\" of %.100s", what);
  if (expect(j, '[', ctx) != 0)
    return -1;
  snprintf(ctx, sizeof ctx, "\"nics\" of %.100s", what);
  int count = 0, more;
  while ((more = next_item(j, &count, ctx)) == 1) {
    if (count > LOOM_TOPO_MAX_NICS)
      return fail(j, "%s: more than %d NICs", ctx, LOOM_TOPO_MAX_NICS);
    char nic_what[CTX_BYTES];
    snprintf(nic_what, sizeof nic_what, "NIC %d of %.100s", count - 1, what);
    if (parse_nic(j, &hw->nics[count - 1], nic_what) != 0)
      return -1;
  }
  hw->nnics = count;
  return more < 0 ? -1 : 0;
}

static int parse_hw(struct jp *j, struct loom_topo_hw *hw, const char *what) {
  static const char *const names[] = {"hostid", "hostname",   "cores",        "pus", "numa_nodes",
                                      "sockets", "l3_bytes", "memory_bytes", "nics"};
  enum { N = sizeof names / sizeof names[0] };
  if (expect(j, '{', what) != 0)
    return -1;
  memset(hw, 0, sizeof *hw);
  unsigned seen = 0;
  int count = 0, more;
  char key[32], ctx[CTX_BYTES];
  while ((more = next_member(j, &count, key, sizeof key, what)) == 1) {
    int i = member_index(j, names, N, &seen, key, what);
    snprintf(ctx, sizeof ctx, "\"%.31s\" of %.100s", key, what);
    int rc = -1;
    switch (i) {
    case 0: rc = parse_string(j, hw->hostid, sizeof hw->hostid, ctx); break;
    case 1: rc = parse_string(j, hw->hostname, sizeof hw->hostname, ctx); break;
    case 2: rc = parse_i32(j, &hw->cores, 0, ctx); break;
    case 3: rc = parse_i32(j, &hw->pus, 0, ctx); break;
    case 4: rc = parse_i32(j, &hw->numa_nodes, 0, ctx); break;
    case 5: rc = parse_i32(j, &hw->sockets, 0, ctx); break;
    case 6: rc = parse_int(j, &hw->l3_bytes, 0, INT64_MAX, ctx); break;
    case 7: rc = parse_int(j, &hw->memory_bytes, 0, INT64_MAX, ctx); break;
    case 8: rc = parse_nics(j, hw, what); break;
    default: break;
    }
    if (rc != 0)
      return -1;
  }
  return more < 0 ? -1 : check_all_seen(j, names, N, seen, what);
}

/* One entry of "nodes" as read, before renumbering. */
struct node_in {
  int line;
  int *ranks, nranks;
  int hw_known;
  struct loom_topo_hw hw;
};

struct doc {
  int64_t version, nranks, nnodes;
  struct node_in *nodes;
  int n, cap;
};

static void doc_free(struct doc *d) {
  for (int i = 0; i < d->n; i++)
    free(d->nodes[i].ranks);
  free(d->nodes);
}

static int parse_ranks(struct jp *j, struct node_in *nd, const char *what) {
  char ctx[CTX_BYTES];
  snprintf(ctx, sizeof ctx, "at the start of \"ranks\" of %.100s", what);
  if (expect(j, '[', ctx) != 0)
    return -1;
  snprintf(ctx, sizeof ctx, "\"ranks\" of %.100s", what);
  int count = 0, more, cap = 0;
  while ((more = next_item(j, &count, ctx)) == 1) {
    if (count > cap) {
      int ncap = cap ? 2 * cap : 16;
      int *grown = realloc(nd->ranks, (size_t)ncap * sizeof(int));
      if (grown == NULL)
        return fail(j, "out of memory");
      nd->ranks = grown;
      cap = ncap;
    }
    int64_t r;
    if (parse_int(j, &r, 0, JSON_MAX_RANKS - 1, ctx) != 0)
      return -1;
    nd->ranks[count - 1] = (int)r;
  }
  nd->nranks = count;
  if (more < 0)
    return -1;
  return count == 0 ? fail(j, "%s has no ranks", what) : 0;
}

static int parse_node(struct jp *j, struct node_in *nd, int index) {
  static const char *const names[] = {"node", "ranks", "hw"};
  enum { N = sizeof names / sizeof names[0] };
  char what[32];
  snprintf(what, sizeof what, "node %d", index);
  if (expect(j, '{', "at the start of a node") != 0)
    return -1;
  nd->line = j->line;
  unsigned seen = 0;
  int count = 0, more;
  char key[32], ctx[CTX_BYTES];
  while ((more = next_member(j, &count, key, sizeof key, what)) == 1) {
    int i = member_index(j, names, N, &seen, key, what);
    snprintf(ctx, sizeof ctx, "\"%.31s\" of %.100s", key, what);
    if (i == 0) {
      int64_t v;
      if (parse_int(j, &v, 0, INT32_MAX, ctx) != 0)
        return -1;
      if (v != index)
        return fail(j, "%s says %lld but it is entry %d of \"nodes\"", ctx, (long long)v, index);
    } else if (i == 1) {
      if (parse_ranks(j, nd, what) != 0)
        return -1;
    } else if (i == 2) {
      skip_ws(j);
      if (j->end - j->p >= 4 && memcmp(j->p, "null", 4) == 0) {
        j->p += 4;
      } else {
        nd->hw_known = 1;
        if (parse_hw(j, &nd->hw, what) != 0)
          return -1;
      }
    } else {
      return -1;
    }
  }
  return more < 0 ? -1 : check_all_seen(j, names, N, seen, what);
}

static int parse_nodes(struct jp *j, struct doc *d) {
  if (expect(j, '[', "at the start of \"nodes\"") != 0)
    return -1;
  int count = 0, more;
  while ((more = next_item(j, &count, "\"nodes\"")) == 1) {
    if (d->n == d->cap) {
      int ncap = d->cap ? 2 * d->cap : 8;
      struct node_in *grown = realloc(d->nodes, (size_t)ncap * sizeof *grown);
      if (grown == NULL)
        return fail(j, "out of memory");
      d->nodes = grown;
      d->cap = ncap;
    }
    struct node_in *nd = &d->nodes[d->n++];
    memset(nd, 0, sizeof *nd);
    if (parse_node(j, nd, d->n - 1) != 0)
      return -1;
  }
  return more;
}

static int parse_doc(struct jp *j, struct doc *d) {
  static const char *const names[] = {"loom_topo", "nranks", "nnodes", "nodes"};
  enum { N = sizeof names / sizeof names[0] };
  const char *what = "the topology";
  skip_ws(j);
  if (j->p >= j->end)
    return fail(j, "empty file (expected a topology written by LOOM_TOPO_DUMP_FILE)");
  if (expect(j, '{', "at the start of the topology") != 0)
    return -1;
  unsigned seen = 0;
  int count = 0, more;
  char key[32];
  while ((more = next_member(j, &count, key, sizeof key, what)) == 1) {
    int i = member_index(j, names, N, &seen, key, what);
    int rc = -1;
    if (i == 0) {
      rc = parse_int(j, &d->version, 0, INT32_MAX, "\"loom_topo\"");
      if (rc == 0 && d->version != JSON_VERSION)
        return fail(j, "format version %lld; this Loom reads version %d",
                    (long long)d->version, JSON_VERSION);
    } else if (i == 1) {
      rc = parse_int(j, &d->nranks, 1, JSON_MAX_RANKS, "\"nranks\"");
    } else if (i == 2) {
      rc = parse_int(j, &d->nnodes, 1, JSON_MAX_RANKS, "\"nnodes\"");
    } else if (i == 3) {
      rc = parse_nodes(j, d);
    }
    if (rc != 0)
      return -1;
  }
  if (more < 0 || check_all_seen(j, names, N, seen, what) != 0)
    return -1;
  skip_ws(j);
  if (j->p < j->end)
    return fail(j, "unexpected text after the topology");
  return 0;
}

/* The checks that need the whole document; then t from it. */
static int build(struct jp *j, struct doc *d, struct loom_topo *t) {
  if (d->nnodes != d->n)
    return fail(j, "\"nnodes\" is %lld but \"nodes\" lists %d", (long long)d->nnodes, d->n);
  int nranks = (int)d->nranks;
  int *node_id = malloc((size_t)nranks * sizeof(int));
  if (node_id == NULL)
    return fail(j, "out of memory");
  for (int r = 0; r < nranks; r++)
    node_id[r] = -1;
  int rc = 0;
  for (int k = 0; k < d->n && rc == 0; k++) {
    const struct node_in *nd = &d->nodes[k];
    j->line = nd->line;
    if (nd->hw_known != d->nodes[0].hw_known)
      rc = fail(j, "node %d has %s \"hw\" but node 0 %s: either every node has it or none", k,
                nd->hw_known ? "an" : "a null", nd->hw_known ? "not" : "has");
    for (int i = 0; i < nd->nranks && rc == 0; i++) {
      int r = nd->ranks[i];
      if (r >= nranks)
        rc = fail(j, "node %d: rank %d, but \"nranks\" is %d", k, r, nranks);
      else if (node_id[r] >= 0)
        rc = fail(j, "node %d: rank %d is already on node %d", k, r, node_id[r]);
      else
        node_id[r] = k;
    }
  }
  for (int r = 0; r < nranks && rc == 0; r++)
    if (node_id[r] < 0)
      rc = fail(j, "rank %d is on no node (\"nranks\" is %d)", r, nranks);
  if (rc == 0 && loom_topo_from_nodes(t, nranks, node_id) != 0)
    rc = fail(j, "out of memory");
  if (rc == 0 && d->nodes[0].hw_known) {
    t->hw = calloc((size_t)t->nnodes, sizeof *t->hw);
    if (t->hw == NULL) {
      loom_topo_free(t);
      rc = fail(j, "out of memory");
    }
    for (int k = 0; k < d->n && rc == 0; k++)
      t->hw[t->node_of[d->nodes[k].ranks[0]]] = d->nodes[k].hw;
    if (rc == 0)
      t->net_mbps = loom_topo_net_mbps(t);
  }
  free(node_id);
  return rc;
}

int loom_topo_parse_json(struct loom_topo *t, const char *text, size_t len, const char *name,
                         char *err, size_t errlen) {
  struct jp j = {.p = text,
                 .end = text + len,
                 .line = 1,
                 .name = name ? name : "(topology)",
                 .err = err,
                 .errlen = errlen};
  struct doc d;
  memset(&d, 0, sizeof d);
  memset(t, 0, sizeof *t);
  int rc = parse_doc(&j, &d);
  if (rc == 0)
    rc = build(&j, &d, t);
  doc_free(&d);
  return rc;
}

int loom_topo_read_json(struct loom_topo *t, const char *path, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  int rc = 0;
  while (buf != NULL) {
    len += fread(buf + len, 1, cap - len, f);
    if (len < cap)
      break;
    if (cap >= JSON_MAX_BYTES) {
      snprintf(err, errlen, "%s: larger than %d MiB; not a topology", path, JSON_MAX_BYTES >> 20);
      rc = -1;
      break;
    }
    char *grown = realloc(buf, cap * 2);
    if (grown == NULL) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = grown;
    cap *= 2;
  }
  if (buf == NULL) {
    snprintf(err, errlen, "%s: out of memory reading it", path);
    rc = -1;
  } else if (rc == 0 && ferror(f)) {
    snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
    rc = -1;
  }
  fclose(f);
  if (rc == 0)
    rc = loom_topo_parse_json(t, buf, len, path, err, errlen);
  free(buf);
  return rc;
}
