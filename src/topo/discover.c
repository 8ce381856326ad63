/*
 * discover.c — this node's hardware: CPUs, NUMA, caches and memory (hwloc,
 * else sysconf and /sys), IP interfaces (getifaddrs + /sys/class/net),
 * RDMA devices (sysfs: /sys/class/infiniband).  No RDMA library is loaded
 * here; libfabric's providers are listed by the ofi transport module, for
 * loom-topo (transports/module_loader.h).
 *
 * Discovery never fails for a missing piece: what cannot be found stays 0
 * (a NIC's numa -1), because a container without /sys or a build without
 * hwloc must still run, only with a vaguer picture of the machine.
 */
#include "config.h"
#include "topo/topo.h"
#include "core/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <pthread.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef LOOM_HAVE_HWLOC
#include <hwloc.h>
#if HWLOC_API_VERSION < 0x00020000
#undef LOOM_HAVE_HWLOC /* 1.x lacks total_memory and typed caches: use /sys */
#endif
#endif

/* Copies src into a fixed field, always NUL-terminated, cut to fit. */
static void copy_text(char *dst, size_t cap, const char *src) {
  size_t n = strnlen(src, cap - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* Reads the first line of a small file (sysfs, procfs); -1 if unreadable. */
static int read_line(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  char *got = fgets(buf, (int)len, f);
  fclose(f);
  if (got == NULL)
    return -1;
  buf[strcspn(buf, "\n")] = '\0';
  return 0;
}

/* Reads a file holding one integer; -1 if unreadable or not a number
 * (/sys/class/net/IF/speed fails with EINVAL while a link is down). */
static int read_long(const char *path, long long *out) {
  char buf[64], *end;
  if (read_line(path, buf, sizeof buf) != 0)
    return -1;
  long long v = strtoll(buf, &end, 10);
  if (end == buf)
    return -1;
  *out = v;
  return 0;
}

static int32_t clamp32(long long v) {
  return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
}

/* A device's NUMA node from sysfs (dir/device/numa_node); -1 when unknown. */
static int32_t sysfs_numa(const char *dir, const char *name) {
  char path[256];
  long long v;
  if (snprintf(path, sizeof path, "%s/%s/device/numa_node", dir, name) >= (int)sizeof path)
    return -1;
  return read_long(path, &v) == 0 && v >= 0 ? clamp32(v) : -1;
}

void loom_topo_local_hostid(char *out, size_t len) {
  char host[LOOM_TOPO_NAME_BYTES] = "", boot_id[40] = "";
  gethostname(host, sizeof host - 1);
  if (read_line("/proc/sys/kernel/random/boot_id", boot_id, sizeof boot_id) != 0)
    boot_id[0] = '\0';
  /* the same text as the bootstrap's (src/bootstrap/bootstrap.c) */
  snprintf(out, len, "%.26s/%.36s", host, boot_id);
  const char *forced = loom_param_str(LOOM_PARAM_HOSTID);
  if (forced != NULL && forced[0] != '\0')
    snprintf(out, len, "%.63s", forced);
}

/* ---- CPUs, NUMA, caches, memory ------------------------------------------- */

#ifdef LOOM_HAVE_HWLOC
static int32_t count_type(hwloc_topology_t topo, hwloc_obj_type_t type) {
  int n = hwloc_get_nbobjs_by_type(topo, type);
  return n > 0 ? n : 0;
}

static void cpu_hwloc(struct loom_topo_hw *hw) {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0)
    return;
  /* PCI and OS devices would double the load time; the NICs come from
   * getifaddrs and sysfs instead. */
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_icache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return;
  }
  hw->cores = count_type(topo, HWLOC_OBJ_CORE);
  hw->pus = count_type(topo, HWLOC_OBJ_PU);
  hw->numa_nodes = count_type(topo, HWLOC_OBJ_NUMANODE);
  hw->sockets = count_type(topo, HWLOC_OBJ_PACKAGE);
  /* memory: sysconf first (cpu_fallback); hwloc sums the NUMA nodes'
   * meminfo, which misses hot-plugged memory on some VMs (7 of 24 GiB on
   * a Firecracker guest), so it is only the second choice */
  int64_t hwloc_memory = (int64_t)hwloc_get_root_obj(topo)->total_memory;
  /* the last level is the highest cache level present; its largest one */
  unsigned best_level = 0;
  int64_t best_size = 0;
  for (int d = 0; d < hwloc_topology_get_depth(topo); d++) {
    hwloc_obj_type_t type = hwloc_get_depth_type(topo, d);
    if (!hwloc_obj_type_is_dcache(type))
      continue;
    for (hwloc_obj_t o = hwloc_get_next_obj_by_depth(topo, d, NULL); o != NULL;
         o = hwloc_get_next_obj_by_depth(topo, d, o)) {
      unsigned level = o->attr->cache.depth;
      int64_t size = (int64_t)o->attr->cache.size;
      if (level > best_level || (level == best_level && size > best_size)) {
        best_level = level;
        best_size = size;
      }
    }
  }
  hw->l3_bytes = best_size;
  hwloc_topology_destroy(topo);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  hw->memory_bytes = pages > 0 && page > 0 ? (int64_t)pages * page : hwloc_memory;
}
#endif

