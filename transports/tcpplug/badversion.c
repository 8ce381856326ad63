/*
 * badversion.c — plugins Loom must refuse (tests/ranks/test_ofi.sh); never
 * called.  Built twice:
 *   libloom-net-badversion.so  for an older transport API (version 3: it
 *                              exports loom_net_plugin_v3): refused naming
 *                              both versions;
 *   libloom-net-badsize.so     (-DBAD_STRUCT_SIZE) this version's symbol,
 *                              but a struct_size smaller than this
 *                              version's members: refused naming both sizes.
 */
#include "loom_net.h"

#ifdef BAD_STRUCT_SIZE
const struct loom_transport LOOM_NET_PLUGIN_NAME = {
    .name = "badsize",
    .api_version = LOOM_TRANSPORT_API_VERSION,
    .struct_size = 16,
    .addr_bytes = 8,
};
#else
const struct loom_transport loom_net_plugin_v3 = {
    .name = "badversion",
    .api_version = 3,
    .addr_bytes = 8,
};
#endif
