/*
 * ofi_provider.c — finding and opening a libfabric provider: fi_getinfo
 * with what the transport needs (FI_EP_RDM, FI_TAGGED, two iovecs), the
 * choice among the answers (LOOM_OFI_PROVIDER, LOOM_OFI_DOMAIN, the
 * interface Loom's bootstrap uses), then fabric, domain, address vector,
 * completion queue (with a wait fd where the provider has one) and
 * endpoint.  Also the default selection's question: is there a fabric?
 */
#include "ofi/ofi_fabric.h"
#include "net/socket.h"
#include "core/config.h"
#include "core/error.h"

#include <dirent.h>
#include <glob.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_cm.h>

#define OFI_API_VERSION FI_VERSION(1, 5)
#define OFI_CQ_ENTRIES 4096

static struct fi_info *make_hints(void) {
  struct fi_info *hints = fi_allocinfo();
  if (hints == NULL)
    return NULL;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED;
  /* Each request starts with a struct fi_context2, so both modes are fine. */
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  /* What registration asks of us: local buffers (handled by the cache);
   * the rest concerns remote access, which Loom does not use. */
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                                FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->tx_attr->iov_limit = 2; /* header + payload */
  hints->rx_attr->iov_limit = 2;
  return hints;
}

/* The entries of list in domain (all when NULL): fi_getinfo does not
 * filter by domain name for every provider.  Returns how many. */
static int collect(struct fi_info *list, const char *domain, struct fi_info **infos,
                   const char **names, int max) {
  int n = 0;
  for (struct fi_info *i = list; i != NULL && n < max; i = i->next) {
    if (domain != NULL &&
        (i->domain_attr->name == NULL || strcmp(i->domain_attr->name, domain) != 0))
      continue;
    infos[n] = i;
    names[n++] = i->fabric_attr->prov_name;
  }
  return n;
}

/* "eth0, lo, shm": the distinct domains of list. */
static void list_domains(const struct fi_info *list, char *out, size_t cap) {
  size_t len = 0;
  out[0] = '\0';
  for (const struct fi_info *i = list; i != NULL; i = i->next) {
    const char *d = i->domain_attr->name;
    if (d == NULL)
      continue;
    int seen = 0;
    for (const struct fi_info *j = list; j != i && !seen; j = j->next)
      seen = j->domain_attr->name != NULL && strcmp(j->domain_attr->name, d) == 0;
    if (seen)
      continue;
    int k = snprintf(out + len, cap - len, "%s%s", len ? ", " : "", d);
    if (k < 0 || (size_t)k >= cap - len)
      return;
    len += (size_t)k;
  }
}

/* ---- the default selection's probe ------------------------------------------ */

/* Fabric hardware the kernel shows: RDMA devices (verbs, efa, psm3),
 * Slingshot (cxi), Omni-Path (psm2, opx). */
static int fabric_device_visible(char *what, size_t len) {
  DIR *d = opendir("/sys/class/infiniband");
  if (d != NULL) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
      if (e->d_name[0] != '.') {
        snprintf(what, len, "RDMA device %.64s", e->d_name);
        closedir(d);
        return 1;
      }
    closedir(d);
  }
  static const char *const patterns[] = {"/dev/cxi[0-9]*", "/dev/hfi1_[0-9]*"};
  for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
    glob_t g;
    if (glob(patterns[i], 0, NULL, &g) == 0 && g.gl_pathc > 0) {
      snprintf(what, len, "%.64s", g.gl_pathv[0]);
      globfree(&g);
      return 1;
    }
    globfree(&g);
  }
  return 0;
}

/* The provider that init would choose, by name; 0 when none. */
static int chosen_provider(const char *spec, const char *domain, char *prov, size_t len,
                           char *err, size_t errlen) {
  struct fi_info *hints = make_hints(), *list = NULL;
  if (hints == NULL) {
    snprintf(err, errlen, "out of memory");
    return 0;
  }
  int rc = fi_getinfo(OFI_API_VERSION, NULL, NULL, 0, hints, &list);
  fi_freeinfo(hints);
  const char *names[256];
  struct fi_info *infos[256];
  int n = collect(rc == 0 ? list : NULL, domain, infos, names, 256);
  int pick = ofi_pick(spec, names, n, err, errlen);
  if (pick >= 0)
    snprintf(prov, len, "%s", names[pick]);
  if (list != NULL)
    fi_freeinfo(list);
  return pick >= 0;
}

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;