static int is_numbered(const char *name, const char *prefix) {
  size_t n = strlen(prefix);
  if (strncmp(name, prefix, n) != 0 || name[n] == '\0')
    return 0;
  for (const char *p = name + n; *p; p++)
    if (!isdigit((unsigned char)*p))
      return 0;
  return 1;
}

/* Distinct (package, core) pairs and distinct packages of the online CPUs. */
static void cores_sysfs(struct loom_topo_hw *hw) {
  const char *base = "/sys/devices/system/cpu";
  DIR *d = opendir(base);
  if (d == NULL)
    return;
  size_t cap = 64, n = 0;
  long long(*pairs)[2] = malloc(cap * sizeof *pairs);
  struct dirent *e;
  while (pairs != NULL && (e = readdir(d)) != NULL) {
    if (!is_numbered(e->d_name, "cpu"))
      continue;
    char path[320];
    long long pkg, core;
    snprintf(path, sizeof path, "%s/%s/topology/physical_package_id", base, e->d_name);
    if (read_long(path, &pkg) != 0)
      continue; /* offline */
    snprintf(path, sizeof path, "%s/%s/topology/core_id", base, e->d_name);
    if (read_long(path, &core) != 0)
      continue;
    if (n == cap) {
      void *grown = realloc(pairs, 2 * cap * sizeof *pairs);
      if (grown == NULL)
        break;
      pairs = grown;
      cap *= 2;
    }
    pairs[n][0] = pkg;
    pairs[n][1] = core;
    n++;
  }
  closedir(d);
  int32_t cores = 0, sockets = 0;
  for (size_t i = 0; pairs != NULL && i < n; i++) {
    int new_core = 1, new_pkg = 1;
    for (size_t j = 0; j < i; j++) {
      if (pairs[j][0] == pairs[i][0]) {
        new_pkg = 0;
        if (pairs[j][1] == pairs[i][1])
          new_core = 0;
      }
    }
    cores += new_core;
    sockets += new_pkg;
  }
  free(pairs);
  if (hw->cores == 0)
    hw->cores = cores;
  if (hw->sockets == 0)
    hw->sockets = sockets;
}

static void numa_sysfs(struct loom_topo_hw *hw) {
  DIR *d = opendir("/sys/devices/system/node");
  if (d == NULL)
    return;
  int32_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += is_numbered(e->d_name, "node");
  closedir(d);
  hw->numa_nodes = n;
}

/* "32768K" (sysfs cache size) in bytes; 0 if it does not parse. */
static int64_t parse_cache_size(const char *text) {
  char *end;
  long long v = strtoll(text, &end, 10);
  if (end == text || v < 0)
    return 0;
  switch (toupper((unsigned char)*end)) {
  case 'K':
    return (int64_t)v << 10;
  case 'M':
    return (int64_t)v << 20;
  case 'G':
    return (int64_t)v << 30;
  default:
    return (int64_t)v;
  }
}

