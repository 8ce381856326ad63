/*
 * loom-topo — shows the machine Loom sees: this node's cores, NUMA
 * domains, caches, memory and NICs, or a topology a job dumped with
 * LOOM_TOPO_DUMP_FILE (every node and the ranks on it); --json prints the
 * same as JSON, in the format LOOM_TOPO_FILE loads.
 */
#include "config.h"
#include "topo/topo.h"
#include "core/timeutil.h"
#include "module_loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
  fprintf(out,
          "usage: loom-topo [--json] [--no-ofi] [FILE.json]\n"
          "Without FILE: discovers this node (cores, NUMA, caches, memory, NICs) and\n"
          "prints it as a tree.  With FILE (written by LOOM_TOPO_DUMP_FILE): prints every\n"
          "node of that job and the ranks on it.\n"
          "  --json    print JSON (the format LOOM_TOPO_FILE loads) instead of the tree\n"
          "  --no-ofi  skip listing libfabric providers (loads the ofi module and\n"
          "            libfabric; fi_getinfo took 0.1-0.3 s here)\n"
          "  -h        this help\n");
}

/* 33554432 -> "32 MiB"; 0 -> "unknown". */
static const char *bytes_text(int64_t v, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (v <= 0)
    return "unknown";
  double x = (double)v;
  int u = 0;
  while (x >= 1024 && u < 4) {
    x /= 1024;
    u++;
  }
  if (x == (double)(int64_t)x)
    snprintf(buf, len, "%lld %s", (long long)x, units[u]);
  else
    snprintf(buf, len, "%.1f %s", x, units[u]);
  return buf;
}

/* "2 cores", "1 socket", "? NUMA nodes" (0 = unknown). */
static const char *count_text(int32_t v, const char *what, char *buf, size_t len) {
  if (v <= 0)
    snprintf(buf, len, "? %ss", what);
  else
    snprintf(buf, len, "%d %s%s", (int)v, what, v == 1 ? "" : "s");
  return buf;
}

static const char *speed_text(int32_t mbps, char *buf, size_t len) {
  if (mbps <= 0)
    return "speed unknown";
  if (mbps % 1000 == 0)
    snprintf(buf, len, "%d Gb/s", (int)(mbps / 1000));
  else
    snprintf(buf, len, "%d Mb/s", (int)mbps);
  return buf;
}

static int is_provider(const struct loom_topo_nic *n) { return strcmp(n->kind, "ofi") == 0; }

/* The entries of one heading: NICs (interfaces and RDMA devices) or
 * libfabric's providers. */
static void print_entries(const struct loom_topo_hw *hw, int providers, const char *indent) {
  int left = 0;
  for (int i = 0; i < hw->nnics; i++)
    left += is_provider(&hw->nics[i]) == providers;
  for (int i = 0; i < hw->nnics; i++) {
    const struct loom_topo_nic *n = &hw->nics[i];
    if (is_provider(n) != providers)
      continue;
    char numa[24] = "", speed[40];
    if (n->numa >= 0)
      snprintf(numa, sizeof numa, ", NUMA %d", (int)n->numa);
    printf("%s%s %-12s %-8s %-26s %s%s\n", indent, --left > 0 ? "|-" : "`-", n->name, n->kind,
           n->addr[0] ? n->addr : "-", speed_text(n->speed_mbps, speed, sizeof speed), numa);
  }
}

static void print_hw(const struct loom_topo_hw *hw, const char *indent) {
  char a[40], b[40], c[40], d[40], sub[64];
  printf("%s|- %s, %s, %s, %s\n", indent, count_text(hw->sockets, "socket", a, sizeof a),
         count_text(hw->numa_nodes, "NUMA node", b, sizeof b),
         count_text(hw->cores, "core", c, sizeof c),
         count_text(hw->pus, "hardware thread", d, sizeof d));
  printf("%s|- last-level cache %s, memory %s\n", indent, bytes_text(hw->l3_bytes, a, sizeof a),
         bytes_text(hw->memory_bytes, b, sizeof b));
  int providers = 0;
  for (int i = 0; i < hw->nnics; i++)
    providers += is_provider(&hw->nics[i]);
  printf("%s%s NICs: %d\n", indent, providers ? "|-" : "`-", (int)hw->nnics - providers);
  snprintf(sub, sizeof sub, "%s%s", indent, providers ? "|  " : "   ");
  print_entries(hw, 0, sub);
  if (providers == 0)
    return;
  printf("%s`- libfabric providers: %d\n", indent, providers);
  snprintf(sub, sizeof sub, "%s   ", indent);
  print_entries(hw, 1, sub);
}

