/*
 * error.h — result propagation and the per-thread last-error text.
 *
 * An error is reported once, where it is first seen, with loom_error(): it
 * logs a WARN line and keeps the text for loomGetLastError().  Callers above
 * only pass the code up with LOOM_CHECK.
 */
#ifndef LOOM_CORE_ERROR_H
#define LOOM_CORE_ERROR_H

#include "loom.h"
#include "core/log.h"

/* Records and logs `fmt`, returns `code`. */
loomResult_t loom_error(loomResult_t code, int subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records `fmt` as the thread's last error without logging it, for a layer
 * whose caller always reports the failure itself with more context (the
 * transport under the engine), so that it is logged once.  Returns code. */
loomResult_t loom_error_record(loomResult_t code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* For calls that return an error number instead of setting errno
 * (pthread_*): 0 is loomSuccess; anything else is reported once, as
 * loomSystemError "<what>: <the number's text>". */
loomResult_t loom_check_errnum(int err, int subsys, const char *what);

/* The calling thread's last error text ("" when none). */
const char *loom_last_error(void);
void loom_clear_last_error(void);
/* Makes `text` this thread's last error without logging it again (an error
 * first seen on another thread, e.g. a non-blocking init). */
void loom_set_last_error(const char *text);

#define LOOM_CHECK(call)                                                       \
  do {                                                                         \
    loomResult_t loom_check_res_ = (call);                                     \
    if (loom_check_res_ != loomSuccess) {                                      \
      LOOM_TRACE(LOOM_LOG_ALL, "%s -> %d", #call, (int)loom_check_res_);       \
      return loom_check_res_;                                                  \
    }                                                                          \
  } while (0)

#define LOOM_CHECK_GOTO(call, res, label)                                      \
  do {                                                                         \
    (res) = (call);                                                            \
    if ((res) != loomSuccess) {                                                \
      LOOM_TRACE(LOOM_LOG_ALL, "%s -> %d", #call, (int)(res));                 \
      goto label;                                                              \
    }                                                                          \
  } while (0)

#endif
