/*
 * group.c — nodes from host ids: which ranks share a machine.
 */
#include "topo/topo.h"

#include <stdlib.h>
#include <string.h>

static int alloc_arrays(struct loom_topo *t, int nranks) {
  memset(t, 0, sizeof *t);
  size_t n = (size_t)nranks;
  t->node_of = malloc(n * sizeof(int));
  t->local_of = malloc(n * sizeof(int));
  t->node_first = malloc((n + 1) * sizeof(int));
  t->by_node = malloc(n * sizeof(int));
  if (t->node_of == NULL || t->local_of == NULL || t->node_first == NULL ||
      t->by_node == NULL) {
    loom_topo_free(t);
    return -1;
  }
  t->nranks = nranks;
  return 0;
}

/* From node_of[] (dense ids, numbered by lowest rank) fill the rest. */
static void fill_from_node_of(struct loom_topo *t) {
  int n = t->nranks, m = t->nnodes;
  for (int k = 0; k <= m; k++)
    t->node_first[k] = 0;
  for (int r = 0; r < n; r++)
    t->node_first[t->node_of[r] + 1]++;
  for (int k = 0; k < m; k++)
    t->node_first[k + 1] += t->node_first[k];
  /* ranks ascending within a node: a stable placement in rank order */
  int *fill = t->local_of; /* borrowed as a per-node cursor, then overwritten */
  for (int k = 0; k < m; k++)
    fill[k] = 0;
  for (int r = 0; r < n; r++) {
    int k = t->node_of[r];
    t->by_node[t->node_first[k] + fill[k]++] = r;
  }
  for (int k = 0; k < m; k++)
    for (int i = t->node_first[k]; i < t->node_first[k + 1]; i++)
      t->local_of[t->by_node[i]] = i - t->node_first[k];
  t->max_node_size = 0;
  t->min_node_size = n;
  for (int k = 0; k < m; k++) {
    int size = t->node_first[k + 1] - t->node_first[k];
    t->max_node_size = size > t->max_node_size ? size : t->max_node_size;
    t->min_node_size = size < t->min_node_size ? size : t->min_node_size;
  }
}

/* Orders ranks by a key, ties by rank. */
struct rank_key {
  int (*cmp)(int a, int b, const void *arg); /* key order of ranks a and b */
  const void *arg;
};

static int before(int a, int b, const struct rank_key *k) {
  int c = k->cmp(a, b, k->arg);
  return c < 0 || (c == 0 && a < b);
}

/* qsort_r is a GNU extension: a small merge sort keeps this portable. */
static void sort_ranks(int *v, int *tmp, int n, const struct rank_key *k) {
  if (n < 2)
    return;
  int m = n / 2;
  sort_ranks(v, tmp, m, k);
  sort_ranks(v + m, tmp, n - m, k);
  int i = 0, j = m, o = 0;
  while (i < m && j < n)
    tmp[o++] = before(v[j], v[i], k) ? v[j++] : v[i++];
  while (i < m)
    tmp[o++] = v[i++];
  while (j < n)
    tmp[o++] = v[j++];
  memcpy(v, tmp, (size_t)n * sizeof(int));
}

/* Numbers the groups of equal keys by their lowest rank (O(n log n)). */
static int group_by_key(struct loom_topo *t, int nranks, const struct rank_key *k) {
  if (alloc_arrays(t, nranks) != 0)
    return -1;
  int *order = malloc((size_t)nranks * 2 * sizeof(int));
  if (order == NULL) {
    loom_topo_free(t);
    return -1;
  }
  for (int r = 0; r < nranks; r++)
    order[r] = r;
  sort_ranks(order, order + nranks, nranks, k);
  /* sorted by key, then rank: each run's first entry is its lowest rank */
  int *lowest = order + nranks;
  for (int i = 0; i < nranks;) {
    int j = i + 1;
    while (j < nranks && k->cmp(order[j], order[i], k->arg) == 0)
      j++;
    for (int q = i; q < j; q++)
      lowest[order[q]] = order[i];
    i = j;
  }
  for (int r = 0; r < nranks; r++) /* lowest[r] <= r: numbered already */
    t->node_of[r] = lowest[r] == r ? t->nnodes++ : t->node_of[lowest[r]];
  free(order);
  fill_from_node_of(t);
  return 0;
}

struct hostid_view {
  const char *(*hostid)(int r, void *arg);
  void *arg;
};

static int cmp_hostid(int a, int b, const void *v) {
  const struct hostid_view *h = v;
  return strcmp(h->hostid(a, h->arg), h->hostid(b, h->arg));
}

static int cmp_node_id(int a, int b, const void *v) {
  const int *id = v;
  return (id[a] > id[b]) - (id[a] < id[b]);
}

int loom_topo_from_nodes(struct loom_topo *t, int nranks, const int *node_id) {
  struct rank_key k = {.cmp = cmp_node_id, .arg = node_id};
  return group_by_key(t, nranks, &k);
}

int loom_topo_group(struct loom_topo *t, int nranks, const char *(*hostid)(int r, void *arg),
                    void *arg) {
  struct hostid_view h = {.hostid = hostid, .arg = arg};
  struct rank_key k = {.cmp = cmp_hostid, .arg = &h};
  return group_by_key(t, nranks, &k);
}

int loom_topo_net_mbps(const struct loom_topo *t) {
  int slowest = 0;
  for (int k = 0; t->hw != NULL && k < t->nnodes; k++)
    for (int i = 0; i < t->hw[k].nnics && i < LOOM_TOPO_MAX_NICS; i++) {
      int mbps = t->hw[k].nics[i].speed_mbps;
      if (mbps > 0 && (slowest == 0 || mbps < slowest))
        slowest = mbps;
    }
  return slowest;
}

void loom_topo_free(struct loom_topo *t) {
  free(t->node_of);
  free(t->local_of);
  free(t->node_first);
  free(t->by_node);
  free(t->hw);
  memset(t, 0, sizeof *t);
}
