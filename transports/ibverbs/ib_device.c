/*
 * ib_device.c — which RDMA device, port and IP address the ibverbs
 * transport uses, and loom_ib_available() for the transport selection.
 *
 * rdma_cm addresses peers by IP, so a usable port is an active port
 * (LOOM_IB_HCA) that owns an IP address: binding an rdma_cm id to an
 * address tells which device and port carry it.  Addresses tried, in
 * order: the IP of LOOM_IB_GID_INDEX's GID (RoCE), else Loom's own
 * address (LOOM_SOCKET_IFNAME), then every interface address (IPv4 first,
 * loopback last, for Soft-RoCE on lo).
 */
#include "config.h"
#include "ib.h"
#include "ib_select.h"
#include "core/config.h"
#include "core/error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PORTS 64

struct port_info {
  struct ibv_context *verbs;
  char dev[64];
  int port;
  int roce;
  size_t max_msg;
};

/* Appends to a bounded text (what was seen, for the reason). */
static void append(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t len, const char *fmt, ...) {
  size_t used = strlen(buf);
  if (used + 1 >= len)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, len - used, fmt, ap);
  va_end(ap);
}

static const char *port_state_name(enum ibv_port_state s) {
  switch (s) {
  case IBV_PORT_ACTIVE:
    return "active";
  case IBV_PORT_DOWN:
    return "down";
  case IBV_PORT_INIT:
    return "init";
  case IBV_PORT_ARMED:
    return "armed";
  default:
    return "not active";
  }
}

/* Active ports selected by LOOM_IB_HCA, in device order. */
static int list_ports(struct ibv_context **ctxs, int nctx, const char *spec,
                      struct port_info *out, char *seen, size_t seen_len) {
  int n = 0;
  for (int d = 0; d < nctx; d++) {
    const char *name = ibv_get_device_name(ctxs[d]->device);
    struct ibv_device_attr da;
    if (ibv_query_device(ctxs[d], &da) != 0) {
      append(seen, seen_len, "%s: ibv_query_device failed; ", name);
      continue;
    }
    for (int p = 1; p <= da.phys_port_cnt && n < MAX_PORTS; p++) {
      struct ibv_port_attr pa;
      if (ibv_query_port(ctxs[d], (uint8_t)p, &pa) != 0)
        continue;
      int selected = ib_hca_match(spec, name, p);
      append(seen, seen_len, "%s:%d %s; ", name, p,
             pa.state != IBV_PORT_ACTIVE ? port_state_name(pa.state)
             : selected                  ? "active"
                                         : "active, not in LOOM_IB_HCA");
      if (pa.state != IBV_PORT_ACTIVE || !selected)
        continue;
      struct port_info *pi = &out[n++];
      pi->verbs = ctxs[d];
      snprintf(pi->dev, sizeof pi->dev, "%s", name);
      pi->port = p;
      pi->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
      pi->max_msg = pa.max_msg_sz;
    }
  }
  size_t used = strlen(seen);
  if (used >= 2)
    seen[used - 2] = '\0'; /* the last "; " */
  return n;
}

/* Whether the device supports RC RDMA writes to On-Demand-Paging memory. */
static int odp_capable(struct ibv_context *verbs) {
  struct ibv_device_attr_ex ax;
  memset(&ax, 0, sizeof ax);
  if (ibv_query_device_ex(verbs, NULL, &ax) != 0)
    return 0;
  return (ax.odp_caps.general_caps & IBV_ODP_SUPPORT) &&
         (ax.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE) &&
         (ax.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_RECV);
}

/* Binds an rdma_cm id to addr (port 0); 1 with *id set when it lands on
 * one of the ports, else 0 (the attempt described in tried). */
