/*
 * badversion.c — a plugin built for an older transport API (version 3:
 * it exports loom_net_plugin_v3), which Loom must refuse naming both
 * versions (tests/ranks/test_ofi.sh).  It is never called.
 */
#include "loom_net.h"

const struct loom_transport loom_net_plugin_v3 = {
    .name = "badversion",
    .api_version = 3,
    .addr_bytes = 8,
};
