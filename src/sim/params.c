/*
 * params.c — loom-sim's parameters: the built-in calibration of the
 * development machine and the calibration file.
 *
 * The file is "key = value" lines; '#' starts a comment; blank lines are
 * ignored.  Keys:
 *   NAME.alpha_us = 7.3     a transport's message latency, microseconds
 *   NAME.bw_gbps = 4.9      the rate one rank injects messages at, GB/s (1e9 B/s)
 *   NAME.overhead_us = 0.5  engine time per message slice at each end, microseconds
 *   reduce_gbps = 10        reduction bandwidth, GB/s of one operand
 *   copy_gbps = 10          local copy bandwidth, GB/s
 *   llc_mib = 32            a node's last-level cache, MiB (0: no cache model)
 *   mem_factor = 1.5        byte costs from memory / from the cache
 *   cores = 2               cores of the machine measured
 *   intra = shm             the transport between ranks of a node
 *   inter = tcp             the transport between nodes
 *   source = free text      where the numbers come from
 * NAME is a transport ([a-z0-9_], up to 15 characters); a file may name
 * any of them and need not give every key (the rest keep their values).
 */
#include "sim/sim.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The development machine (2-vCPU AMD EPYC VM, 32 MiB L3, loopback only),
 * 2026-11-30: alpha, bw and overhead per transport and the memory factor
 * fitted by `loom-sim --fit` to the 2-rank runs of tools/loom-sim-measure.sh
 * (3 repetitions); reduce and copy bandwidth from `loom-sim --measure-host`
 * (512 KiB slices, in cache).  docs/simulator.md, "Calibration". */
#define DEFAULT_SHM_ALPHA_US 7.47
#define DEFAULT_SHM_BW_GBPS 4.89
#define DEFAULT_SHM_OVERHEAD_US 0.11
#define DEFAULT_TCP_ALPHA_US 13.9
#define DEFAULT_TCP_BW_GBPS 2.15
#define DEFAULT_TCP_OVERHEAD_US 5.24
#define DEFAULT_REDUCE_GBPS 17.0
#define DEFAULT_COPY_GBPS 30.0
#define DEFAULT_CORES 2
#define DEFAULT_LLC_MIB 32
#define DEFAULT_MEM_FACTOR 1.88

static struct loom_sim_transport *transport_get(struct loom_sim_calibration *c,
                                                const char *name, size_t len) {
  for (int i = 0; i < c->ntp; i++)
    if (strlen(c->tp[i].name) == len && strncmp(c->tp[i].name, name, len) == 0)
      return &c->tp[i];
  if (c->ntp == LOOM_SIM_MAX_TRANSPORTS || len == 0 || len >= sizeof c->tp[0].name)
    return NULL;
  struct loom_sim_transport *t = &c->tp[c->ntp++];
  memset(t, 0, sizeof *t);
  memcpy(t->name, name, len);
  return t;
}

void loom_sim_calibration_default(struct loom_sim_calibration *c) {
  memset(c, 0, sizeof *c);
  struct loom_sim_transport *shm = transport_get(c, "shm", 3), *tcp = transport_get(c, "tcp", 3);
  shm->level.alpha = DEFAULT_SHM_ALPHA_US * 1e-6;
  shm->level.bw = DEFAULT_SHM_BW_GBPS * 1e9;
  shm->level.overhead = DEFAULT_SHM_OVERHEAD_US * 1e-6;
  tcp->level.alpha = DEFAULT_TCP_ALPHA_US * 1e-6;
  tcp->level.bw = DEFAULT_TCP_BW_GBPS * 1e9;
  tcp->level.overhead = DEFAULT_TCP_OVERHEAD_US * 1e-6;
  c->reduce_bw = DEFAULT_REDUCE_GBPS * 1e9;
  c->copy_bw = DEFAULT_COPY_GBPS * 1e9;
  c->cores = DEFAULT_CORES;
  c->llc_bytes = DEFAULT_LLC_MIB * 1048576.0;
  c->mem_factor = DEFAULT_MEM_FACTOR;
  snprintf(c->intra, sizeof c->intra, "shm");
  snprintf(c->inter, sizeof c->inter, "tcp");
  snprintf(c->source, sizeof c->source,
           "built in: the development machine (2-vCPU VM), docs/simulator.md");
}

const struct loom_sim_transport *loom_sim_transport_find(const struct loom_sim_calibration *c,
                                                         const char *name) {
  for (int i = 0; i < c->ntp; i++)
    if (strcmp(c->tp[i].name, name) == 0)
      return &c->tp[i];
  return NULL;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s))
    s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1]))
    *--e = '\0';
  return s;
}

/* A positive number (zero allowed when zero_ok). */
static int parse_num(const char *v, int zero_ok, double *out) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (errno != 0 || end == v || *end != '\0' || !(x > 0 || (zero_ok && x == 0)))
    return -1;
  *out = x;
  return 0;
}

static int valid_name(const char *s, size_t len) {
  if (len == 0 || len >= 16)
    return 0;
  for (size_t i = 0; i < len; i++)
    if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '_'))
      return 0;
  return 1;
}

