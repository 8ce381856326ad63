/*
 * topo.h — the shape of the machine a communicator runs on: which ranks
 * share a node (and so shared memory), and what each node has (cores,
 * NUMA domains, caches, NICs and their speeds).  Schedules and the tuner
 * read it; loom-topo prints it.
 *
 * Pieces:
 *  - group.c: nodes from the ranks' host ids (pure; LOOM_HOSTID overrides a
 *    rank's id, so tests make several nodes on one machine);
 *  - discover.c: this node's hardware, through hwloc (CPU/NUMA/cache; I/O
 *    devices are left out: they are slow to list),
 *    getifaddrs + sysfs (IP interfaces and speeds), libibverbs and
 *    libfabric (RDMA devices, providers);
 *  - json.c: the whole topology as JSON (LOOM_TOPO_DUMP_FILE writes it,
 *    LOOM_TOPO_FILE loads one instead of discovering);
 *  - exchange.c: each rank discovers its own node and the records travel
 *    through the bootstrap allgather at init (called from src/api/init.c
 *    with a callback, so topo does not depend on the bootstrap).
 */
#ifndef LOOM_TOPO_TOPO_H
#define LOOM_TOPO_TOPO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LOOM_TOPO_NAME_BYTES 64
#define LOOM_TOPO_MAX_NICS 16

/* A network interface or device one node can reach other nodes through. */
struct loom_topo_nic {
  char name[32];            /* "eth0", "mlx5_0", "tcp;ofi_rxm" */
  char kind[16];            /* "ip", "ibverbs", "ofi" */
  char addr[64];            /* IPv4/IPv6 address text, GID, or "" */
  int32_t speed_mbps;       /* link speed; 0 = unknown */
  int32_t numa;             /* NUMA node it hangs off; -1 = unknown */
};

/* One node's hardware, as discovered on it (fixed size: it travels through
 * the bootstrap allgather as bytes, the same on every rank's build). */
struct loom_topo_hw {
  char hostid[LOOM_TOPO_NAME_BYTES];   /* what groups ranks into nodes */
  char hostname[LOOM_TOPO_NAME_BYTES];
  int32_t cores, pus;                  /* physical cores, hardware threads */
  int32_t numa_nodes, sockets;
  int64_t l3_bytes;                    /* largest last-level cache; 0 = unknown */
  int64_t memory_bytes;                /* 0 = unknown */
  int32_t nnics;
  int32_t pad;
  struct loom_topo_nic nics[LOOM_TOPO_MAX_NICS];
};

struct loom_topo {
  int nranks, nnodes;
  int *node_of;    /* per rank: its node, nodes numbered in order of their lowest rank */
  int *local_of;   /* per rank: its index among its node's ranks (ascending rank order) */
  int *node_first; /* per node: its first entry in by_node; node_first[nnodes] = nranks */
  int *by_node;    /* the ranks grouped by node: node 0's ranks ascending, then node 1's... */
  struct loom_topo_hw *hw; /* per node (NULL when only the grouping is known) */
  int net_mbps; /* the slowest known NIC speed of any node (0: none known); set with hw */
  int max_node_size, min_node_size; /* set with the grouping: the planner asks per call */
};
/* The slowest known NIC speed among t's nodes (0: none known). */
int loom_topo_net_mbps(const struct loom_topo *t);

/* ---- group.c ---- */

/* Groups nranks ranks into nodes by host id (hostid(r, arg) returns rank
 * r's id; equal strings = same node).  Fills t (arrays malloc'd, hw NULL);
 * 0 on success, -1 out of memory. */
int loom_topo_group(struct loom_topo *t, int nranks, const char *(*hostid)(int r, void *arg),
                    void *arg);
/* Groups from an explicit node per rank (node ids need not be dense; used
 * by loom-sim, unit tests and LOOM_TOPO_FILE).  0 on success, -1 out of
 * memory. */
int loom_topo_from_nodes(struct loom_topo *t, int nranks, const int *node_id);
/* Ranks on `node`. */
static inline int loom_topo_node_size(const struct loom_topo *t, int node) {
  return t->node_first[node + 1] - t->node_first[node];
}
/* The local-th rank of `node`. */
static inline int loom_topo_rank_at(const struct loom_topo *t, int node, int local) {
  return t->by_node[t->node_first[node] + local];
}
/* Whether every node has the same number of ranks (O(1)). */
static inline int loom_topo_uniform(const struct loom_topo *t) {
  return t->max_node_size == t->min_node_size;
}
/* Frees what loom_topo_group / _from_nodes / the loaders allocated. */
void loom_topo_free(struct loom_topo *t);

/* ---- discover.c ---- */