static void print_ranks(const struct loom_topo *t, int k) {
  int n = loom_topo_node_size(t, k);
  printf("ranks");
  /* runs of consecutive ranks as a-b */
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && loom_topo_rank_at(t, k, j + 1) == loom_topo_rank_at(t, k, j) + 1)
      j++;
    if (j > i)
      printf("%s%d-%d", i ? "," : " ", loom_topo_rank_at(t, k, i), loom_topo_rank_at(t, k, j));
    else
      printf("%s%d", i ? "," : " ", loom_topo_rank_at(t, k, i));
    i = j + 1;
  }
}

static void print_topo(const struct loom_topo *t) {
  printf("%d rank%s on %d node%s%s\n", t->nranks, t->nranks == 1 ? "" : "s", t->nnodes,
         t->nnodes == 1 ? "" : "s",
         loom_topo_uniform(t) ? "" : " (not the same number of ranks on every node)");
  for (int k = 0; k < t->nnodes; k++) {
    const struct loom_topo_hw *hw = t->hw ? &t->hw[k] : NULL;
    printf("node %d: %s (", k, hw && hw->hostname[0] ? hw->hostname : "?");
    print_ranks(t, k);
    printf(")\n");
    if (hw != NULL) {
      printf("  |- host id %s\n", hw->hostid);
      print_hw(hw, "  ");
    }
  }
}

/* This node's hardware, then (unless ofi is 0) libfabric's providers
 * through the ofi transport module, which loads libfabric; note says how
 * that went. */
static int discover_here(struct loom_topo *t, int ofi, double *ms, char *note, size_t len) {
  char err[512];
  int zero = 0;
  if (loom_topo_from_nodes(t, 1, &zero) != 0 || (t->hw = calloc(1, sizeof *t->hw)) == NULL) {
    fprintf(stderr, "loom-topo: out of memory\n");
    return -1;
  }
  uint64_t t0 = loom_now_ns();
  if (loom_topo_discover(t->hw, NULL, err, sizeof err) != 0) {
    fprintf(stderr, "loom-topo: %s\n", err);
    return -1;
  }
  const struct loom_module_info *m = loom_module_find("ofi");
  if (!m->built) {
    snprintf(note, len, "libfabric providers: not built with libfabric");
  } else if (!ofi) {
    snprintf(note, len, "libfabric providers: not listed (--no-ofi)");
  } else {
    int n = loom_module_list_devices("ofi", t->hw, err, sizeof err);
    if (n < 0)
      snprintf(note, len, "libfabric providers: not listed: %s", err);
    else
      snprintf(note, len, "libfabric providers: %d, listed by %s", n, m->file);
  }
  *ms = (double)(loom_now_ns() - t0) / 1e6;
  return 0;
}

static int show(struct loom_topo *t, int json, const char *file, double ms, const char *note) {
  if (json) {
    if (loom_topo_write_json(t, stdout) != 0) {
      fprintf(stderr, "loom-topo: writing the JSON failed\n");
      return 1;
    }
  } else if (file != NULL) {
    print_topo(t);
  } else {
    const struct loom_topo_hw *hw = t->hw;
    printf("node %s (host id %s)\n", hw->hostname[0] ? hw->hostname : "?", hw->hostid);
    print_hw(hw, "");
    printf("(discovered in %.1f ms; %s; built with hwloc %s)\n", ms, note,
#ifdef LOOM_HAVE_HWLOC
           "yes"
#else
           "no"
#endif
    );
  }
  return 0;
}

int main(int argc, char **argv) {
  int json = 0, ofi = 1;
  const char *file = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--no-ofi") == 0) {
      ofi = 0;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (argv[i][0] != '-' && file == NULL) {
      file = argv[i];
    } else {
      usage(stderr);
      return 2;
    }
  }
  struct loom_topo t;
  char err[512], note[768] = "";
  double ms = 0;
  if (file != NULL && loom_topo_read_json(&t, file, err, sizeof err) != 0) {
    fprintf(stderr, "loom-topo: %s\n", err);
    return 1;
  }
  if (file == NULL && discover_here(&t, ofi, &ms, note, sizeof note) != 0)
    return 1;
  int rc = show(&t, json, file, ms, note);
  loom_topo_free(&t);
  return rc;
}
