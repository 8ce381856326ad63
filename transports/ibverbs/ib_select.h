/*
 * ib_select.h — pure helpers for choosing the RDMA device, port and
 * address: the LOOM_IB_HCA syntax and reading an IP address out of a RoCE
 * GID (LOOM_IB_GID_INDEX).
 *
 * LOOM_IB_HCA follows NCCL_IB_HCA: comma-separated `name[:port]` items;
 * names are prefixes ("mlx5" selects mlx5_0, mlx5_1 ...) unless the list
 * starts with '='; a leading '^' (before any '=') excludes the items
 * instead.  "mlx5_0:1", "=mlx5_0", "^mlx5_1", "^=mlx5_1:2".
 */
#ifndef LOOM_TRANSPORT_IB_SELECT_H
#define LOOM_TRANSPORT_IB_SELECT_H

#include "net/socket.h"

#include <stddef.h>
#include <stdint.h>

/* 0 when spec parses; else -1 and the reason in why. */
int ib_hca_check(const char *spec, char *why, size_t len);
/* Whether port `port` of device `name` is selected (NULL or "" selects
 * everything; a spec that does not parse selects nothing). */
int ib_hca_match(const char *spec, const char *name, int port);

/* The IP address a RoCE GID carries: IPv4-mapped (::ffff:a.b.c.d) gives
 * AF_INET, a global IPv6 address AF_INET6 (port 0).  -1 for the zero GID,
 * link-local (fe80::/10) GIDs and others that rdma_cm cannot bind. */
int ib_gid_to_sockaddr(const uint8_t gid[16], union loom_sockaddr *out);

#endif