/* cpu0's caches: the largest of the highest level (data or unified). */
static void cache_sysfs(struct loom_topo_hw *hw) {
  const char *base = "/sys/devices/system/cpu/cpu0/cache";
  DIR *d = opendir(base);
  if (d == NULL)
    return;
  long long best_level = 0;
  int64_t best_size = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!is_numbered(e->d_name, "index"))
      continue;
    char path[320], text[64];
    long long level;
    snprintf(path, sizeof path, "%s/%s/type", base, e->d_name);
    if (read_line(path, text, sizeof text) != 0 || strcmp(text, "Instruction") == 0)
      continue;
    snprintf(path, sizeof path, "%s/%s/level", base, e->d_name);
    if (read_long(path, &level) != 0)
      continue;
    snprintf(path, sizeof path, "%s/%s/size", base, e->d_name);
    if (read_line(path, text, sizeof text) != 0)
      continue;
    int64_t size = parse_cache_size(text);
    if (level > best_level || (level == best_level && size > best_size)) {
      best_level = level;
      best_size = size;
    }
  }
  closedir(d);
  hw->l3_bytes = best_size;
}

/* Fills what hwloc left unknown (or everything, without hwloc). */
static void cpu_fallback(struct loom_topo_hw *hw) {
  if (hw->pus == 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    hw->pus = n > 0 ? clamp32(n) : 0;
  }
  if (hw->cores == 0 || hw->sockets == 0)
    cores_sysfs(hw);
  if (hw->cores == 0)
    hw->cores = hw->pus; /* no topology in sysfs: count threads as cores */
  if (hw->numa_nodes == 0)
    numa_sysfs(hw);
  if (hw->l3_bytes == 0)
    cache_sysfs(hw);
  if (hw->memory_bytes == 0) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
      hw->memory_bytes = (int64_t)pages * page;
  }
}

/* ---- NICs ------------------------------------------------------------------ */

static struct loom_topo_nic *add_nic(struct loom_topo_hw *hw, const char *name,
                                     const char *kind) {
  if (hw->nnics >= LOOM_TOPO_MAX_NICS)
    return NULL;
  struct loom_topo_nic *nic = &hw->nics[hw->nnics++];
  memset(nic, 0, sizeof *nic);
  copy_text(nic->name, sizeof nic->name, name);
  copy_text(nic->kind, sizeof nic->kind, kind);
  nic->numa = -1;
  return nic;
}

/* One IP interface as getifaddrs lists it (one entry per address). */
struct ip_if {
  char name[IF_NAMESIZE + 1];
  char addr[INET6_ADDRSTRLEN];
  int addr_rank; /* which address to show: IPv4 3, global IPv6 2, link-local 1 */
  int loopback;
};

#define MAX_IP_IFS 64

static int address_rank(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return 3;
  const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
  return IN6_IS_ADDR_LINKLOCAL(a) ? 1 : 2;
}

/* Interfaces that are up and have an IP address, in the kernel's order,
 * each with its most useful address. */
static int list_ip_interfaces(struct ip_if *ifs, int max) {
  struct ifaddrs *all;
  if (getifaddrs(&all) != 0)
    return 0;
  int n = 0;
  for (struct ifaddrs *a = all; a != NULL; a = a->ifa_next) {
    if (a->ifa_addr == NULL || !(a->ifa_flags & IFF_UP) ||
        (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6))
      continue;
    int i = 0;
    while (i < n && strcmp(ifs[i].name, a->ifa_name) != 0)
      i++;
    if (i == n) {
      if (n == max)
        continue;
      memset(&ifs[n], 0, sizeof ifs[n]);
      copy_text(ifs[n].name, sizeof ifs[n].name, a->ifa_name);
      ifs[n].loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
      n++;
    }
    int rank = address_rank(a->ifa_addr);
    if (rank <= ifs[i].addr_rank)
      continue;
    const void *bits = a->ifa_addr->sa_family == AF_INET
                           ? (const void *)&((struct sockaddr_in *)a->ifa_addr)->sin_addr
                           : (const void *)&((struct sockaddr_in6 *)a->ifa_addr)->sin6_addr;
    if (inet_ntop(a->ifa_addr->sa_family, bits, ifs[i].addr, sizeof ifs[i].addr) != NULL)
      ifs[i].addr_rank = rank;
  }
  freeifaddrs(all);
  return n;
}

