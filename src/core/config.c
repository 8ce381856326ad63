/*
 * config.c — the table of every LOOM_* variable and its parsers.
 */
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct loom_param_info params[LOOM_PARAM_COUNT] = {
    [LOOM_PARAM_DEBUG] =
        {.name = "LOOM_DEBUG",
         .type = LOOM_PARAM_T_STRING,
         .default_value = "WARN",
         .min = 0,
         .max = 0,
         .help = "log level: NONE, WARN, INFO or TRACE"},
    [LOOM_PARAM_DEBUG_SUBSYS] =
        {.name = "LOOM_DEBUG_SUBSYS",
         .type = LOOM_PARAM_T_STRING,
         .default_value = "ALL",
         .min = 0,
         .max = 0,
         .help = "comma list of subsystems to log (INIT, BOOTSTRAP, NET, COLL, "
                 "ENV, ALL); ^ first excludes them"},
    [LOOM_PARAM_DEBUG_FILE] =
        {.name = "LOOM_DEBUG_FILE",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "write the log to this file instead of stderr; %h = host, %p = pid"},
    [LOOM_PARAM_COMM_ID] =
        {.name = "LOOM_COMM_ID",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "host:port of the bootstrap root shared by all ranks (set by "
                 "loomrun); rank 0 hosts it"},
    [LOOM_PARAM_COMM_SECRET] =
        {.name = "LOOM_COMM_SECRET",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "the job's secret under LOOM_COMM_ID (loomrun sets a random one per job; any "
                 "launcher may): every bootstrap and TCP connection proves it with an HMAC, never "
                 "sending it; unset, the secret derives from the address (docs/security.md)"},
    [LOOM_PARAM_RANK] =
        {.name = "LOOM_RANK",
         .type = LOOM_PARAM_T_INT,
         .default_value = NULL,
         .min = 0,
         .max = INT_MAX,
         .help = "this process's rank (set by loomrun)"},
    [LOOM_PARAM_NRANKS] =
        {.name = "LOOM_NRANKS",
         .type = LOOM_PARAM_T_INT,
         .default_value = NULL,
         .min = 1,
         .max = INT_MAX,
         .help = "number of ranks in the job (set by loomrun)"},
    [LOOM_PARAM_LOCAL_RANK] =
        {.name = "LOOM_LOCAL_RANK",
         .type = LOOM_PARAM_T_INT,
         .default_value = NULL,
         .min = 0,
         .max = INT_MAX,
         .help = "this process's rank on its node (set by loomrun)"},
    [LOOM_PARAM_SOCKET_IFNAME] =
        {.name = "LOOM_SOCKET_IFNAME",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "network interfaces to use: prefixes separated by commas, ^ to "
                 "exclude, = for exact names (default: any but lo and docker, then "
                 "lo)"},
    [LOOM_PARAM_SOCKET_FAMILY] =
        {.name = "LOOM_SOCKET_FAMILY",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "AF_INET or AF_INET6 to restrict interface addresses to one family"},
    [LOOM_PARAM_PORT_RANGE] =
        {.name = "LOOM_PORT_RANGE",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "lo-hi: every listening socket binds a port in this range (next "
                 "port on EADDRINUSE); default: any port the kernel gives"},
    [LOOM_PARAM_BOOTSTRAP_TIMEOUT] =
        {.name = "LOOM_BOOTSTRAP_TIMEOUT",
         .type = LOOM_PARAM_T_INT,
         .default_value = "120",
         .min = 1,
         .max = 86400,
         .help = "seconds every rendezvous, bootstrap allgather and barrier may "
                 "wait before failing and naming the ranks that did not arrive"},
    [LOOM_PARAM_TIMEOUT_MS] =
        {.name = "LOOM_TIMEOUT_MS",
         .type = LOOM_PARAM_T_INT,
         .default_value = "300000",
         .min = 0,
         .max = INT_MAX,
         .help = "default milliseconds a collective waits for a peer "
                 "(loomConfig_t.timeout_ms overrides); 0 = for ever"},
    [LOOM_PARAM_SOCKET_NSOCKS] =
        {.name = "LOOM_SOCKET_NSOCKS",
         .type = LOOM_PARAM_T_INT,
         .default_value = "2",
         .min = 1,
         .max = 16,
         .help = "TCP sockets per peer; large messages are striped across them"},
    [LOOM_PARAM_CONNECT] =
        {.name = "LOOM_CONNECT",
         .type = LOOM_PARAM_T_STRING,
         .default_value = "lazy",
         .min = 0,
         .max = 0,
         .help = "when TCP connections are made: lazy (default) connects a peer the first time "
                 "a message to or from it is posted, so a rank holds sockets only to the peers "
                 "its schedules use; eager connects every pair at init.  Shared memory, ofi, ib "
                 "and plugins connect at init either way"},
    [LOOM_PARAM_CHUNK_BYTES] =
        {.name = "LOOM_CHUNK_BYTES",
         .type = LOOM_PARAM_T_SIZE,
         .default_value = "512K",
         .min = 4096,
         .max = 1 << 30,
         .help = "pipeline slice: collectives move and reduce data in pieces of "
                 "at most this many bytes"},
    [LOOM_PARAM_SPIN_US] =
        {.name = "LOOM_SPIN_US",
         .type = LOOM_PARAM_T_INT,
         .default_value = "50",
         .min = 0,
         .max = 1000000,
         .help = "microseconds to poll without sleeping before waiting in the "
                 "kernel, both for network progress and for an idle stream's "
                 "next task (lower it when ranks outnumber cores); a wait over "
                 "shared memory after one that slept briefly polls for twice that "
                 "sleep if longer; 0: never poll"},
    [LOOM_PARAM_BUCKET_BYTES] =
        {.name = "LOOM_BUCKET_BYTES",
         .type = LOOM_PARAM_T_SIZE,
         .default_value = "4M",
         .min = 0,
         .max = 1 << 30,
         .help = "inside loomGroupStart/End, consecutive all-reduces (and "
                 "all-gathers) of one communicator, type and op are fused into one "
                 "call of up to this many bytes; 0 disables fusion"},
    [LOOM_PARAM_SHM_DISABLE] =
        {.name = "LOOM_SHM_DISABLE",
         .type = LOOM_PARAM_T_INT,
         .default_value = "0",
         .min = 0,
         .max = 1,
         .help = "1: ranks on one host talk over TCP instead of shared memory"},
    [LOOM_PARAM_SHM_CMA] =
        {.name = "LOOM_SHM_CMA",
         .type = LOOM_PARAM_T_INT,
         .default_value = "0",
         .min = 0,
         .max = 1,
         .help = "1: over shared memory, messages of 64 KiB and more are read straight "
                 "from the sender's memory (process_vm_readv, one copy) where the kernel "
                 "allows it; 0 (default, faster on the machines measured): copy through "
                 "the FIFO (two copies)"},
    [LOOM_PARAM_SHM_DIRECT_REDUCE] =
        {.name = "LOOM_SHM_DIRECT_REDUCE",
         .type = LOOM_PARAM_T_INT,
         .default_value = "1",
         .min = 0,
         .max = 1,
         .help = "1 (default): data received over shared memory for a reduction is "
                 "reduced straight from the FIFO; 0: copied to a staging slot first "
                 "(one more copy; for comparison)"},
    [LOOM_PARAM_SHM_NODE_BYTES] =
        {.name = "LOOM_SHM_NODE_BYTES",
         .type = LOOM_PARAM_T_SIZE,
         .default_value = "1G",
         .min = 64 << 10,
         .max = (int64_t)1 << 40,
         .help = "the most all shared-memory FIFOs of one host may take together (each "
                 "of n local ranks holds n of them); also at most half of /dev/shm's "
                 "size. Many local ranks get fewer and smaller cells to fit; every rank "
                 "of a host must have the same value"},
    [LOOM_PARAM_ALGO] =
        {.name = "LOOM_ALGO",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "limit the algorithms the tuner may pick, NCCL_ALGO's syntax: items separated "
                 "by ';', each [COLL:]LIST or [COLL:]^LIST (excluded), LIST comma-separated, e.g. "
                 "\"tree,ring\" or \"allreduce:tree,ring;broadcast:chain\"; algorithms: ring, rd "
                 "(recursive doubling), rhd (halving-doubling), oneshot, tree (double binary tree "
                 "for allreduce, binomial for broadcast/reduce), chain, hier (hierarchical); when "
                 "none allowed can run here the tuner chooses (WARN at init)"},
    [LOOM_PARAM_PROTO] =
        {.name = "LOOM_PROTO",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "limit the protocols the tuner may pick, NCCL_PROTO's syntax (as LOOM_ALGO): "
                 "LL (16 KiB pipeline slices: data forwarded down chains and trees moves on "
                 "sooner) or Simple (LOOM_CHUNK_BYTES slices: fewest messages), e.g. \"LL\", "
                 "\"^LL\", \"broadcast:LL\"; the tuner uses LL only for chains and trees whose "
                 "ranks each have a core"},
    [LOOM_PARAM_NCHANNELS] =
        {.name = "LOOM_NCHANNELS",
         .type = LOOM_PARAM_T_INT,
         .default_value = "1",
         .min = 1,
         .max = 4 /* LOOM_MAX_CHANNELS */,
         .help = "rings a ring all-reduce runs on, each over its part of the data and in its "
                 "own order (each node's ranks rotated, every other ring backwards), so that "
                 "several NICs or links per node are used; 1 (default): one ring, fastest on "
                 "the machines measured (one NIC, 2 cores)"},
    [LOOM_PARAM_HOSTID] =
        {.name = "LOOM_HOSTID",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "node identity (at most 63 bytes): ranks with the same value are one node "
                 "(shared memory between them, the network to the others); default: hostname "
                 "and boot id.  Lets tests make several nodes on one machine"},
    [LOOM_PARAM_TOPO_DUMP_FILE] =
        {.name = "LOOM_TOPO_DUMP_FILE",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "rank 0 writes the communicator's topology (nodes, their ranks, cores, "
                 "caches, memory, NICs) to this file as JSON at init; %h = host, %p = pid. "
                 "loom-topo FILE prints it, LOOM_TOPO_FILE loads it"},
    [LOOM_PARAM_TOPO_FILE] =
        {.name = "LOOM_TOPO_FILE",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "use the topology in this JSON file (as LOOM_TOPO_DUMP_FILE writes) instead of "
                 "discovering it; its rank count must equal the communicator's.  Shapes "
                 "schedules and tuning only: which ranks share memory still follows the host "
                 "ids"},
    [LOOM_PARAM_TUNE_FILE] =
        {.name = "LOOM_TUNE_FILE",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "measured algorithm choices (as `loom-perf --autotune FILE` writes them) that "
                 "take precedence over the tuner's rules for the matching rank and node counts; "
                 "LOOM_ALGO still limits them; a bad file fails init naming the line"},
    [LOOM_PARAM_NET] =
        {.name = "LOOM_NET",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "the transport between nodes: tcp, ofi (libfabric) or ib (ibverbs); an "
                 "unavailable one fails init saying why.  Default: ib where an RDMA device "
                 "exists, else ofi where libfabric's provider is a fabric (not tcp, sockets, "
                 "udp or shm), else tcp.  Ranks of one node still use shared memory "
                 "(LOOM_SHM_DISABLE=1: not)"},
    [LOOM_PARAM_NET_PLUGIN] =
        {.name = "LOOM_NET_PLUGIN",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "load the transport between nodes from libloom-net-NAME.so (the dlopen "
                 "search path, then Loom's pkglibdir); it must export loom_net_plugin_v<N> "
                 "for this Loom's transport API version (docs/transports.md)"},
    [LOOM_PARAM_MODULE_PATH] =
        {.name = "LOOM_MODULE_PATH",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "directories (':'-separated) holding Loom's transport modules "
                 "libloom-net-ofi.so and libloom-net-ib.so, searched instead of Loom's pkglibdir "
                 "(make check points it at the build tree); a module is loaded only when its "
                 "transport is chosen (loom-info lists them)"},
    [LOOM_PARAM_OFI_PROVIDER] =
        {.name = "LOOM_OFI_PROVIDER",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "libfabric providers the ofi transport may use, in order of preference, "
                 "comma-separated, e.g. \"efa\", \"tcp\" (matches tcp;ofi_rxm), \"shm\"; "
                 "default: the best found (a fabric, then tcp;ofi_rxm), named in the INFO log"},
    [LOOM_PARAM_OFI_DOMAIN] =
        {.name = "LOOM_OFI_DOMAIN",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "libfabric domain for the ofi transport (a NIC or interface name, e.g. "
                 "\"mlx5_0\", \"eth0\"); default: for socket providers the interface of "
                 "Loom's own address (LOOM_SOCKET_IFNAME), else the provider's first"},
    [LOOM_PARAM_IB_HCA] =
        {.name = "LOOM_IB_HCA",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .min = 0,
         .max = 0,
         .help = "RDMA ports the ibverbs transport may use, NCCL_IB_HCA's syntax: device[:port] "
                 "items separated by commas, names as prefixes unless the list starts with =, "
                 "^ first to exclude them, e.g. \"mlx5_0:1\", \"=mlx5_1\", \"^mlx5_2\"; default: the "
                 "first active port with an IP address rdma_cm can use"},
    [LOOM_PARAM_IB_GID_INDEX] =
        {.name = "LOOM_IB_GID_INDEX",
         .type = LOOM_PARAM_T_INT,
         .default_value = "-1",
         .min = -1,
         .max = 1023,
         .help = "RoCE: the GID table entry whose IP address the ibverbs transport binds (so its "
                 "interface and VLAN; rdma_cm's default RoCE mode picks v1 or v2); -1 (default): "
                 "Loom's own address when it is on the RDMA port, else the port's first address"},
    [LOOM_PARAM_IB_TIMEOUT] =
        {.name = "LOOM_IB_TIMEOUT",
         .type = LOOM_PARAM_T_INT,
         .default_value = "20",
         .min = 1,
         .max = 31,
         .help = "ibverbs queue pairs' ACK timeout exponent: 4.096 us x 2^value per try (20: "
                 "4.3 s), as NCCL_IB_TIMEOUT"},
    [LOOM_PARAM_IB_RETRY_CNT] =
        {.name = "LOOM_IB_RETRY_CNT",
         .type = LOOM_PARAM_T_INT,
         .default_value = "7",
         .min = 0,
         .max = 7,
         .help = "ibverbs queue pairs' retransmissions before a connection fails (0..7), as "
                 "NCCL_IB_RETRY_CNT"},
    [LOOM_PARAM_SIM_DELAY_US] =
        {.name = "LOOM_SIM_DELAY_US",
         .type = LOOM_PARAM_T_INT,
         .default_value = "5",
         .min = 0,
         .max = 1000000,
         .help = "the simulated device (loomDeviceSim) waits a random 0..N microseconds "
                 "before each copy or kernel on its streams, so that work missing an "
                 "ordering shows as wrong data in tests"},
    [LOOM_PARAM_DEVICE_IPC] =
        {.name = "LOOM_DEVICE_IPC",
         .type = LOOM_PARAM_T_INT,
         .default_value = "1",
         .min = 0,
         .max = 1,
         .help = "on a communicator whose ranks share one node, all-reduce, all-gather, "
                 "reduce-scatter, broadcast and reduce of device buffers read and write the "
                 "peers' device memory directly (CUDA IPC, the simulated device's shared "
                 "storage); 0 stages them through host memory instead"},
    [LOOM_PARAM_HOST_IPC_MIN] =
        {.name = "LOOM_HOST_IPC_MIN",
         .type = LOOM_PARAM_T_SIZE,
         .default_value = "262144",
         .min = 0,
         .max = INT64_MAX,
         .help = "on a communicator whose ranks share one node, all-reduce, all-gather, "
                 "reduce-scatter, broadcast and reduce of host buffers of at least this many "
                 "bytes (count x type size) first exchange their buffers; when every rank's "
                 "came from loomMemAlloc, each rank reads and writes the peers' buffers "
                 "directly, with no copy through the shared-memory FIFOs; 0: never.  Set it "
                 "alike on every rank"},
    [LOOM_PARAM_STRAGGLER_WARN_MS] =
        {.name = "LOOM_STRAGGLER_WARN_MS",
         .type = LOOM_PARAM_T_INT,
         .default_value = "10000",
         .min = 0,
         .max = INT_MAX,
         .help = "milliseconds a collective may wait for a late rank before every waiting "
                 "rank logs one WARN naming it (the rank upstream on the bootstrap ring "
                 "that has not joined the call), the call and its number; 0 = never"},
    [LOOM_PARAM_TRACE_BUFFER] =
        {.name = "LOOM_TRACE_BUFFER",
         .type = LOOM_PARAM_T_INT,
         .default_value = "2000",
         .min = 0,
         .max = 1 << 20,
         .help = "calls the flight recorder keeps per communicator (each one's arguments, "
                 "algorithm, peers, state and times; docs/debugging.md); 0 = off"},
    [LOOM_PARAM_TRACE_DUMP_DIR] =
        {.name = "LOOM_TRACE_DUMP_DIR",
         .type = LOOM_PARAM_T_STRING,
         .default_value = NULL,
         .help = "directory the flight recorder's dumps go to, one JSON file per rank and "
                 "communicator (loom-trace.<comm>.<rank>.json); read them with loom-trace DIR. "
                 "Unset: a failure prints the last calls in the WARN instead"},
    [LOOM_PARAM_DUMP_ON_ERROR] =
        {.name = "LOOM_DUMP_ON_ERROR",
         .type = LOOM_PARAM_T_INT,
         .default_value = "1",
         .min = 0,
         .max = 1,
         .help = "1: a communicator that fails (timeout, remote error, mismatch) or is "
                 "aborted dumps its flight recorder once; 0: only loomCommDump does"},
    [LOOM_PARAM_DUMP_ON_SIGNAL] =
        {.name = "LOOM_DUMP_ON_SIGNAL",
         .type = LOOM_PARAM_T_INT,
         .default_value = "0",
         .min = 0,
         .max = 1,
         .help = "1: handlers for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT dump every "
                 "communicator's recorder into LOOM_TRACE_DUMP_DIR, then pass the signal to "
                 "the handler that was there before; 0: Loom catches no signal"},
};