static int try_address(struct rdma_event_channel *ec, const union loom_sockaddr *addr,
                       const struct port_info *ports, int nports, struct rdma_cm_id **id,
                       int *which, char *tried, size_t tried_len) {
  char text[LOOM_ADDR_STRLEN];
  union loom_sockaddr a = *addr;
  loom_sockaddr_set_port(&a, 0);
  loom_sockaddr_str(&a, text, sizeof text);
  struct rdma_cm_id *cand;
  if (rdma_create_id(ec, &cand, NULL, RDMA_PS_TCP) != 0) {
    append(tried, tried_len, "%s: rdma_create_id: %s; ", text, strerror(errno));
    return 0;
  }
  if (rdma_bind_addr(cand, &a.sa) != 0 || cand->verbs == NULL) {
    append(tried, tried_len, "%s: on no RDMA device; ", text);
    rdma_destroy_id(cand);
    return 0;
  }
  const char *dev = ibv_get_device_name(cand->verbs->device);
  for (int i = 0; i < nports; i++)
    if (strcmp(ports[i].dev, dev) == 0 && ports[i].port == cand->port_num) {
      *id = cand;
      *which = i;
      return 1;
    }
  append(tried, tried_len, "%s: on %s port %d, not a usable port; ", text, dev,
         (int)cand->port_num);
  rdma_destroy_id(cand);
  return 0;
}

/* Interface addresses rdma_cm might bind: IPv4 then IPv6 (no link-local),
 * loopback last.  Returns how many were written. */
static int interface_addresses(union loom_sockaddr *out, int max) {
  struct ifaddrs *ifs;
  if (getifaddrs(&ifs) != 0)
    return 0;
  int n = 0;
  for (int pass = 0; pass < 3; pass++)
    for (struct ifaddrs *i = ifs; i != NULL && n < max; i = i->ifa_next) {
      if (i->ifa_addr == NULL || !(i->ifa_flags & IFF_UP))
        continue;
      int fam = i->ifa_addr->sa_family;
      int loop = (i->ifa_flags & IFF_LOOPBACK) != 0;
      if ((pass == 0 && (fam != AF_INET || loop)) || (pass == 1 && (fam != AF_INET6 || loop)) ||
          (pass == 2 && (!loop || (fam != AF_INET && fam != AF_INET6))))
        continue;
      union loom_sockaddr a;
      memset(&a, 0, sizeof a);
      if (fam == AF_INET) {
        memcpy(&a.sin, i->ifa_addr, sizeof a.sin);
      } else {
        memcpy(&a.sin6, i->ifa_addr, sizeof a.sin6);
        if (IN6_IS_ADDR_LINKLOCAL(&a.sin6.sin6_addr))
          continue;
      }
      out[n++] = a;
    }
  freeifaddrs(ifs);
  return n;
}

static int choose_address(struct rdma_event_channel *ec, const union loom_sockaddr *preferred,
                          const struct port_info *ports, int nports, struct ib_choice *out,
                          char *why, size_t why_len) {
  char tried[768] = "";
  struct rdma_cm_id *id = NULL;
  int which = -1;
  int gid_index = (int)loom_param_int(LOOM_PARAM_IB_GID_INDEX);
  if (gid_index >= 0) {
    for (int i = 0; i < nports && id == NULL; i++) {
      union ibv_gid gid;
      union loom_sockaddr a;
      if (ibv_query_gid(ports[i].verbs, (uint8_t)ports[i].port, gid_index, &gid) != 0 ||
          ib_gid_to_sockaddr(gid.raw, &a) != 0) {
        append(tried, sizeof tried, "GID %d of %s:%d: no IP address; ", gid_index,
               ports[i].dev, ports[i].port);
        continue;
      }
      try_address(ec, &a, ports, nports, &id, &which, tried, sizeof tried);
    }
  } else {
    union loom_sockaddr addrs[64];
    int n = 0;
    if (preferred != NULL)
      addrs[n++] = *preferred;
    n += interface_addresses(addrs + n, 64 - n);
    for (int i = 0; i < n && id == NULL; i++)
      try_address(ec, &addrs[i], ports, nports, &id, &which, tried, sizeof tried);
  }
  if (id == NULL) {
    size_t used = strlen(tried);
    if (used >= 2)
      tried[used - 2] = '\0';
    snprintf(why, why_len,
             "no IP address on the active RDMA port(s) that rdma_cm can bind (tried: %s); "
             "give the RDMA interface (IPoIB or the RoCE netdev) an address%s",
             tried[0] ? tried : "none",
             gid_index >= 0 ? ", or choose another LOOM_IB_GID_INDEX" : "");
    return -1;
  }
  const struct port_info *p = &ports[which];
  out->id = id;
  memset(&out->addr, 0, sizeof out->addr);
  memcpy(&out->addr, rdma_get_local_addr(id),
         rdma_get_local_addr(id)->sa_family == AF_INET6 ? sizeof out->addr.sin6
                                                        : sizeof out->addr.sin);
  snprintf(out->dev, sizeof out->dev, "%s", p->dev);
  out->port = p->port;
  out->roce = p->roce;
  out->max_msg = p->max_msg;
  out->odp = odp_capable(id->verbs);
  return 0;
}