int loom_ofi_default_ok(char *why, size_t whylen) {
  char device[128];
  if (!fabric_device_visible(device, sizeof device)) {
    snprintf(why, whylen, "no fabric device for libfabric (none in /sys/class/infiniband, "
                          "/dev/cxi*, /dev/hfi1_*)");
    return 0;
  }
  /* fi_getinfo is slow the first time: once per process and setting. */
  static char cached_key[256], cached_why[512];
  static int cached = -1;
  const char *spec = loom_param_str(LOOM_PARAM_OFI_PROVIDER);
  const char *domain = loom_param_str(LOOM_PARAM_OFI_DOMAIN);
  char key[256];
  snprintf(key, sizeof key, "%s|%s", spec ? spec : "", domain ? domain : "");
  pthread_mutex_lock(&probe_lock);
  if (cached < 0 || strcmp(key, cached_key) != 0) {
    char prov[64], err[256];
    if (spec != NULL && ofi_spec_check(spec, err, sizeof err) != 0) {
      cached = 0;
      snprintf(cached_why, sizeof cached_why, "%s", err);
    } else if (!chosen_provider(spec, domain, prov, sizeof prov, err, sizeof err)) {
      cached = 0;
      snprintf(cached_why, sizeof cached_why, "%.100s found, but libfabric: %.300s", device, err);
    } else if (!ofi_prov_is_fabric(prov)) {
      cached = 0;
      snprintf(cached_why, sizeof cached_why,
               "%.100s found, but libfabric's provider %.63s is not a fabric (Loom's tcp is "
               "faster)",
               device, prov);
    } else {
      cached = 1;
      snprintf(cached_why, sizeof cached_why, "libfabric provider %.63s is a fabric (%.100s)",
               prov, device);
    }
    snprintf(cached_key, sizeof cached_key, "%s", key);
  }
  int ok = cached;
  snprintf(why, whylen, "%s", cached_why);
  pthread_mutex_unlock(&probe_lock);
  return ok;
}

/* ---- choosing an fi_info ------------------------------------------------- */

/* Whether the provider's source address is the host address Loom uses. */
static int same_host_addr(const struct fi_info *i, const union loom_sockaddr *local) {
  if (i->src_addr == NULL || local == NULL)
    return 0;
  const struct sockaddr *sa = i->src_addr;
  if (sa->sa_family != local->sa.sa_family)
    return 0;
  if (sa->sa_family == AF_INET && i->src_addrlen >= sizeof(struct sockaddr_in))
    return memcmp(&((const struct sockaddr_in *)sa)->sin_addr, &local->sin.sin_addr,
                  sizeof local->sin.sin_addr) == 0;
  if (sa->sa_family == AF_INET6 && i->src_addrlen >= sizeof(struct sockaddr_in6))
    return memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, &local->sin6.sin6_addr,
                  sizeof local->sin6.sin6_addr) == 0;
  return 0;
}

static loomResult_t choose_info(struct ofi_ctx *ctx, const union loom_sockaddr *local,
                                struct fi_info **out, char *how, size_t howlen) {
  const char *spec = loom_param_str(LOOM_PARAM_OFI_PROVIDER);
  const char *domain = loom_param_str(LOOM_PARAM_OFI_DOMAIN);
  char err[512];
  if (spec != NULL && ofi_spec_check(spec, err, sizeof err) != 0)
    return loom_error(loomInvalidArgument, LOOM_LOG_NET, "ofi: rank %d: %s", ctx->rank, err);
  struct fi_info *hints = make_hints(), *list = NULL;
  if (hints == NULL)
    return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
  int rc = fi_getinfo(OFI_API_VERSION, NULL, NULL, 0, hints, &list);
  fi_freeinfo(hints);
  if (rc != 0 && rc != -FI_ENODATA)
    return loom_error(loomSystemError, LOOM_LOG_NET, "ofi: rank %d: fi_getinfo failed: %s",
                      ctx->rank, fi_strerror(-rc));
  const char *names[256];
  struct fi_info *infos[256];
  if (rc != 0)
    list = NULL;
  int n = collect(list, domain, infos, names, 256);
  if (n == 0 && domain != NULL && list != NULL) {
    char domains[256];
    list_domains(list, domains, sizeof domains);
    fi_freeinfo(list);
    return loom_error(loomInvalidArgument, LOOM_LOG_NET,
                      "ofi: rank %d: LOOM_OFI_DOMAIN=%s: no provider has that domain; the "
                      "domains found: %s",
                      ctx->rank, domain, domains);
  }
  int pick = ofi_pick(spec, names, n, err, sizeof err);
  if (pick < 0) {
    if (list != NULL)
      fi_freeinfo(list);
    return loom_error(loomSystemError, LOOM_LOG_NET, "ofi: rank %d: %s%s%s", ctx->rank, err,
                      domain ? " in LOOM_OFI_DOMAIN=" : "", domain ? domain : "");
  }
  /* Among the chosen provider's entries, the one on Loom's own address
   * (socket providers list one per interface and address family). */
  int best = pick;
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], names[pick]) == 0 && same_host_addr(infos[i], local)) {
      best = i;
      break;
    }
  snprintf(how, howlen, "%s", spec ? "LOOM_OFI_PROVIDER" : "best found");
  *out = fi_dupinfo(infos[best]);
  fi_freeinfo(list);
  if (*out == NULL)
    return loom_error(loomSystemError, LOOM_LOG_NET, "out of memory");
  return loomSuccess;
}

/* ---- opening ------------------------------------------------------------- */