struct param_value {
  int loaded;
  int is_set;
  int64_t ival;
  const char *sval; /* points into the environment or the table */
};

static struct param_value values[LOOM_PARAM_COUNT];
static pthread_mutex_t values_lock = PTHREAD_MUTEX_INITIALIZER;

const struct loom_param_info *loom_param_table(void) { return params; }

int loom_parse_int(const char *text, int64_t *out) {
  if (text == NULL || *text == '\0')
    return -1;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || end == text)
    return -1;
  while (isspace((unsigned char)*end))
    end++;
  if (*end != '\0')
    return -1;
  *out = v;
  return 0;
}

int loom_parse_size(const char *text, int64_t *out) {
  if (text == NULL || !isdigit((unsigned char)*text))
    return -1;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || end == text)
    return -1;
  int shift = 0;
  switch (toupper((unsigned char)*end)) {
  case '\0':
    break;
  case 'K':
    shift = 10;
    break;
  case 'M':
    shift = 20;
    break;
  case 'G':
    shift = 30;
    break;
  default:
    return -1;
  }
  if (shift) {
    end++;
    if (toupper((unsigned char)*end) == 'B')
      end++;
    else if (toupper((unsigned char)*end) == 'I' &&
             toupper((unsigned char)end[1]) == 'B')
      end += 2;
  }
  if (*end != '\0')
    return -1;
  if (v > ((unsigned long long)INT64_MAX >> shift))
    return -1;
  *out = (int64_t)(v << shift);
  return 0;
}

