/*
 * ib_module.c — what libloom-net-ib.so exports (common/module.h): the
 * ibverbs transport and the default selection's question
 * (loom_ib_available).  RDMA devices for loom-topo come from sysfs
 * (src/topo/discover.c), not from here.
 */
#include "config.h"
#include "transport.h"
#include "common/module.h"
#include "core/config.h"

const struct loom_transport_module LOOM_MODULE_NAME = {
    .abi = LOOM_MODULE_ABI,
    .version = PACKAGE_VERSION,
    .param_count = LOOM_PARAM_COUNT,
    .name = "ib",
    .bind = loom_module_bind,
    .transport = &loom_transport_ib,
    .available = loom_ib_available,
};
