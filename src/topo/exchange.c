/*
 * exchange.c — the communicator's topology at init: every rank discovers
 * its own node, the records travel in the wire encoding (record.c) through
 * an allgather the caller provides (the bootstrap's), ranks are grouped by host id, and
 * rank 0 may dump the result (LOOM_TOPO_DUMP_FILE).  LOOM_TOPO_FILE
 * replaces discovery with a stored topology.
 */
#include "topo/topo.h"
#include "core/config.h"
#include "core/log.h"
#include "core/timeutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct gathered {
  const struct loom_topo_hw *hw;
};

static const char *hostid_of(int r, void *arg) {
  const struct gathered *g = arg;
  return g->hw[r].hostid;
}

/* Groups the gathered records; each node keeps its lowest rank's record. */
static int group_records(struct loom_topo *t, int nranks, const struct loom_topo_hw *all,
                         char *err, size_t errlen) {
  struct gathered g = {.hw = all};
  if (loom_topo_group(t, nranks, hostid_of, &g) != 0) {
    snprintf(err, errlen, "out of memory grouping %d ranks into nodes", nranks);
    return -1;
  }
  t->hw = malloc((size_t)t->nnodes * sizeof *t->hw);
  if (t->hw == NULL) {
    loom_topo_free(t);
    snprintf(err, errlen, "out of memory for %d node records", t->nnodes);
    return -1;
  }
  for (int k = 0; k < t->nnodes; k++)
    t->hw[k] = all[loom_topo_rank_at(t, k, 0)];
  t->net_mbps = loom_topo_net_mbps(t);
  return 0;
}

/* -2 (the user's file is wrong) on failure. */
static int load_file(struct loom_topo *t, const char *path, int nranks, char *err,
                     size_t errlen) {
  char why[384];
  if (loom_topo_read_json(t, path, why, sizeof why) != 0) {
    snprintf(err, errlen, "LOOM_TOPO_FILE: %s", why);
    return -2;
  }
  if (t->nranks != nranks) {
    snprintf(err, errlen,
             "LOOM_TOPO_FILE=%s describes %d ranks but the communicator has %d; dump one "
             "from a job of %d ranks (LOOM_TOPO_DUMP_FILE) or unset LOOM_TOPO_FILE",
             path, t->nranks, nranks, nranks);
    loom_topo_free(t);
    return -2;
  }
  return 0;
}

/* Rank 0's dump: a diagnostic, so a failure is a warning only.  Written
 * to a temporary name and renamed, so a reader never sees half a file. */
static void dump(const struct loom_topo *t, const char *pattern) {
  char host[LOOM_TOPO_NAME_BYTES] = "", path[4096], tmp[4200];
  gethostname(host, sizeof host - 1);
  host[strcspn(host, ".")] = '\0'; /* short name, as LOOM_DEBUG_FILE's %h */
  loom_log_expand_path(pattern, host, (long)getpid(), path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (f == NULL) {
    LOOM_WARN(LOOM_LOG_INIT, "LOOM_TOPO_DUMP_FILE: cannot create %s: %s", tmp, strerror(errno));
    return;
  }
  int bad = loom_topo_write_json(t, f) != 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    LOOM_WARN(LOOM_LOG_INIT, "LOOM_TOPO_DUMP_FILE: cannot write %s: %s", path,
              strerror(errno));
    unlink(tmp);
    return;
  }
  LOOM_INFO(LOOM_LOG_INIT, "topology written to %s", path);
}

/* Every rank's record into all[]: encoded, allgathered, decoded (and so
 * made safe).  0, or -1 when out of memory or the allgather failed. */
static int exchange_records(struct loom_topo_hw *all, int rank, int nranks,
                            int (*allgather)(void *data, size_t size, void *arg), void *arg) {
  uint8_t *wire = calloc((size_t)nranks, LOOM_TOPO_RECORD_BYTES);
  if (wire == NULL)
    return -1;
  loom_topo_hw_encode(&all[rank], wire + (size_t)rank * LOOM_TOPO_RECORD_BYTES);
  int rc = allgather(wire, LOOM_TOPO_RECORD_BYTES, arg);
  for (int r = 0; r < nranks && rc == 0; r++)
    loom_topo_hw_decode(wire + (size_t)r * LOOM_TOPO_RECORD_BYTES, &all[r]);
  free(wire);
  return rc;
}

int loom_topo_build(struct loom_topo *t, int rank, int nranks, const char *my_hostid,
                    int (*allgather)(void *data, size_t size, void *arg), void *arg,
                    char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    snprintf(err, errlen, "loom_topo_build: rank %d of %d", rank, nranks);
    return -1;
  }
  const char *file = loom_param_str(LOOM_PARAM_TOPO_FILE);
  if (file != NULL && file[0] == '\0')
    file = NULL;
  struct loom_topo_hw *all = calloc((size_t)nranks, sizeof *all);
  if (all == NULL) {
    snprintf(err, errlen, "out of memory for %d topology records", nranks);
    return -1;
  }
  struct loom_topo_hw *mine = &all[rank];
  uint64_t t0 = loom_now_ns();
  if (file == NULL) {
    char why[128];
    loom_topo_discover(mine, my_hostid, why, sizeof why);
  } else if (my_hostid != NULL) { /* only the id travels; the file has the rest */
    snprintf(mine->hostid, sizeof mine->hostid, "%s", my_hostid);
  }
  uint64_t t1 = loom_now_ns();
  /* every rank takes part even when loading a file, so that a file set on
   * some ranks only cannot leave the others waiting in a later exchange */
  if (exchange_records(all, rank, nranks, allgather, arg) != 0) {
    snprintf(err, errlen, "exchanging topology records with the other ranks failed");
    free(all);
    return -1;
  }
  int rc = file != NULL ? load_file(t, file, nranks, err, errlen)
                        : group_records(t, nranks, all, err, errlen);
  free(all);
  if (rc != 0)
    return rc;
  if (file != NULL)
    LOOM_INFO(LOOM_LOG_INIT, "topology from LOOM_TOPO_FILE=%s: %d ranks on %d node(s)", file,
              nranks, t->nnodes);
  else
    LOOM_INFO(LOOM_LOG_INIT, "topology: %d ranks on %d node(s); this node discovered in %.1f ms",
              nranks, t->nnodes, (double)(t1 - t0) / 1e6);
  const char *dump_pattern = loom_param_str(LOOM_PARAM_TOPO_DUMP_FILE);
  if (rank == 0 && dump_pattern != NULL && dump_pattern[0] != '\0')
    dump(t, dump_pattern);
  return 0;
}