int loom_parse_port_range(const char *text, int *lo, int *hi) {
  if (text == NULL)
    return -1;
  const char *dash = strchr(text, '-');
  if (dash == NULL)
    return -1;
  char first[16];
  size_t n = (size_t)(dash - text);
  if (n == 0 || n >= sizeof first)
    return -1;
  memcpy(first, text, n);
  first[n] = '\0';
  int64_t a, b;
  if (loom_parse_int(first, &a) != 0 || loom_parse_int(dash + 1, &b) != 0)
    return -1;
  if (a < 1 || b > 65535 || a > b)
    return -1;
  *lo = (int)a;
  *hi = (int)b;
  return 0;
}

/* Fills values[id]; writes a warning into `warn` (empty when none) so that
 * the caller can log it after dropping the lock (logging reads this table). */
static void load_value(loom_param_id id, char *warn, size_t warn_len) {
  const struct loom_param_info *p = &params[id];
  struct param_value *v = &values[id];
  const char *env = getenv(p->name);
  v->is_set = env != NULL;
  v->sval = env ? env : p->default_value;
  v->ival = 0;
  if (p->type != LOOM_PARAM_T_STRING) {
    int64_t parsed = 0;
    int ok = 0;
    if (v->sval != NULL) {
      ok = (p->type == LOOM_PARAM_T_INT ? loom_parse_int(v->sval, &parsed)
                                        : loom_parse_size(v->sval, &parsed)) == 0;
      ok = ok && parsed >= p->min && parsed <= p->max;
    }
    if (!ok && env != NULL) {
      snprintf(warn, warn_len, "%s=\"%s\" is not valid (expected %s in [%lld, %lld]); "
                "using the default %s",
                p->name, env, p->type == LOOM_PARAM_T_INT ? "an integer" : "a size",
                (long long)p->min, (long long)p->max,
                p->default_value ? p->default_value : "(unset)");
      v->sval = p->default_value;
      ok = v->sval != NULL &&
           (p->type == LOOM_PARAM_T_INT ? loom_parse_int(v->sval, &parsed)
                                        : loom_parse_size(v->sval, &parsed)) == 0;
    }
    v->ival = ok ? parsed : 0;
  }
  v->loaded = 1;
}

