/*
 * log.h — leveled, per-subsystem logging, every line tagged host:pid:rank.
 *
 * LOOM_DEBUG picks the level, LOOM_DEBUG_SUBSYS the subsystems and
 * LOOM_DEBUG_FILE the destination (%h = hostname, %p = pid).
 */
#ifndef LOOM_CORE_LOG_H
#define LOOM_CORE_LOG_H

enum loom_log_level {
  LOOM_LOG_LEVEL_NONE = 0,
  LOOM_LOG_LEVEL_WARN = 1,
  LOOM_LOG_LEVEL_INFO = 2,
  LOOM_LOG_LEVEL_TRACE = 3,
};

enum loom_log_subsys {
  LOOM_LOG_INIT = 1 << 0,
  LOOM_LOG_BOOTSTRAP = 1 << 1,
  LOOM_LOG_NET = 1 << 2,
  LOOM_LOG_COLL = 1 << 3,
  LOOM_LOG_ENV = 1 << 4,
  LOOM_LOG_ALL = 0xffff,
};

/* Whether a message of this level and subsystem would be written. */
int loom_log_enabled(int level, int subsys);

void loom_log_write(int level, int subsys, const char *file, int line,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The rank shown in this thread's log lines (-1 = not in a communicator). */
void loom_log_set_rank(int rank);
int loom_log_get_rank(void);

/* Re-reads LOOM_DEBUG* (tests). */
void loom_log_reload(void);

/* Parses a LOOM_DEBUG_SUBSYS value into a mask (exposed for tests). */
int loom_log_parse_subsys(const char *text);
/* Expands %h and %p in a LOOM_DEBUG_FILE pattern (exposed for tests). */
void loom_log_expand_path(const char *pattern, const char *host, long pid,
                          char *out, unsigned long out_len);

#define LOOM_LOG_(level, subsys, ...)                                          \
  do {                                                                         \
    if (loom_log_enabled((level), (subsys)))                                   \
      loom_log_write((level), (subsys), __FILE__, __LINE__, __VA_ARGS__);      \
  } while (0)

#define LOOM_WARN(subsys, ...) LOOM_LOG_(LOOM_LOG_LEVEL_WARN, subsys, __VA_ARGS__)
#define LOOM_INFO(subsys, ...) LOOM_LOG_(LOOM_LOG_LEVEL_INFO, subsys, __VA_ARGS__)
#define LOOM_TRACE(subsys, ...) LOOM_LOG_(LOOM_LOG_LEVEL_TRACE, subsys, __VA_ARGS__)

#endif
