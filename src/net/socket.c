/*
 * socket.c — TCP socket helpers: addresses, interface choice, listening in a
 * port range, and deadline-bounded connect/accept/send/recv.
 */

#include "net/socket.h"
#include "core/config.h"
#include "core/error.h"
#include "core/timeutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

socklen_t loom_sockaddr_len(const union loom_sockaddr *addr) {
  return addr->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                        : sizeof(struct sockaddr_in);
}

int loom_sockaddr_copy(union loom_sockaddr *out, const struct sockaddr *in) {
  memset(out, 0, sizeof *out);
  if (in == NULL || (in->sa_family != AF_INET && in->sa_family != AF_INET6))
    return -1;
  out->sa.sa_family = in->sa_family;
  memcpy(out, in, loom_sockaddr_len(out));
  return 0;
}

int loom_sockaddr_port(const union loom_sockaddr *addr) {
  return addr->sa.sa_family == AF_INET6 ? ntohs(addr->sin6.sin6_port)
                                        : ntohs(addr->sin.sin_port);
}

void loom_sockaddr_set_port(union loom_sockaddr *addr, int port) {
  if (addr->sa.sa_family == AF_INET6)
    addr->sin6.sin6_port = htons((uint16_t)port);
  else
    addr->sin.sin_port = htons((uint16_t)port);
}

int loom_sockaddr_is_loopback(const union loom_sockaddr *addr) {
  if (addr->sa.sa_family == AF_INET)
    return (ntohl(addr->sin.sin_addr.s_addr) >> 24) == 127;
  if (addr->sa.sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&addr->sin6.sin6_addr);
  return 0;
}

void loom_sockaddr_str(const union loom_sockaddr *addr, char *buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr->sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &addr->sin6.sin6_addr, host, sizeof host);
    snprintf(buf, len, "[%s]:%d", host, loom_sockaddr_port(addr));
  } else {
    inet_ntop(AF_INET, &addr->sin.sin_addr, host, sizeof host);
    snprintf(buf, len, "%s:%d", host, loom_sockaddr_port(addr));
  }
}

int loom_sockaddr_parse(const char *text, union loom_sockaddr *out) {
  char host[256];
  const char *port_text;
  if (text == NULL)
    return -1;
  if (text[0] == '[') {
    const char *close = strchr(text, ']');
    if (close == NULL || close[1] != ':' || (size_t)(close - text - 1) >= sizeof host)
      return -1;
    memcpy(host, text + 1, (size_t)(close - text - 1));
    host[close - text - 1] = '\0';
    port_text = close + 2;
  } else {
    const char *colon = strrchr(text, ':');
    if (colon == NULL || (size_t)(colon - text) >= sizeof host || colon == text)
      return -1;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    port_text = colon + 1;
  }
  int64_t port;
  if (loom_parse_int(port_text, &port) != 0 || port < 1 || port > 65535)
    return -1;
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
    return -1;
  memset(out, 0, sizeof *out);
  memcpy(out, res->ai_addr,
         res->ai_addrlen < sizeof *out ? res->ai_addrlen : sizeof *out);
  freeaddrinfo(res);
  loom_sockaddr_set_port(out, (int)port);
  return 0;
}

int loom_ifname_match(const char *spec, const char *name) {
  if (spec == NULL || *spec == '\0')
    return 1;
  int exclude = 0, exact = 0;
  if (*spec == '^') {
    exclude = 1;
    spec++;
  }
  if (*spec == '=') {
    exact = 1;
    spec++;
  }
  int matched = 0;
  const char *p = spec;
  while (*p && !matched) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len > 0) {
      if (exact)
        matched = strlen(name) == len && strncmp(name, p, len) == 0;
      else
        matched = strncmp(name, p, len) == 0;
    }
    p += len;
    if (*p == ',')
      p++;
  }
  return exclude ? !matched : matched;
}

static int family_allowed(int family) {
  const char *want = loom_param_str(LOOM_PARAM_SOCKET_FAMILY);
  if (want == NULL || *want == '\0')
    return family == AF_INET || family == AF_INET6;
  if (strcasecmp(want, "AF_INET6") == 0)
    return family == AF_INET6;
  if (strcasecmp(want, "AF_INET") == 0)
    return family == AF_INET;
  return family == AF_INET || family == AF_INET6;
}

