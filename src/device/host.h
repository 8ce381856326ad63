/*
 * host.h — what the host backend's files share: the table of loomMemAlloc
 * host allocations (host.c), which also holds the peers' allocations this
 * process opened by handle (host_ipc.c, marked imported).
 */
#ifndef LOOM_DEVICE_HOST_H
#define LOOM_DEVICE_HOST_H

#include "device/alloc_table.h"
#include "loom.h"

extern struct loom_alloc_table loom_host_allocs;

/* Adds a to the table (locking it): 0, or -1 out of memory. */
int loom_host_allocs_add(const struct loom_alloc *a);

/* device.h's ipc_* for host memory (host_ipc.c). */
loomResult_t loom_host_ipc_get(const void *ptr, void *handle, size_t *offset);
loomResult_t loom_host_ipc_open(const void *handle, void **base);
void loom_host_ipc_close(void *base);

#endif
