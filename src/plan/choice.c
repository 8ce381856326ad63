/*
 * choice.c — NCCL_ALGO/NCCL_PROTO's syntax, for LOOM_ALGO and LOOM_PROTO:
 * ';'-separated items, each an optional collective and ':' then a comma
 * list of names, or '^' and the names to exclude.
 */
#include "plan/plan.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define COLL_LIST "allreduce, allgather, reducescatter, broadcast, reduce"

static int find_coll(const char *name, size_t len) {
  for (int c = 0; c < LOOM_COLL_COUNT; c++) {
    const char *cn = loom_coll_name((enum loom_coll)c);
    if (strlen(cn) == len && strncasecmp(cn, name, len) == 0)
      return c;
  }
  return -1;
}

static int find_name(const struct loom_choice_kind *k, const char *name, size_t len) {
  for (int a = k->first; a < k->count; a++)
    if (strlen(k->names[a]) == len && strncasecmp(k->names[a], name, len) == 0)
      return a;
  return -1;
}

static const char *mask_text(const struct loom_choice_kind *k, unsigned mask, char *buf,
                             size_t len) {
  size_t o = 0;
  buf[0] = '\0';
  for (int a = k->first; a < k->count && o < len; a++)
    if (mask & (1u << a))
      o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "", k->names[a]);
  return buf;
}

/* One item's list ("tree,ring" or "^oneshot") as a mask. */
static int parse_list(const struct loom_choice_kind *k, const char *spec, const char *p,
                      size_t len, unsigned *mask, int *exclude, char *err, size_t errlen) {
  *exclude = len > 0 && *p == '^';
  if (*exclude) {
    p++;
    len--;
  }
  *mask = 0;
  if (len == 0) {
    snprintf(err, errlen, "%s=\"%s\": an item lists no %s", k->var, spec, k->what);
    return -1;
  }
  const char *end = p + len;
  while (p <= end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    size_t n = (size_t)((comma ? comma : end) - p);
    int a = find_name(k, p, n);
    if (a < 0) {
      snprintf(err, errlen, "%s=\"%s\": unknown %s \"%.*s\" (known: %s)", k->var, spec, k->what,
               (int)n, p, k->list);
      return -1;
    }
    *mask |= 1u << a;
    if (comma == NULL)
      break;
    p = comma + 1;
  }
  return 0;
}

/* An item naming collective `c`: its mask, or -1 with the reason. */
static int named_item(const struct loom_choice_kind *k, const char *spec, int c, const char *cname,
                      size_t clen, unsigned mask, int exclude, unsigned *out, char *err,
                      size_t errlen) {
  unsigned has = c >= 0 ? k->coll_mask(c) : 0;
  if (has == 0) {
    snprintf(err, errlen, "%s=\"%s\": \"%.*s\" is not a collective with a choice of %s (%s)",
             k->var, spec, (int)clen, cname, k->what, COLL_LIST);
    return -1;
  }
  unsigned bad = mask & ~has;
  if (bad != 0) {
    char names[64];
    snprintf(err, errlen, "%s=\"%s\": %s has no %s %s", k->var, spec,
             loom_coll_name((enum loom_coll)c), k->what, mask_text(k, bad, names, sizeof names));
    return -1;
  }
  *out = exclude ? has & ~mask : mask;
  if (*out == 0) {
    snprintf(err, errlen, "%s=\"%s\": excludes every %s %s has", k->var, spec, k->what,
             loom_coll_name((enum loom_coll)c));
    return -1;
  }
  return 0;
}

int loom_choice_parse(const struct loom_choice_kind *k, const char *spec,
                      unsigned allowed[LOOM_COLL_COUNT], char *err, size_t errlen) {
  unsigned plain[LOOM_COLL_COUNT], named[LOOM_COLL_COUNT];
  int has_named[LOOM_COLL_COUNT];
  for (int c = 0; c < LOOM_COLL_COUNT; c++) {
    plain[c] = named[c] = 0;
    has_named[c] = 0;
  }
  const char *p = spec != NULL ? spec : "";
  while (*p != '\0') {
    size_t len = strcspn(p, ";");
    if (len > 0) {
      const char *colon = memchr(p, ':', len);
      const char *lp = colon ? colon + 1 : p;
      size_t llen = colon ? len - (size_t)(colon - p) - 1 : len;
      unsigned mask;
      int exclude;
      if (parse_list(k, spec, lp, llen, &mask, &exclude, err, errlen) != 0)
        return -1;
      if (colon != NULL) {
        size_t clen = (size_t)(colon - p);
        int c = find_coll(p, clen);
        unsigned m;
        if (named_item(k, spec, c, p, clen, mask, exclude, &m, err, errlen) != 0)
          return -1;
        named[c] = m;
        has_named[c] = 1;
      } else {
        for (int c = 0; c < LOOM_COLL_COUNT; c++) {
          unsigned has = k->coll_mask(c);
          if ((has & mask) == 0)
            continue; /* names none of its choices: no limit */
          unsigned m = exclude ? has & ~mask : has & mask;
          plain[c] = m != 0 ? m : plain[c];
        }
      }
    }
    p += len;
    if (*p == ';')
      p++;
  }
  for (int c = 0; c < LOOM_COLL_COUNT; c++)
    allowed[c] = has_named[c] ? named[c] : plain[c];
  return 0;
}