/* Fills *hw with this node's hardware: hostid (NULL = this machine's
 * default identity, as loom_topo_local_hostid), hostname, cores, PUs, NUMA
 * nodes, sockets, the largest last-level cache and memory (hwloc when built
 * with it, else sysconf and /sys), then the NICs: IP interfaces that are up
 * (getifaddrs; loopback only when nothing else is up) and RDMA devices
 * (sysfs, loom_topo_list_rdma); at most LOOM_TOPO_MAX_NICS.  No RDMA or
 * fabric library is loaded: libfabric's providers (kind "ofi") are listed
 * by the ofi transport module, for loom-topo only
 * (loom_module_list_devices in transports/module_loader.h).  A piece that
 * cannot be found stays 0 (NIC numa -1); nothing of that is an error.
 * Returns 0; -1 only for a NULL hw (err says so).  Takes a few
 * milliseconds. */
int loom_topo_discover(struct loom_topo_hw *hw, const char *hostid, char *err, size_t errlen);
/* Appends the RDMA devices under root (/sys/class/infiniband; another
 * directory in tests), kind "ibverbs", sorted by name: each one's first
 * active port (else its lowest) gives the speed (ports/N/rate, "100 Gb/sec
 * (4X EDR)") and the address (ports/N/gids/0); device/numa_node the NUMA
 * node.  Returns how many were added. */
int loom_topo_list_rdma(struct loom_topo_hw *hw, const char *root);
/* This machine's default node identity, the one the bootstrap uses:
 * "hostname/boot_id" (hostname cut to 26 bytes), or LOOM_HOSTID when set. */
void loom_topo_local_hostid(char *out, size_t len);
/* Makes a record that came from elsewhere (another rank, a file) safe to
 * read: every string NUL-terminated, nnics within [0, LOOM_TOPO_MAX_NICS],
 * unused NIC slots and pad zeroed, negative counts, sizes and NIC speeds 0
 * (unknown) and NIC NUMA nodes below -1 -1: what the JSON reader accepts,
 * so a topology dump always reads back (fuzz_topo_record found a peer's
 * cores = -1 written into a dump that LOOM_TOPO_FILE then refused). */
void loom_topo_hw_sanitize(struct loom_topo_hw *hw);

/* ---- record.c: a record as it travels between ranks ---- */
#define LOOM_TOPO_RECORD_BYTES 2084
/* Field by field, big-endian, strings NUL-padded to their fields. */
void loom_topo_hw_encode(const struct loom_topo_hw *hw, uint8_t out[LOOM_TOPO_RECORD_BYTES]);
/* The record's fields, made safe (loom_topo_hw_sanitize) whatever the bytes. */
void loom_topo_hw_decode(const uint8_t in[LOOM_TOPO_RECORD_BYTES], struct loom_topo_hw *hw);

/* ---- json.c ---- */

/* Writes t as JSON (the format is described at the top of json.c): rank
 * count, then per node its ranks and, when t->hw is set, its hardware.
 * 0 on success, -1 when writing failed. */
int loom_topo_write_json(const struct loom_topo *t, FILE *f);
/* Reads a file written by loom_topo_write_json into t (as loom_topo_from_nodes
 * would group it, hw filled or NULL as in the file).  -1 with "PATH:LINE:
 * what is wrong" in err on any deviation from the format. */
int loom_topo_read_json(struct loom_topo *t, const char *path, char *err, size_t errlen);
/* The same from text in memory; `name` is used in messages. */
int loom_topo_parse_json(struct loom_topo *t, const char *text, size_t len, const char *name,
                         char *err, size_t errlen);

/* ---- exchange.c ---- */

/* The communicator's topology at init, on every rank: discovers this node
 * (hostid my_hostid), allgathers the hw records (allgather(data, size, arg)
 * fills data's nranks blocks of size bytes, this rank's at rank*size, and
 * returns 0, or nonzero on failure), groups the ranks by hostid and keeps
 * one record per node (its lowest rank's).  With LOOM_TOPO_FILE set the
 * topology is loaded from that file instead (after the same allgather, so
 * every rank takes part either way); its rank count must equal nranks.
 * Rank 0 then writes LOOM_TOPO_DUMP_FILE (%h = host, %p = pid) when set; a
 * dump that cannot be written is a warning, not an error.  0 on success;
 * with err set and t left empty: -1 when the exchange failed or memory ran
 * out, -2 when LOOM_TOPO_FILE cannot be used (unreadable, malformed, or
 * another rank count: the user's error, loomInvalidArgument). */
int loom_topo_build(struct loom_topo *t, int rank, int nranks, const char *my_hostid,
                    int (*allgather)(void *data, size_t size, void *arg), void *arg,
                    char *err, size_t errlen);

#endif