/* Finds the first address of an up interface accepted by `accept`. */
static int find_address(int (*accept)(const char *, const char *), const char *spec,
                        union loom_sockaddr *out, char *ifname, size_t ifname_len) {
  struct ifaddrs *list = NULL;
  if (getifaddrs(&list) != 0)
    return 0;
  int found = 0;
  /* Two passes: IPv4 first, as people read those addresses more easily. */
  for (int pass = 0; pass < 2 && !found; pass++) {
    for (struct ifaddrs *it = list; it != NULL && !found; it = it->ifa_next) {
      if (it->ifa_addr == NULL || !(it->ifa_flags & IFF_UP))
        continue;
      int family = it->ifa_addr->sa_family;
      if (family != (pass == 0 ? AF_INET : AF_INET6) || !family_allowed(family))
        continue;
      if (family == AF_INET6 &&
          IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)it->ifa_addr)->sin6_addr))
        continue;
      if (!accept(spec, it->ifa_name))
        continue;
      memset(out, 0, sizeof *out);
      memcpy(out, it->ifa_addr,
             family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
      snprintf(ifname, ifname_len, "%s", it->ifa_name);
      found = 1;
    }
  }
  freeifaddrs(list);
  return found;
}

static int default_if_accept(const char *spec, const char *name) {
  (void)spec;
  return strncmp(name, "lo", 2) != 0 && strncmp(name, "docker", 6) != 0;
}

static int loopback_accept(const char *spec, const char *name) {
  (void)spec;
  return strncmp(name, "lo", 2) == 0;
}

loomResult_t loom_socket_pick_address(union loom_sockaddr *out, char *ifname,
                                      size_t ifname_len) {
  const char *spec = loom_param_str(LOOM_PARAM_SOCKET_IFNAME);
  if (spec != NULL && *spec != '\0') {
    if (!find_address(loom_ifname_match, spec, out, ifname, ifname_len))
      return loom_error(loomSystemError, LOOM_LOG_INIT,
                        "no up interface with an address matches "
                        "LOOM_SOCKET_IFNAME=%s (see `ip addr`)",
                        spec);
    return loomSuccess;
  }
  if (find_address(default_if_accept, NULL, out, ifname, ifname_len) ||
      find_address(loopback_accept, NULL, out, ifname, ifname_len))
    return loomSuccess;
  return loom_error(loomSystemError, LOOM_LOG_INIT,
                    "no network interface with an address is up; set "
                    "LOOM_SOCKET_IFNAME");
}

int loom_socket_set_nodelay(int fd) {
  int one = 1;
  return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static loomResult_t bind_listen(const union loom_sockaddr *addr, int *fd_out, int *err) {
  int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *err = errno;
    return loomSystemError;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, &addr->sa, loom_sockaddr_len(addr)) != 0 || listen(fd, 1024) != 0) {
    *err = errno;
    close(fd);
    return loomSystemError;
  }
  *fd_out = fd;
  return loomSuccess;
}

/* The port of LOOM_COMM_ID (0 when unset): kept free for the root, which
 * rank 0 may open after other ranks already listen in LOOM_PORT_RANGE. */
static int comm_id_port(void) {
  const char *id = loom_param_str(LOOM_PARAM_COMM_ID);
  const char *colon = id ? strrchr(id, ':') : NULL;
  int64_t port;
  if (colon == NULL || loom_parse_int(colon + 1, &port) != 0 || port < 1 || port > 65535)
    return 0;
  return (int)port;
}

loomResult_t loom_socket_listen(const union loom_sockaddr *local, int *fd,
                                union loom_sockaddr *bound) {
  union loom_sockaddr addr = *local;
  char text[LOOM_ADDR_STRLEN];
  int err = 0;
  int lo = 0, hi = 0;
  const char *range = loom_param_str(LOOM_PARAM_PORT_RANGE);
  if (loom_sockaddr_port(local) == 0 && range != NULL && *range != '\0') {
    if (loom_parse_port_range(range, &lo, &hi) != 0)
      return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                        "LOOM_PORT_RANGE=\"%s\" is not lo-hi with 1 <= lo <= hi "
                        "<= 65535",
                        range);
    int reserved = comm_id_port();
    err = EADDRINUSE; /* what the range's only port being reserved amounts to */
    for (int port = lo; port <= hi; port++) {
      if (port == reserved)
        continue; /* rank 0 hosts the root there */
      loom_sockaddr_set_port(&addr, port);
      if (bind_listen(&addr, fd, &err) == loomSuccess)
        goto bound_ok;
      if (err != EADDRINUSE)
        break;
    }
    loom_sockaddr_str(&addr, text, sizeof text);
    return loom_error(loomSystemError, LOOM_LOG_INIT,
                      "cannot listen on any port of LOOM_PORT_RANGE=%s (last "
                      "tried %s: %s); widen the range",
                      range, text, strerror(err));
  }
  if (bind_listen(&addr, fd, &err) != loomSuccess) {
    loom_sockaddr_str(&addr, text, sizeof text);
    return loom_error(loomSystemError, LOOM_LOG_INIT, "cannot listen on %s: %s%s",
                      text, strerror(err),
                      err == EADDRINUSE ? " (port in use: another job? pick "
                                          "another LOOM_COMM_ID port)"
                                        : "");
  }
