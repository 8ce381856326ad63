/*
 * error.c — result-code strings and the per-thread last error.
 */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static __thread char last_error[1024];

/* Formats into the last error through a copy: an argument may be the last
 * error itself (loom_error(res, subsys, "%s", loom_last_error()) passing
 * on a recorded error), which formatting in place would lose. */
static void record(const char *fmt, va_list ap) {
  char text[sizeof last_error];
  vsnprintf(text, sizeof text, fmt, ap);
  memcpy(last_error, text, sizeof text);
}

loomResult_t loom_error(loomResult_t code, int subsys, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(fmt, ap);
  va_end(ap);
  LOOM_WARN(subsys, "%s: %s", loomGetErrorString(code), last_error);
  return code;
}

loomResult_t loom_check_errnum(int err, int subsys, const char *what) {
  if (err == 0)
    return loomSuccess;
  return loom_error(loomSystemError, subsys, "%s: %s", what, strerror(err));
}

loomResult_t loom_error_record(loomResult_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(fmt, ap);
  va_end(ap);
  return code;
}

const char *loom_last_error(void) { return last_error; }
void loom_clear_last_error(void) { last_error[0] = '\0'; }
void loom_set_last_error(const char *text) {
  if (text != last_error)
    snprintf(last_error, sizeof last_error, "%s", text);
}

const char *loomGetErrorString(loomResult_t result) {
  switch (result) {
  case loomSuccess:
    return "no error";
  case loomUnhandledCudaError:
    return "unhandled device runtime error";
  case loomSystemError:
    return "system error (a system call failed; see the log)";
  case loomInternalError:
    return "internal error (a bug in Loom)";
  case loomInvalidArgument:
    return "invalid argument";
  case loomInvalidUsage:
    return "invalid usage";
  case loomRemoteError:
    return "remote process exited or there was a network error";
  case loomInProgress:
    return "operation in progress";
  case loomTimeout:
    return "timeout waiting for a peer";
  default:
    return "unknown result code";
  }
}

const char *loomGetLastError(loomComm_t comm) {
  (void)comm;
  return last_error;
}

loomResult_t loomGetVersion(int *version) {
  if (version == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "loomGetVersion: version is NULL");
  *version = LOOM_VERSION_CODE;
  return loomSuccess;
}
