/*
 * socket.h — TCP socket helpers shared by the bootstrap and the TCP
 * transport: addresses, interface choice (LOOM_SOCKET_IFNAME), listening in
 * LOOM_PORT_RANGE, and sends/receives that end at a deadline.
 */
#ifndef LOOM_NET_SOCKET_H
#define LOOM_NET_SOCKET_H

#include "loom.h"

#include <stdatomic.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

union loom_sockaddr {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
};

#define LOOM_ADDR_STRLEN 64

socklen_t loom_sockaddr_len(const union loom_sockaddr *addr);
int loom_sockaddr_port(const union loom_sockaddr *addr);
void loom_sockaddr_set_port(union loom_sockaddr *addr, int port);
/* Copies an AF_INET or AF_INET6 address, reading only as many bytes as its
 * family has (a caller's struct sockaddr_in is shorter than the union);
 * the rest of *out is zeroed.  -1 (and *out zeroed) for another family. */
int loom_sockaddr_copy(union loom_sockaddr *out, const struct sockaddr *in);
int loom_sockaddr_is_loopback(const union loom_sockaddr *addr);
/* "1.2.3.4:5" or "[::1]:5". */
void loom_sockaddr_str(const union loom_sockaddr *addr, char *buf, size_t len);
/* Parses "host:port" or "[v6]:port"; the host may be a name.  0 on success. */
int loom_sockaddr_parse(const char *text, union loom_sockaddr *out);

/* Whether interface `name` is selected by a LOOM_SOCKET_IFNAME-style spec:
 * comma-separated prefixes; a leading '^' excludes instead; a leading '='
 * (after '^' if any) makes the names exact.  NULL/empty spec matches all. */
int loom_ifname_match(const char *spec, const char *name);

/* Picks this host's address to listen on and publish, honouring
 * LOOM_SOCKET_IFNAME and LOOM_SOCKET_FAMILY.  Without them: the first
 * interface that is up and neither loopback nor docker*, else loopback. */
loomResult_t loom_socket_pick_address(union loom_sockaddr *out, char *ifname,
                                      size_t ifname_len);

/* Listens on `local` (its port: 0 = any, honouring LOOM_PORT_RANGE).
 * Writes the bound address (real port) to `bound`.  The socket is
 * non-blocking and close-on-exec. */
loomResult_t loom_socket_listen(const union loom_sockaddr *local, int *fd,
                                union loom_sockaddr *bound);

/* Connects to `peer`, retrying refused connections until `deadline` when
 * retry_refused is set.  `what` names the peer in errors. */
loomResult_t loom_socket_connect(const union loom_sockaddr *peer,
                                 uint64_t deadline, int retry_refused,
                                 const char *what, int *fd);
/* The same without logging, for a caller that reports the failure itself
 * with more context: 0, or the errno of the last attempt (ETIMEDOUT at the
 * deadline, ECANCELED when the process is aborting). */
int loom_socket_connect_quiet(const union loom_sockaddr *peer, uint64_t deadline,
                              int retry_refused, int *fd);

/* Starts a connection without waiting: 0 (connected at once) or
 * EINPROGRESS with *fd set (wait for POLLOUT, then ask
 * loom_socket_connect_result), else the errno and no socket. */
int loom_socket_connect_start(const union loom_sockaddr *peer, int *fd);
/* A started connection's outcome once its socket is writable: 0 or the
 * errno (ECONNREFUSED: nobody listens there). */
int loom_socket_connect_result(int fd);

/* Accepts one connection before `deadline`; loomTimeout otherwise. */
loomResult_t loom_socket_accept(int listen_fd, uint64_t deadline,
                                const char *what, int *fd);

/* Send/receive exactly len bytes before `deadline`.  The peer closing the
 * connection gives loomRemoteError, the deadline loomTimeout; `what` names
 * the peer and purpose in the error text; with what == NULL they fail
 * quietly (a stranger's connection, which the caller logs once). */
loomResult_t loom_socket_send_all(int fd, const void *buf, size_t len,
                                  uint64_t deadline, const char *what);
loomResult_t loom_socket_recv_all(int fd, void *buf, size_t len,
                                  uint64_t deadline, const char *what);

int loom_socket_set_nodelay(int fd);

/* Makes the calling thread's socket waits (connect, accept, send/recv_all)
 * end within ~50 ms once *flag is set (loomCommAbort of a communicator
 * whose non-blocking init this thread runs); NULL stops watching.  They
 * then fail with errno ECANCELED ("Operation canceled"). */
void loom_socket_watch_abort(const atomic_int *flag);
int loom_socket_aborted(void);
/* The poll timeout to use for left_ms: a short slice while watching. */
int loom_socket_poll_slice(int left_ms);

/* Socket addresses in 20 bytes, for the bootstrap's tables and the
 * transports' address blobs: family(1: 4 or 6) zero(1) port(2, big-endian)
 * address(16).  decode: -1 when in is not such an address. */
#define LOOM_SOCKADDR_BYTES 20
void loom_sockaddr_encode(const union loom_sockaddr *a, uint8_t out[LOOM_SOCKADDR_BYTES]);
int loom_sockaddr_decode(const uint8_t in[LOOM_SOCKADDR_BYTES], union loom_sockaddr *a);

#endif