static void nics_ip(struct loom_topo_hw *hw) {
  struct ip_if ifs[MAX_IP_IFS];
  int n = list_ip_interfaces(ifs, MAX_IP_IFS), others = 0;
  for (int i = 0; i < n; i++)
    others += !ifs[i].loopback;
  for (int i = 0; i < n; i++) {
    if (ifs[i].loopback && others > 0)
      continue; /* loopback reaches no other node; listed only when alone */
    struct loom_topo_nic *nic = add_nic(hw, ifs[i].name, "ip");
    if (nic == NULL)
      return;
    copy_text(nic->addr, sizeof nic->addr, ifs[i].addr);
    char path[128];
    long long speed;
    snprintf(path, sizeof path, "/sys/class/net/%s/speed", ifs[i].name);
    nic->speed_mbps = read_long(path, &speed) == 0 && speed > 0 ? clamp32(speed) : 0;
    nic->numa = sysfs_numa("/sys/class/net", ifs[i].name);
  }
}

/* RDMA devices as the kernel lists them, without libibverbs:
 * ROOT/<dev>/ports/<n>/{state,rate,gids/0} and ROOT/<dev>/device/numa_node. */

/* "100 Gb/sec (4X EDR)" -> 100000; 0 when unknown. */
static int32_t rdma_rate_mbps(const char *text) {
  char *end;
  double v = strtod(text, &end);
  if (end == text || v <= 0)
    return 0;
  while (*end == ' ')
    end++;
  double mbps = strncmp(end, "Gb/sec", 6) == 0 ? v * 1000 : strncmp(end, "Mb/sec", 6) == 0 ? v : 0;
  return mbps > INT32_MAX ? INT32_MAX : (int32_t)mbps;
}

static int port_active(const char *portdir) {
  char path[512], state[64];
  return snprintf(path, sizeof path, "%s/state", portdir) < (int)sizeof path &&
         read_line(path, state, sizeof state) == 0 && strstr(state, "ACTIVE") != NULL;
}

/* The device's first active port, else its lowest-numbered one; 0 if none. */
static long rdma_pick_port(const char *devdir) {
  char ports[384];
  DIR *d = snprintf(ports, sizeof ports, "%s/ports", devdir) < (int)sizeof ports
               ? opendir(ports)
               : NULL;
  if (d == NULL)
    return 0;
  long lowest = 0, active = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char *end;
    long n = strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || n <= 0)
      continue;
    char portdir[512];
    if (snprintf(portdir, sizeof portdir, "%s/%ld", ports, n) >= (int)sizeof portdir)
      continue;
    if (lowest == 0 || n < lowest)
      lowest = n;
    if (port_active(portdir) && (active == 0 || n < active))
      active = n;
  }
  closedir(d);
  return active ? active : lowest;
}

/* Speed and GID 0 of the chosen port. */
static void describe_rdma_device(const char *devdir, struct loom_topo_nic *nic) {
  long port = rdma_pick_port(devdir);
  if (port == 0)
    return;
  char path[512], text[128];
  if (snprintf(path, sizeof path, "%s/ports/%ld/rate", devdir, port) < (int)sizeof path &&
      read_line(path, text, sizeof text) == 0)
    nic->speed_mbps = rdma_rate_mbps(text);
  if (snprintf(path, sizeof path, "%s/ports/%ld/gids/0", devdir, port) < (int)sizeof path &&
      read_line(path, text, sizeof text) == 0)
    copy_text(nic->addr, sizeof nic->addr, text);
}

static int visible_entry(const struct dirent *e) { return e->d_name[0] != '.'; }

