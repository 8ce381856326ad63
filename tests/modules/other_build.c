/*
 * other_build.c — for tests/ranks/test_modules.sh: a libloom-net-ofi.so
 * "from another build of Loom" (another version and table size), which
 * the loader must refuse before binding or calling anything in it.
 */
#include "common/module.h"

#include <stddef.h>

static void never_bound(const struct loom_module_host *host) { (void)host; }

static int never_asked(char *why, size_t len) {
  (void)why, (void)len;
  return 0;
}

const struct loom_transport_module LOOM_MODULE_NAME = {
    .abi = LOOM_MODULE_ABI,
    .version = "0.0.0-other",
    .param_count = 1,
    .name = "ofi",
    .bind = never_bound,
    .transport = NULL,
    .available = never_asked,
};