static const struct param_value *get_value(loom_param_id id) {
  char warn[256] = "";
  pthread_mutex_lock(&values_lock);
  if (!values[id].loaded)
    load_value(id, warn, sizeof warn);
  pthread_mutex_unlock(&values_lock);
  if (warn[0] != '\0')
    LOOM_WARN(LOOM_LOG_ENV, "%s", warn);
  return &values[id];
}

int64_t loom_param_int(loom_param_id id) { return get_value(id)->ival; }
const char *loom_param_str(loom_param_id id) { return get_value(id)->sval; }

int loom_connect_lazy(void) {
  const char *v = loom_param_str(LOOM_PARAM_CONNECT);
  if (v == NULL || strcmp(v, "lazy") == 0)
    return 1;
  if (strcmp(v, "eager") == 0)
    return 0;
  loom_error(loomInvalidArgument, LOOM_LOG_INIT,
             "LOOM_CONNECT=%s: must be \"lazy\" (connect a peer when first used) or "
             "\"eager\" (every peer at init)",
             v);
  return -1;
}
int loom_param_is_set(loom_param_id id) { return get_value(id)->is_set; }

void loom_config_reload(void) {
  pthread_mutex_lock(&values_lock);
  memset(values, 0, sizeof values);
  pthread_mutex_unlock(&values_lock);
  loom_log_reload();
}