static loomResult_t fi_failed(struct ofi_ctx *ctx, const char *call, int rc) {
  loomResult_t res = loom_error(loomSystemError, LOOM_LOG_NET,
                                "ofi: rank %d: %s failed (provider %s, domain %s): %s", ctx->rank,
                                call, ctx->prov, ctx->domain_name, fi_strerror(-rc));
  ofi_close(ctx);
  return res;
}

static int open_cq(struct ofi_ctx *ctx, enum fi_wait_obj wait) {
  struct fi_cq_attr attr = {.size = OFI_CQ_ENTRIES, .format = FI_CQ_FORMAT_TAGGED,
                            .wait_obj = wait};
  return fi_cq_open(ctx->domain, &attr, &ctx->cq, NULL);
}

loomResult_t ofi_open(struct ofi_ctx *ctx, const void *local_sockaddr) {
  char how[64];
  ctx->wait_fd = -1;
  LOOM_CHECK(choose_info(ctx, local_sockaddr, &ctx->info, how, sizeof how));
  struct fi_info *info = ctx->info;
  snprintf(ctx->prov, sizeof ctx->prov, "%s", info->fabric_attr->prov_name);
  snprintf(ctx->domain_name, sizeof ctx->domain_name, "%s",
           info->domain_attr->name ? info->domain_attr->name : "?");
  ctx->mr_local = (info->domain_attr->mr_mode & FI_MR_LOCAL) != 0 || (info->mode & FI_LOCAL_MR);
  ctx->mr_endpoint = (info->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0;
  ctx->part_bytes = ofi_part_bytes(info->ep_attr->max_msg_size);
  ctx->max_inflight[0] = info->rx_attr->size ? info->rx_attr->size : SIZE_MAX;
  ctx->max_inflight[1] = info->tx_attr->size ? info->tx_attr->size : SIZE_MAX;
  int rc;
  if ((rc = fi_fabric(info->fabric_attr, &ctx->fabric, NULL)) != 0)
    return fi_failed(ctx, "fi_fabric", rc);
  if ((rc = fi_domain(ctx->fabric, info, &ctx->domain, NULL)) != 0)
    return fi_failed(ctx, "fi_domain", rc);
  struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = (size_t)ctx->nranks};
  if ((rc = fi_av_open(ctx->domain, &av_attr, &ctx->av, NULL)) != 0)
    return fi_failed(ctx, "fi_av_open", rc);
  /* A wait fd lets an idle rank sleep in poll(); a provider without one
   * makes the engine come back every few microseconds to milliseconds. */
  if (open_cq(ctx, FI_WAIT_FD) == 0) {
    if (fi_control(&ctx->cq->fid, FI_GETWAIT, &ctx->wait_fd) != 0)
      ctx->wait_fd = -1;
  } else if ((rc = open_cq(ctx, FI_WAIT_NONE)) != 0) {
    return fi_failed(ctx, "fi_cq_open", rc);
  }
  if ((rc = fi_endpoint(ctx->domain, info, &ctx->ep, NULL)) != 0)
    return fi_failed(ctx, "fi_endpoint", rc);
  if ((rc = fi_ep_bind(ctx->ep, &ctx->av->fid, 0)) != 0)
    return fi_failed(ctx, "fi_ep_bind(av)", rc);
  if ((rc = fi_ep_bind(ctx->ep, &ctx->cq->fid, FI_TRANSMIT | FI_RECV)) != 0)
    return fi_failed(ctx, "fi_ep_bind(cq)", rc);
  if ((rc = fi_enable(ctx->ep)) != 0)
    return fi_failed(ctx, "fi_enable", rc);
  LOOM_INFO(LOOM_LOG_NET,
            "ofi: rank %d: provider %s (%s), domain %s, fabric %s, %s, %s; messages above "
            "%zu bytes are split",
            ctx->rank, ctx->prov, how, ctx->domain_name,
            info->fabric_attr->name ? info->fabric_attr->name : "?",
            ctx->wait_fd >= 0 ? "waits on a completion fd" : "busy-waits (no wait fd)",
            ctx->mr_local ? "registers buffers (FI_MR_LOCAL, cached)" : "no registration",
            ctx->part_bytes);
  return loomSuccess;
}

void ofi_close(struct ofi_ctx *ctx) {
  if (ctx->ep != NULL)
    fi_close(&ctx->ep->fid);
  if (ctx->cq != NULL)
    fi_close(&ctx->cq->fid);
  if (ctx->av != NULL)
    fi_close(&ctx->av->fid);
  ofi_reqs_free(ctx); /* the slabs' and the cache's registrations */
  if (ctx->domain != NULL)
    fi_close(&ctx->domain->fid);
  if (ctx->fabric != NULL)
    fi_close(&ctx->fabric->fid);
  if (ctx->info != NULL)
    fi_freeinfo(ctx->info);
  ctx->ep = NULL;
  ctx->cq = NULL;
  ctx->av = NULL;
  ctx->domain = NULL;
  ctx->fabric = NULL;
  ctx->info = NULL;
  ctx->wait_fd = -1;
}