int ib_count_devices(char *why, size_t why_len) {
  int n = 0;
  errno = 0;
  struct ibv_device **devs = ibv_get_device_list(&n);
  if (devs == NULL) {
    int e = errno;
    snprintf(why, why_len, "no RDMA device (ibv_get_device_list: %s%s)", strerror(e),
             e == ENOSYS ? " - this kernel offers no RDMA (no /sys/class/infiniband_verbs)" : "");
    return 0;
  }
  ibv_free_device_list(devs);
  if (n == 0)
    snprintf(why, why_len, "no RDMA device (ibv_get_device_list found none)");
  return n;
}

int ib_choose(struct rdma_event_channel *ec, const union loom_sockaddr *preferred,
              struct ib_choice *out, char *why, size_t why_len) {
  memset(out, 0, sizeof *out);
  const char *spec = loom_param_str(LOOM_PARAM_IB_HCA);
  if (ib_hca_check(spec, why, why_len) != 0)
    return -1;
  int ndev = ib_count_devices(why, why_len);
  if (ndev == 0)
    return -1;
  int nctx = 0;
  struct ibv_context **ctxs = rdma_get_devices(&nctx);
  if (ctxs == NULL || nctx == 0) {
    snprintf(why, why_len,
             "%d RDMA device(s) but rdma_cm opens none (rdma_get_devices: %s; is "
             "/dev/infiniband/rdma_cm there and the rdma_ucm module loaded?)",
             ndev, ctxs == NULL ? strerror(errno) : "none");
    if (ctxs != NULL)
      rdma_free_devices(ctxs);
    return -1;
  }
  struct port_info ports[MAX_PORTS];
  char seen[512] = "";
  int nports = list_ports(ctxs, nctx, spec, ports, seen, sizeof seen);
  int rc = -1;
  if (nports == 0)
    snprintf(why, why_len, "no active RDMA port%s%s (%s)",
             spec && *spec ? " in LOOM_IB_HCA=" : "", spec && *spec ? spec : "", seen);
  else
    rc = choose_address(ec, preferred, ports, nports, out, why, why_len);
  rdma_free_devices(ctxs);
  return rc;
}

int loom_ib_available(char *why, size_t len) {
  char dummy[8];
  if (why == NULL || len == 0) {
    why = dummy;
    len = sizeof dummy;
  }
  why[0] = '\0';
  /* Checked first: the usual answer, and cheaper than rdma_cm. */
  if (ib_count_devices(why, len) == 0)
    return 0;
  struct rdma_event_channel *ec = rdma_create_event_channel();
  if (ec == NULL) {
    snprintf(why, len,
             "rdma_cm is unavailable (rdma_create_event_channel: %s; is the rdma_ucm "
             "module loaded?)",
             strerror(errno));
    return 0;
  }
  union loom_sockaddr preferred;
  int have_pref = loom_socket_pick_address(&preferred, NULL, 0) == loomSuccess;
  loom_clear_last_error();
  struct ib_choice c;
  int ok = ib_choose(ec, have_pref ? &preferred : NULL, &c, why, len) == 0;
  if (ok) {
    char text[INET6_ADDRSTRLEN] = "?";
    inet_ntop(c.addr.sa.sa_family,
              c.addr.sa.sa_family == AF_INET6 ? (const void *)&c.addr.sin6.sin6_addr
                                              : (const void *)&c.addr.sin.sin_addr,
              text, sizeof text);
    snprintf(why, len, "%s port %d (%s), address %s", c.dev, c.port,
             c.roce ? "RoCE" : "InfiniBand", text);
    rdma_destroy_id(c.id);
  }
  rdma_destroy_event_channel(ec);
  return ok;
}
