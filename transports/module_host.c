/*
 * module_host.c — the host table (common/module.h) that libloom hands to
 * the transport modules it loads: its own error, log and config functions,
 * so a module's errors become this library's last error and its lines go
 * to this library's log.
 */
#include "config.h"
#include "common/module.h"
#include "module_loader.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

static void host_error(loomResult_t code, int subsys, const char *text) {
  loom_error(code, subsys, "%s", text);
}

static void host_log_text(int level, int subsys, const char *file, int line, const char *text) {
  loom_log_write(level, subsys, file, line, "%s", text);
}

static int valid_id(int id) { return id >= 0 && id < LOOM_PARAM_COUNT; }

static int64_t host_param_int(int id) {
  return valid_id(id) ? loom_param_int((loom_param_id)id) : 0;
}

static const char *host_param_str(int id) {
  return valid_id(id) ? loom_param_str((loom_param_id)id) : NULL;
}

static int host_param_is_set(int id) {
  return valid_id(id) && loom_param_is_set((loom_param_id)id);
}

const struct loom_module_host loom_module_host_table = {
    .abi = LOOM_MODULE_ABI,
    .version = PACKAGE_VERSION,
    .param_count = LOOM_PARAM_COUNT,
    .error = host_error,
    .set_last_error = loom_set_last_error,
    .last_error = loom_last_error,
    .log_enabled = loom_log_enabled,
    .log_text = host_log_text,
    .param_int = host_param_int,
    .param_str = host_param_str,
    .param_is_set = host_param_is_set,
    .parse_int = loom_parse_int,
    .parse_port_range = loom_parse_port_range,
};