/* One "key = value" line; NULL or what is wrong with it. */
static const char *apply(struct loom_sim_calibration *c, char *key, char *val) {
  double x;
  char *dot = strchr(key, '.');
  if (dot != NULL) {
    size_t len = (size_t)(dot - key);
    if (!valid_name(key, len))
      return "a transport name is 1-15 characters of a-z, 0-9 and _";
    const char *field = dot + 1;
    int is_alpha = strcmp(field, "alpha_us") == 0, is_bw = strcmp(field, "bw_gbps") == 0;
    int is_oh = strcmp(field, "overhead_us") == 0;
    if (!is_alpha && !is_bw && !is_oh)
      return "unknown transport key (alpha_us, bw_gbps, overhead_us)";
    if (parse_num(val, !is_bw, &x) != 0)
      return is_bw ? "bw_gbps must be a number > 0" : "a time must be a number >= 0";
    struct loom_sim_transport *t = transport_get(c, key, len);
    if (t == NULL)
      return "too many transports";
    if (is_alpha)
      t->level.alpha = x * 1e-6;
    else if (is_oh)
      t->level.overhead = x * 1e-6;
    else
      t->level.bw = x * 1e9;
    return NULL;
  }
  if (strcmp(key, "reduce_gbps") == 0 || strcmp(key, "copy_gbps") == 0) {
    if (parse_num(val, 0, &x) != 0)
      return "a bandwidth must be a number > 0";
    *(key[0] == 'r' ? &c->reduce_bw : &c->copy_bw) = x * 1e9;
    return NULL;
  }
  if (strcmp(key, "llc_mib") == 0) {
    if (parse_num(val, 1, &x) != 0)
      return "llc_mib must be a number >= 0";
    c->llc_bytes = x * 1048576.0;
    return NULL;
  }
  if (strcmp(key, "mem_factor") == 0) {
    if (parse_num(val, 0, &x) != 0 || x < 1)
      return "mem_factor must be a number >= 1";
    c->mem_factor = x;
    return NULL;
  }
  if (strcmp(key, "cores") == 0) {
    if (parse_num(val, 1, &x) != 0 || x != (int)x || x > 1e6)
      return "cores must be a whole number >= 0";
    c->cores = (int)x;
    return NULL;
  }
  if (strcmp(key, "intra") == 0 || strcmp(key, "inter") == 0) {
    if (!valid_name(val, strlen(val)))
      return "a transport name is 1-15 characters of a-z, 0-9 and _";
    snprintf(key[3] == 'r' ? c->intra : c->inter, sizeof c->intra, "%s", val);
    return NULL;
  }
  if (strcmp(key, "source") == 0) {
    snprintf(c->source, sizeof c->source, "%s", val);
    return NULL;
  }
  return "unknown key (NAME.alpha_us, NAME.bw_gbps, NAME.overhead_us, reduce_gbps, copy_gbps, "
         "llc_mib, mem_factor, cores, intra, inter, source)";
}

int loom_sim_calibration_read(struct loom_sim_calibration *c, const char *path, char *err,
                              size_t errlen) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  char line[512];
  int lineno = 0, rc = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    lineno++;
    char *hash = strchr(line, '#');
    if (hash != NULL)
      *hash = '\0';
    char *s = trim(line);
    if (*s == '\0')
      continue;
    char *eq = strchr(s, '=');
    if (eq == NULL) {
      snprintf(err, errlen, "%s:%d: expected \"key = value\"", path, lineno);
      rc = -1;
      break;
    }
    *eq = '\0';
    const char *why = apply(c, trim(s), trim(eq + 1));
    if (why != NULL) {
      snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
      rc = -1;
      break;
    }
  }
  fclose(f);
  if (rc == 0) {
    for (int i = 0; i < c->ntp; i++)
      if (c->tp[i].level.bw <= 0) {
        snprintf(err, errlen, "%s: transport %s has no bw_gbps", path, c->tp[i].name);
        return -1;
      }
  }
  return rc;
}

void loom_sim_calibration_write(const struct loom_sim_calibration *c, FILE *f) {
  fprintf(f, "# loom-sim calibration (docs/simulator.md)\nsource = %s\n", c->source);
  for (int i = 0; i < c->ntp; i++)
    fprintf(f, "%s.alpha_us = %.3g\n%s.bw_gbps = %.3g\n%s.overhead_us = %.3g\n",
            c->tp[i].name, c->tp[i].level.alpha * 1e6, c->tp[i].name, c->tp[i].level.bw / 1e9,
            c->tp[i].name, c->tp[i].level.overhead * 1e6);
  fprintf(f,
          "reduce_gbps = %.3g\ncopy_gbps = %.3g\nllc_mib = %.3g\nmem_factor = %.3g\ncores = %d\n"
          "intra = %s\ninter = %s\n",
          c->reduce_bw / 1e9, c->copy_bw / 1e9, c->llc_bytes / 1048576.0, c->mem_factor, c->cores,
          c->intra, c->inter);
}

int loom_sim_params_from(const struct loom_sim_calibration *c, const char *intra,
                         const char *inter, struct loom_sim_params *p, char *err,
                         size_t errlen) {
  const char *names[2] = {intra ? intra : c->intra, inter ? inter : c->inter};
  struct loom_sim_level *lv[2] = {&p->intra, &p->inter};
  memset(p, 0, sizeof *p);
  for (int i = 0; i < 2; i++) {
    const struct loom_sim_transport *t = loom_sim_transport_find(c, names[i]);
    if (t == NULL) {
      snprintf(err, errlen, "no transport \"%s\" in the calibration", names[i]);
      return -1;
    }
    *lv[i] = t->level;
  }
  p->nic_bw = p->inter.bw; /* one rank can fill its node's NIC */
  p->reduce_bw = c->reduce_bw;
  p->copy_bw = c->copy_bw;
  p->llc_bytes = c->llc_bytes;
  p->mem_factor = c->mem_factor;
  p->cores = 0;
  p->chunk_bytes = 512u << 10;
  return 0;
}