bound_ok:;
  socklen_t len = sizeof *bound;
  if (getsockname(*fd, &bound->sa, &len) != 0) {
    err = errno;
    close(*fd);
    return loom_error(loomSystemError, LOOM_LOG_INIT, "getsockname: %s",
                      strerror(err));
  }
  return loomSuccess;
}

/* Waits for `events` on fd until the deadline: 1 ready, 0 timeout, -1 error. */
#define SOCKET_ABORT_SLICE_MS 50

/* The abort flag the calling thread's waits watch (NULL: none). */
static __thread const atomic_int *thread_abort_flag;

void loom_socket_watch_abort(const atomic_int *flag) { thread_abort_flag = flag; }

int loom_socket_aborted(void) {
  return thread_abort_flag != NULL && atomic_load_explicit(thread_abort_flag, memory_order_acquire);
}

int loom_socket_poll_slice(int left_ms) {
  return thread_abort_flag != NULL && left_ms > SOCKET_ABORT_SLICE_MS ? SOCKET_ABORT_SLICE_MS
                                                                      : left_ms;
}

/* 1 ready (or a slice passed), 0 deadline, -1 poll failed or aborted
 * (errno ECANCELED). */
static int wait_fd(int fd, short events, uint64_t deadline) {
  for (;;) {
    if (loom_socket_aborted()) {
      errno = ECANCELED;
      return -1;
    }
    struct pollfd p = {.fd = fd, .events = events};
    int left = loom_ms_left(deadline);
    int rc = poll(&p, 1, loom_socket_poll_slice(left));
    if (rc > 0)
      return 1;
    if (rc == 0 && loom_ms_left(deadline) == 0)
      return 0;
    if (rc < 0 && errno != EINTR)
      return -1;
  }
}

int loom_socket_connect_start(const union loom_sockaddr *peer, int *fd_out) {
  int fd = socket(peer->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return errno;
  int err = 0;
  if (connect(fd, &peer->sa, loom_sockaddr_len(peer)) != 0 && (err = errno) != EINPROGRESS) {
    close(fd);
    return err;
  }
  loom_socket_set_nodelay(fd);
  *fd_out = fd;
  return err;
}

int loom_socket_connect_result(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
    return errno;
  return err;
}

/* One connection attempt: 0 with *fd_out, or the errno. */
static int connect_once(const union loom_sockaddr *peer, uint64_t deadline, int *fd_out) {
  int fd;
  int err = loom_socket_connect_start(peer, &fd);
  if (err != 0 && err != EINPROGRESS)
    return err;
  if (err == EINPROGRESS) {
    int w = wait_fd(fd, POLLOUT, deadline);
    err = w == 1 ? loom_socket_connect_result(fd) : w == 0 ? ETIMEDOUT : errno;
  }
  if (err != 0) {
    close(fd);
    return err;
  }
  *fd_out = fd;
  return 0;
}

int loom_socket_connect_quiet(const union loom_sockaddr *peer, uint64_t deadline,
                              int retry_refused, int *fd_out) {
  unsigned backoff_us = 1000;
  for (;;) {
    int err = connect_once(peer, deadline, fd_out);
    if (err == 0)
      return 0;
    int retry = retry_refused && (err == ECONNREFUSED || err == ECONNRESET ||
                                  err == EAGAIN || err == ETIMEDOUT);
    if (loom_socket_aborted())
      return ECANCELED;
    if (!retry || loom_ms_left(deadline) == 0)
      return err;
    usleep(backoff_us);
    if (backoff_us < 100000)
      backoff_us *= 2;
  }
}

loomResult_t loom_socket_connect(const union loom_sockaddr *peer,
                                 uint64_t deadline, int retry_refused,
                                 const char *what, int *fd_out) {
  int err = loom_socket_connect_quiet(peer, deadline, retry_refused, fd_out);
  if (err == 0)
    return loomSuccess;
  char text[LOOM_ADDR_STRLEN];
  loom_sockaddr_str(peer, text, sizeof text);
  return loom_error(err == ETIMEDOUT ? loomTimeout : loomRemoteError, LOOM_LOG_NET,
                    "cannot connect to %s at %s: %s", what, text, strerror(err));
}

loomResult_t loom_socket_accept(int listen_fd, uint64_t deadline, const char *what,
                                int *fd_out) {
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      loom_socket_set_nodelay(fd);
      *fd_out = fd;
      return loomSuccess;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
        errno != ECONNABORTED)
      return loom_error(loomSystemError, LOOM_LOG_NET, "accept (%s): %s", what,
                        strerror(errno));
    int w = wait_fd(listen_fd, POLLIN, deadline);
    if (w == 0)
      return loom_error(loomTimeout, LOOM_LOG_NET, "timed out waiting for %s to connect",
                        what);
    if (w < 0)
      return loom_error(loomSystemError, LOOM_LOG_NET, "poll (%s): %s", what,
                        strerror(errno));
  }
}

