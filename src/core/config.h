/*
 * config.h — the one table of LOOM_* environment variables.
 *
 * Every tunable is declared once in config.c (name, type, default, help) and
 * read through these accessors; nothing else in Loom calls getenv() for a
 * LOOM_* variable.  loom-info prints the table.
 */
#ifndef LOOM_CORE_CONFIG_H
#define LOOM_CORE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  LOOM_PARAM_DEBUG,
  LOOM_PARAM_DEBUG_SUBSYS,
  LOOM_PARAM_DEBUG_FILE,
  LOOM_PARAM_COMM_ID,
  LOOM_PARAM_COMM_SECRET,
  LOOM_PARAM_RANK,
  LOOM_PARAM_NRANKS,
  LOOM_PARAM_LOCAL_RANK,
  LOOM_PARAM_SOCKET_IFNAME,
  LOOM_PARAM_SOCKET_FAMILY,
  LOOM_PARAM_PORT_RANGE,
  LOOM_PARAM_BOOTSTRAP_TIMEOUT,
  LOOM_PARAM_TIMEOUT_MS,
  LOOM_PARAM_SOCKET_NSOCKS,
  LOOM_PARAM_CONNECT,
  LOOM_PARAM_CHUNK_BYTES,
  LOOM_PARAM_SPIN_US,
  LOOM_PARAM_BUCKET_BYTES,
  LOOM_PARAM_SHM_DISABLE,
  LOOM_PARAM_SHM_CMA,
  LOOM_PARAM_SHM_DIRECT_REDUCE,
  LOOM_PARAM_SHM_NODE_BYTES,
  LOOM_PARAM_ALGO,
  LOOM_PARAM_PROTO,
  LOOM_PARAM_NCHANNELS,
  LOOM_PARAM_HOSTID,
  LOOM_PARAM_TOPO_DUMP_FILE,
  LOOM_PARAM_TOPO_FILE,
  LOOM_PARAM_TUNE_FILE,
  LOOM_PARAM_NET,
  LOOM_PARAM_NET_PLUGIN,
  LOOM_PARAM_MODULE_PATH,
  LOOM_PARAM_OFI_PROVIDER,
  LOOM_PARAM_OFI_DOMAIN,
  LOOM_PARAM_IB_HCA,
  LOOM_PARAM_IB_GID_INDEX,
  LOOM_PARAM_IB_TIMEOUT,
  LOOM_PARAM_IB_RETRY_CNT,
  LOOM_PARAM_SIM_DELAY_US,
  LOOM_PARAM_DEVICE_IPC,
  LOOM_PARAM_HOST_IPC_MIN,
  LOOM_PARAM_STRAGGLER_WARN_MS,
  LOOM_PARAM_TRACE_BUFFER,
  LOOM_PARAM_TRACE_DUMP_DIR,
  LOOM_PARAM_DUMP_ON_ERROR,
  LOOM_PARAM_DUMP_ON_SIGNAL,
  LOOM_PARAM_COUNT
} loom_param_id;

typedef enum {
  LOOM_PARAM_T_INT,    /* decimal integer */
  LOOM_PARAM_T_SIZE,   /* byte count with optional K/M/G suffix (powers of 2) */
  LOOM_PARAM_T_STRING, /* free text, validated by its user */
} loom_param_type;

struct loom_param_info {
  const char *name; /* full variable name, e.g. "LOOM_DEBUG" */
  loom_param_type type;
  const char *default_value; /* as text; NULL = unset */
  int64_t min, max;          /* bounds for INT and SIZE */
  const char *help;
};

/* The table itself, LOOM_PARAM_COUNT entries, in loom_param_id order. */
const struct loom_param_info *loom_param_table(void);

/* Typed values.  A value that does not parse or is out of bounds is reported
 * once (WARN) and the default is used instead. */
int64_t loom_param_int(loom_param_id id);
/* NULL when unset and without default. */
const char *loom_param_str(loom_param_id id);
/* LOOM_CONNECT: 1 lazy (the default), 0 eager, -1 anything else
 * (reported as loomInvalidArgument). */
int loom_connect_lazy(void);
/* Whether the variable is set in the environment (not just defaulted). */
int loom_param_is_set(loom_param_id id);

/* Parses "123", "4K", "64M", "1G" into bytes; 0 on success, -1 on error. */
int loom_parse_size(const char *text, int64_t *out);
/* Parses a decimal integer with optional sign; 0 on success, -1 on error. */
int loom_parse_int(const char *text, int64_t *out);
/* Parses "lo-hi" (1 <= lo <= hi <= 65535); 0 on success, -1 on error. */
int loom_parse_port_range(const char *text, int *lo, int *hi);

/* Re-reads the environment (tests change it between cases). */
void loom_config_reload(void);

#endif
