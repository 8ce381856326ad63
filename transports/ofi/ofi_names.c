/*
 * ofi_names.c — which libfabric provider to use: LOOM_OFI_PROVIDER's
 * syntax, what counts as a fabric, and the default order.
 */
#include "ofi/ofi.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define ITEM_MAX (OFI_PROV_NAME_BYTES - 1)

/* Copies item i of a comma-separated list (cut to cap) and returns its
 * full length; -1 when the list has fewer items. */
static int list_item(const char *list, int i, char *item, size_t cap) {
  const char *p = list;
  for (int k = 0; k < i; k++) {
    p += strcspn(p, ",");
    if (*p == '\0')
      return -1;
    p++;
  }
  size_t n = strcspn(p, ",");
  size_t c = n < cap - 1 ? n : cap - 1;
  memcpy(item, p, c);
  item[c] = '\0';
  return (int)n;
}

int ofi_spec_check(const char *spec, char *err, size_t errlen) {
  if (spec == NULL || *spec == '\0') {
    snprintf(err, errlen, "LOOM_OFI_PROVIDER is empty");
    return -1;
  }
  char item[64];
  int len;
  for (int i = 0; (len = list_item(spec, i, item, sizeof item)) >= 0; i++) {
    if (len == 0) {
      snprintf(err, errlen, "LOOM_OFI_PROVIDER=\"%s\": an empty name (names are separated by ',')",
               spec);
      return -1;
    }
    if (len > ITEM_MAX) {
      snprintf(err, errlen, "LOOM_OFI_PROVIDER=\"%s\": a name longer than %d characters",
               spec, ITEM_MAX);
      return -1;
    }
    for (const char *c = item; *c; c++)
      if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-' && *c != ';') {
        snprintf(err, errlen,
                 "LOOM_OFI_PROVIDER=\"%s\": '%c' in \"%s\" (a provider is named like "
                 "\"tcp\", \"tcp;ofi_rxm\" or \"efa\")",
                 spec, *c, item);
        return -1;
      }
    if (item[0] == ';' || item[len - 1] == ';' || strstr(item, ";;") != NULL) {
      snprintf(err, errlen,
               "LOOM_OFI_PROVIDER=\"%s\": \"%s\" is not a provider name (core;utility, "
               "e.g. \"tcp;ofi_rxm\")",
               spec, item);
      return -1;
    }
  }
  return 0;
}

int ofi_prov_matches(const char *item, const char *prov_name) {
  if (item == NULL || prov_name == NULL)
    return 0;
  if (strcmp(item, prov_name) == 0)
    return 1;
  if (strchr(item, ';') != NULL)
    return 0;
  size_t core = strcspn(prov_name, ";");
  return strlen(item) == core && strncmp(item, prov_name, core) == 0;
}

static int core_is(const char *prov_name, const char *core) {
  size_t n = strcspn(prov_name, ";");
  return strlen(core) == n && strncmp(prov_name, core, n) == 0;
}

static const char *const not_fabric[] = {"tcp", "sockets", "udp", "net", "shm", "sm2"};

int ofi_prov_is_fabric(const char *prov_name) {
  if (prov_name == NULL || *prov_name == '\0')
    return 0;
  for (size_t i = 0; i < sizeof not_fabric / sizeof not_fabric[0]; i++)
    if (core_is(prov_name, not_fabric[i]))
      return 0;
  return 1;
}

/* Lower is better. */
static int default_rank(const char *name) {
  static const char *const order[] = {"tcp;ofi_rxm", "tcp", "net", "net;ofi_rxm",
                                      "sockets",     "udp;ofi_rxd", "shm"};
  if (ofi_prov_is_fabric(name))
    return 0;
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
    if (strcmp(name, order[i]) == 0)
      return 1 + (int)i;
  return 100;
}

static void list_names(const char *const *names, int n, char *out, size_t cap) {
  size_t len = 0;
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++)
      seen = strcmp(names[j], names[i]) == 0;
    if (seen)
      continue;
    int k = snprintf(out + len, cap - len, "%s%s", len ? ", " : "", names[i]);
    if (k < 0 || (size_t)k >= cap - len)
      return;
    len += (size_t)k;
  }
}

int ofi_pick(const char *spec, const char *const *names, int n, char *err, size_t errlen) {
  char found[256];
  if (n <= 0) {
    snprintf(err, errlen,
             "libfabric offers no provider with reliable-datagram endpoints and tagged "
             "messages (FI_EP_RDM, FI_TAGGED)%s%s",
             spec ? " for LOOM_OFI_PROVIDER=" : "", spec ? spec : "");
    return -1;
  }
  if (spec == NULL || *spec == '\0') {
    int best = 0;
    for (int i = 1; i < n; i++)
      if (default_rank(names[i]) < default_rank(names[best]))
        best = i;
    return best;
  }
  char item[64];
  for (int k = 0; list_item(spec, k, item, sizeof item) >= 0; k++)
    for (int i = 0; i < n; i++)
      if (ofi_prov_matches(item, names[i]))
        return i;
  list_names(names, n, found, sizeof found);
  snprintf(err, errlen, "LOOM_OFI_PROVIDER=\"%s\" matches none of the providers found: %s",
           spec, found);
  return -1;
}
