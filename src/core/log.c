/*
 * log.c — the log writer: one line per call, host:pid:rank prefix.
 */
#include "core/log.h"
#include "core/config.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int log_loaded;
static int log_level_value = LOOM_LOG_LEVEL_WARN;
static int log_subsys_mask = LOOM_LOG_ALL;
static FILE *log_file;
static char log_host[64];
/* initial-exec: read on every call; a few bytes of static TLS, which a
 * dlopen()ed libloom still gets from glibc's reserve */
static __thread int log_rank __attribute__((tls_model("initial-exec"))) = -1;

static const struct {
  const char *name;
  int bit;
} subsys_names[] = {
    {.name = "INIT", .bit = LOOM_LOG_INIT}, {.name = "BOOTSTRAP", .bit = LOOM_LOG_BOOTSTRAP},
    {.name = "NET", .bit = LOOM_LOG_NET},   {.name = "COLL", .bit = LOOM_LOG_COLL},
    {.name = "ENV", .bit = LOOM_LOG_ENV},   {.name = "ALL", .bit = LOOM_LOG_ALL},
};

int loom_log_parse_subsys(const char *text) {
  if (text == NULL || *text == '\0')
    return LOOM_LOG_ALL;
  int exclude = 0;
  if (*text == '^') {
    exclude = 1;
    text++;
  }
  int mask = 0;
  const char *p = text;
  while (*p) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    for (size_t i = 0; i < sizeof subsys_names / sizeof subsys_names[0]; i++)
      if (strlen(subsys_names[i].name) == len &&
          strncasecmp(subsys_names[i].name, p, len) == 0)
        mask |= subsys_names[i].bit;
    p += len;
    if (*p == ',')
      p++;
  }
  return exclude ? (LOOM_LOG_ALL & ~mask) : mask;
}

void loom_log_expand_path(const char *pattern, const char *host, long pid,
                          char *out, unsigned long out_len) {
  size_t o = 0;
  if (out_len == 0)
    return;
  for (const char *p = pattern; *p && o + 1 < out_len; p++) {
    if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
      char tmp[64];
      if (p[1] == 'h')
        snprintf(tmp, sizeof tmp, "%s", host);
      else
        snprintf(tmp, sizeof tmp, "%ld", pid);
      for (const char *t = tmp; *t && o + 1 < out_len; t++)
        out[o++] = *t;
      p++;
    } else {
      out[o++] = *p;
    }
  }
  out[o] = '\0';
}

static int parse_level(const char *text) {
  if (text == NULL)
    return LOOM_LOG_LEVEL_WARN;
  if (strcasecmp(text, "NONE") == 0)
    return LOOM_LOG_LEVEL_NONE;
  if (strcasecmp(text, "INFO") == 0)
    return LOOM_LOG_LEVEL_INFO;
  if (strcasecmp(text, "TRACE") == 0)
    return LOOM_LOG_LEVEL_TRACE;
  return LOOM_LOG_LEVEL_WARN;
}

/* Called with log_lock held. */
static void load_settings(void) {
  if (atomic_load_explicit(&log_loaded, memory_order_relaxed)) /* under log_lock */
    return;
  gethostname(log_host, sizeof log_host - 1);
  char *dot = strchr(log_host, '.');
  if (dot)
    *dot = '\0';
  log_level_value = parse_level(loom_param_str(LOOM_PARAM_DEBUG));
  log_subsys_mask = loom_log_parse_subsys(loom_param_str(LOOM_PARAM_DEBUG_SUBSYS));
  const char *pattern = loom_param_str(LOOM_PARAM_DEBUG_FILE);
  if (log_file != NULL && log_file != stderr)
    fclose(log_file);
  log_file = stderr;
  if (pattern != NULL && *pattern != '\0') {
    char path[512];
    loom_log_expand_path(pattern, log_host, (long)getpid(), path, sizeof path);
    FILE *f = fopen(path, "a");
    if (f != NULL) {
      setvbuf(f, NULL, _IOLBF, 0);
      log_file = f;
    } else {
      fprintf(stderr, "loom: cannot open LOOM_DEBUG_FILE %s; logging to stderr\n",
              path);
    }
  }
  atomic_store_explicit(&log_loaded, 1, memory_order_release);
}

static void ensure_loaded(void) {
  if (atomic_load_explicit(&log_loaded, memory_order_acquire))
    return;
  pthread_mutex_lock(&log_lock);
  load_settings();
  pthread_mutex_unlock(&log_lock);
}

int loom_log_enabled(int level, int subsys) {
  ensure_loaded();
  return level <= log_level_value && (subsys & log_subsys_mask) != 0;
}

void loom_log_set_rank(int rank) { log_rank = rank; }
int loom_log_get_rank(void) { return log_rank; }

void loom_log_reload(void) {
  pthread_mutex_lock(&log_lock);
  atomic_store_explicit(&log_loaded, 0, memory_order_release);
  load_settings();
  pthread_mutex_unlock(&log_lock);
}

void loom_log_write(int level, int subsys, const char *file, int line,
                    const char *fmt, ...) {
  static const char *level_names[] = {"NONE", "WARN", "INFO", "TRACE"};
  (void)subsys;
  ensure_loaded();
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  struct timeval tv;
  gettimeofday(&tv, NULL);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char rank_text[16];
  if (log_rank >= 0)
    snprintf(rank_text, sizeof rank_text, "%d", log_rank);
  else
    snprintf(rank_text, sizeof rank_text, "-");
  pthread_mutex_lock(&log_lock);
  if (level == LOOM_LOG_LEVEL_TRACE)
    fprintf(log_file, "%s:%ld:%s [%ld.%06ld] LOOM %s %s:%d %s\n", log_host,
            (long)getpid(), rank_text, (long)tv.tv_sec, (long)tv.tv_usec,
            level_names[level], base, line, msg);
  else
    fprintf(log_file, "%s:%ld:%s LOOM %s %s\n", log_host, (long)getpid(),
            rank_text, level_names[level], msg);
  fflush(log_file);
  pthread_mutex_unlock(&log_lock);
}
