/*
 * ofi_module.c — what libloom-net-ofi.so exports (common/module.h): the
 * libfabric transport, the default selection's question
 * (loom_ofi_default_ok) and, for loom-topo, the providers libfabric offers.
 */
#include "config.h"
#include "ofi/ofi.h"
#include "common/module.h"
#include "core/config.h"
#include "topo/topo.h"

#include <stdio.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

/* Appends ",name" to a field unless already there or out of room. */
static void append_distinct(char *field, size_t cap, const char *name) {
  size_t len = strlen(field), n = strlen(name);
  for (const char *p = field; *p;) {
    size_t k = strcspn(p, ",");
    if (k == n && strncmp(p, name, n) == 0)
      return;
    p += k + (p[k] == ',');
  }
  if (len + (len > 0) + n + 1 > cap)
    return;
  if (len > 0)
    field[len++] = ',';
  memcpy(field + len, name, n + 1);
}

/* The entry for a provider among out[0..n), added when new (n grows). */
static struct loom_topo_nic *provider_entry(struct loom_topo_nic *out, int *n, int max,
                                            const char *prov) {
  for (int k = 0; k < *n; k++)
    if (strncmp(out[k].name, prov, sizeof out[k].name - 1) == 0)
      return &out[k];
  if (*n >= max)
    return NULL;
  struct loom_topo_nic *nic = &out[(*n)++];
  memset(nic, 0, sizeof *nic);
  snprintf(nic->name, sizeof nic->name, "%s", prov);
  snprintf(nic->kind, sizeof nic->kind, "ofi");
  nic->numa = -1;
  return nic;
}

/* One entry per provider, its domains (e.g. "eth0,lo") as the address. */
static int list_providers(struct loom_topo_nic *out, int max, char *why, size_t len) {
  struct fi_info *hints = fi_allocinfo(), *info = NULL;
  if (hints == NULL) {
    snprintf(why, len, "out of memory");
    return -1;
  }
  hints->ep_attr->type = FI_EP_RDM;
  int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints,
                      &info);
  fi_freeinfo(hints);
  if (rc != 0) {
    snprintf(why, len, "fi_getinfo: %s", fi_strerror(-rc));
    return rc == -FI_ENODATA ? 0 : -1;
  }
  int n = 0;
  for (struct fi_info *i = info; i != NULL; i = i->next) {
    const char *prov = i->fabric_attr && i->fabric_attr->prov_name ? i->fabric_attr->prov_name
                                                                    : "?";
    struct loom_topo_nic *nic = provider_entry(out, &n, max, prov);
    if (nic == NULL)
      break;
    if (i->domain_attr && i->domain_attr->name)
      append_distinct(nic->addr, sizeof nic->addr, i->domain_attr->name);
    if (i->nic && i->nic->link_attr) {
      uint64_t mbps = i->nic->link_attr->speed / 1000000u;
      if (mbps > (uint64_t)nic->speed_mbps)
        nic->speed_mbps = mbps > INT32_MAX ? INT32_MAX : (int32_t)mbps;
    }
  }
  fi_freeinfo(info);
  return n;
}

const struct loom_transport_module LOOM_MODULE_NAME = {
    .abi = LOOM_MODULE_ABI,
    .version = PACKAGE_VERSION,
    .param_count = LOOM_PARAM_COUNT,
    .name = "ofi",
    .bind = loom_module_bind,
    .transport = &loom_transport_ofi,
    .available = loom_ofi_default_ok,
    .list_devices = list_providers,
};