int loom_topo_list_rdma(struct loom_topo_hw *hw, const char *root) {
  struct dirent **names = NULL;
  int n = scandir(root, &names, visible_entry, alphasort), added = 0;
  for (int i = 0; i < n; i++) {
    struct loom_topo_nic *nic = add_nic(hw, names[i]->d_name, "ibverbs");
    if (nic != NULL) {
      char devdir[384];
      nic->numa = sysfs_numa(root, names[i]->d_name);
      if (snprintf(devdir, sizeof devdir, "%s/%s", root, names[i]->d_name) < (int)sizeof devdir)
        describe_rdma_device(devdir, nic);
      added++;
    }
    free(names[i]);
  }
  free(names);
  return added;
}

/* ---- the record ------------------------------------------------------------ */

/* The CPU, cache and memory layout does not change while a process runs,
 * and hwloc's load is the slow part of discovery (5-40 ms here): it is
 * done once per process and copied for every later communicator. */
static struct loom_topo_hw cpu_once;
static pthread_once_t cpu_once_flag = PTHREAD_ONCE_INIT;

static void cpu_discover_once(void) {
#ifdef LOOM_HAVE_HWLOC
  cpu_hwloc(&cpu_once);
#endif
  cpu_fallback(&cpu_once);
}

static void cpu_cached(struct loom_topo_hw *hw) {
  pthread_once(&cpu_once_flag, cpu_discover_once);
  hw->cores = cpu_once.cores;
  hw->pus = cpu_once.pus;
  hw->numa_nodes = cpu_once.numa_nodes;
  hw->sockets = cpu_once.sockets;
  hw->l3_bytes = cpu_once.l3_bytes;
  hw->memory_bytes = cpu_once.memory_bytes;
}

int loom_topo_discover(struct loom_topo_hw *hw, const char *hostid, char *err, size_t errlen) {
  if (err != NULL && errlen > 0)
    err[0] = '\0';
  if (hw == NULL) {
    if (err != NULL && errlen > 0)
      snprintf(err, errlen, "loom_topo_discover: no record to fill");
    return -1;
  }
  memset(hw, 0, sizeof *hw);
  if (hostid != NULL)
    copy_text(hw->hostid, sizeof hw->hostid, hostid);
  else
    loom_topo_local_hostid(hw->hostid, sizeof hw->hostid);
  gethostname(hw->hostname, sizeof hw->hostname - 1);
  cpu_cached(hw);
  nics_ip(hw);
  loom_topo_list_rdma(hw, "/sys/class/infiniband");
  return 0;
}

/* Terminates a field and zeroes what follows the text, so that equal
 * records compare equal byte for byte. */
static void canon_text(char *field, size_t cap) {
  size_t n = strnlen(field, cap - 1);
  memset(field + n, 0, cap - n);
}

void loom_topo_hw_sanitize(struct loom_topo_hw *hw) {
  canon_text(hw->hostid, sizeof hw->hostid);
  canon_text(hw->hostname, sizeof hw->hostname);
  if (hw->nnics < 0)
    hw->nnics = 0;
  if (hw->nnics > LOOM_TOPO_MAX_NICS)
    hw->nnics = LOOM_TOPO_MAX_NICS;
  hw->pad = 0;
  /* a negative count or size means nothing: unknown, as 0 does (the
   * planner reads them, and the JSON reader accepts only these ranges) */
  if (hw->cores < 0)
    hw->cores = 0;
  if (hw->pus < 0)
    hw->pus = 0;
  if (hw->numa_nodes < 0)
    hw->numa_nodes = 0;
  if (hw->sockets < 0)
    hw->sockets = 0;
  if (hw->l3_bytes < 0)
    hw->l3_bytes = 0;
  if (hw->memory_bytes < 0)
    hw->memory_bytes = 0;
  for (int i = 0; i < hw->nnics; i++) {
    struct loom_topo_nic *n = &hw->nics[i];
    canon_text(n->name, sizeof n->name);
    canon_text(n->kind, sizeof n->kind);
    canon_text(n->addr, sizeof n->addr);
    if (n->speed_mbps < 0)
      n->speed_mbps = 0;
    if (n->numa < -1)
      n->numa = -1;
  }
  memset(&hw->nics[hw->nnics], 0,
         (size_t)(LOOM_TOPO_MAX_NICS - hw->nnics) * sizeof hw->nics[0]);
}
