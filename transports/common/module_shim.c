/*
 * module_shim.c — libloom's core services inside a transport module
 * (module.h): loom_error, the last-error text, the log, the LOOM_* table
 * and its parsers, each forwarded to the library that loaded the module, so that
 * the module holds no state of its own and its messages land in the
 * library's last error and log.  Compiled into every module, never into
 * libloom.
 */
#include "common/module.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

/* The same size as the library's own last-error buffer (core/error.c). */
#define SHIM_TEXT_BYTES 1024

static const struct loom_module_host *host;

/* Formats the variadic arguments that follow fmt into the array text. */
#define SHIM_FORMAT(text, fmt)                                                                 \
  do {                                                                                         \
    va_list ap;                                                                                \
    va_start(ap, fmt);                                                                         \
    vsnprintf(text, sizeof text, fmt, ap);                                                     \
    va_end(ap);                                                                                \
  } while (0)

void loom_module_bind(const struct loom_module_host *h) { host = h; }

loomResult_t loom_error(loomResult_t code, int subsys, const char *fmt, ...) {
  char text[SHIM_TEXT_BYTES];
  SHIM_FORMAT(text, fmt);
  if (host != NULL)
    host->error(code, subsys, text);
  return code;
}

loomResult_t loom_error_record(loomResult_t code, const char *fmt, ...) {
  char text[SHIM_TEXT_BYTES];
  SHIM_FORMAT(text, fmt);
  if (host != NULL)
    host->set_last_error(text);
  return code;
}

const char *loom_last_error(void) { return host != NULL ? host->last_error() : ""; }

void loom_clear_last_error(void) {
  if (host != NULL)
    host->set_last_error("");
}

void loom_set_last_error(const char *text) {
  if (host != NULL)
    host->set_last_error(text);
}

int loom_log_enabled(int level, int subsys) {
  return host != NULL && host->log_enabled(level, subsys);
}

void loom_log_write(int level, int subsys, const char *file, int line, const char *fmt, ...) {
  char text[SHIM_TEXT_BYTES];
  SHIM_FORMAT(text, fmt);
  if (host != NULL)
    host->log_text(level, subsys, file, line, text);
}

int64_t loom_param_int(loom_param_id id) { return host != NULL ? host->param_int((int)id) : 0; }

const char *loom_param_str(loom_param_id id) {
  return host != NULL ? host->param_str((int)id) : NULL;
}

int loom_param_is_set(loom_param_id id) {
  return host != NULL && host->param_is_set((int)id);
}

int loom_parse_int(const char *text, int64_t *out) {
  return host != NULL ? host->parse_int(text, out) : -1;
}

int loom_parse_port_range(const char *text, int *lo, int *hi) {
  return host != NULL ? host->parse_port_range(text, lo, hi) : -1;
}