/* Quiet when what is NULL (socket.h). */
#define SOCK_FAIL(code, subsys, ...) (what == NULL ? (code) : loom_error((code), (subsys), __VA_ARGS__))

loomResult_t loom_socket_send_all(int fd, const void *buf, size_t len,
                                  uint64_t deadline, const char *what) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int w = wait_fd(fd, POLLOUT, deadline);
      if (w == 0)
        return SOCK_FAIL(loomTimeout, LOOM_LOG_NET, "timed out sending to %s", what);
      if (w < 0)
        return SOCK_FAIL(loomSystemError, LOOM_LOG_NET, "poll (%s): %s", what,
                          strerror(errno));
      continue;
    }
    return SOCK_FAIL(loomRemoteError, LOOM_LOG_NET,
                      "send to %s failed: %s (did the process exit?)", what,
                      strerror(errno));
  }
  return loomSuccess;
}

loomResult_t loom_socket_recv_all(int fd, void *buf, size_t len,
                                  uint64_t deadline, const char *what) {
  char *p = buf;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n == 0)
      return SOCK_FAIL(loomRemoteError, LOOM_LOG_NET,
                        "%s closed the connection (did the process exit?)", what);
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int w = wait_fd(fd, POLLIN, deadline);
      if (w == 0)
        return SOCK_FAIL(loomTimeout, LOOM_LOG_NET, "timed out waiting for %s", what);
      if (w < 0)
        return SOCK_FAIL(loomSystemError, LOOM_LOG_NET, "poll (%s): %s", what,
                          strerror(errno));
      continue;
    }
    return SOCK_FAIL(loomRemoteError, LOOM_LOG_NET, "receive from %s failed: %s",
                      what, strerror(errno));
  }
  return loomSuccess;
}

void loom_sockaddr_encode(const union loom_sockaddr *a, uint8_t out[20]) {
  memset(out, 0, 20);
  int family = a->sa.sa_family;
  out[0] = family == AF_INET6 ? 6 : 4;
  int port = loom_sockaddr_port(a);
  out[2] = (uint8_t)(port >> 8);
  out[3] = (uint8_t)port;
  if (family == AF_INET6)
    memcpy(out + 4, &a->sin6.sin6_addr, 16);
  else
    memcpy(out + 4, &a->sin.sin_addr, 4);
}

int loom_sockaddr_decode(const uint8_t in[20], union loom_sockaddr *a) {
  memset(a, 0, sizeof *a);
  int port = in[2] << 8 | in[3];
  if (in[0] == 4) {
    a->sin.sin_family = AF_INET;
    memcpy(&a->sin.sin_addr, in + 4, 4);
  } else if (in[0] == 6) {
    a->sin6.sin6_family = AF_INET6;
    memcpy(&a->sin6.sin6_addr, in + 4, 16);
  } else {
    return -1;
  }
  if (in[1] != 0)
    return -1;
  loom_sockaddr_set_port(a, port);
  return 0;
}
