/*
 * tcp_ceiling.h — the TCP ceiling of loom-perf --ceiling: one plain socket
 * between two processes, one direction, messages of one size sent back to
 * back and acknowledged once at the end, so the figure is what the kernel's
 * TCP stack moves per second with nothing else (no protocol, no copies
 * through a library, no reduction).  The listening address follows
 * LOOM_SOCKET_IFNAME as Loom reads it (docs/environment.md), or loopback.
 */
#ifndef TCP_CEILING_H
#define TCP_CEILING_H

#include <stddef.h>

/* Listens on this host's address: loopback when `loopback` is set and
 * LOOM_SOCKET_IFNAME is unset, else the first up interface that
 * LOOM_SOCKET_IFNAME (or, unset, Loom's default rule: not lo*, not
 * docker*, else lo*) selects, IPv4 before IPv6.  Writes "ADDRESS PORT" to
 * where and the interface's name to ifname.  Returns the listening socket,
 * or -1 with the reason in err. */
int tcp_ceiling_listen(int loopback, char *where, size_t wherelen, char *ifname,
                       size_t iflen, char *err, size_t errlen);

/* Accepts one connection within timeout_ms and closes the listener;
 * -1 with the reason in err. */
int tcp_ceiling_accept(int listener, int timeout_ms, char *err, size_t errlen);

/* Connects to "ADDRESS PORT"; -1 with the reason in err. */
int tcp_ceiling_connect(const char *where, char *err, size_t errlen);

/* Sender: nmsg messages of `bytes` from buf, then waits for the receiver's
 * acknowledgement.  Returns the seconds from the first byte sent to the
 * acknowledgement, or -1 with the reason in err. */
double tcp_ceiling_send(int fd, const void *buf, size_t bytes, int nmsg, char *err,
                        size_t errlen);

/* Receiver of one tcp_ceiling_send of `bytes` x nmsg into buf (at least
 * `bytes` long); 0, or -1 with the reason in err (also when the sender's
 * size or count differs). */
int tcp_ceiling_receive(int fd, void *buf, size_t bytes, int nmsg, char *err, size_t errlen);

#endif /* TCP_CEILING_H */
