/*
 * tcp_ceiling.c — one-direction TCP stream between two processes (see
 * tcp_ceiling.h).
 *
 * Wire: the sender writes a 16-byte header (message size, message count,
 * little-endian 64-bit), the messages, and reads a 1-byte ack that the
 * receiver writes after the last byte.  Sockets have TCP_NODELAY and
 * 60-second send/receive timeouts, so a vanished peer fails the call
 * rather than hanging it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, NI_MAXHOST */
#endif

#include "tcp_ceiling.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { IO_TIMEOUT_S = 60 };

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* LOOM_SOCKET_IFNAME's syntax: "a,b" prefixes, "^a,b" excluded prefixes,
 * "=" (after any "^") for exact names. */
static int ifname_match(const char *spec, const char *name) {
  int exclude = 0, exact = 0, hit = 0;
  if (*spec == '^') {
    exclude = 1;
    spec++;
  }
  if (*spec == '=') {
    exact = 1;
    spec++;
  }
  while (*spec != '\0' && !hit) {
    size_t len = strcspn(spec, ",");
    if (len > 0)
      hit = exact ? strlen(name) == len && strncmp(name, spec, len) == 0
                  : strncmp(name, spec, len) == 0;
    spec += len + (spec[len] == ',');
  }
  return exclude ? !hit : hit;
}

enum { PICK_SPEC, PICK_DEFAULT, PICK_LOOPBACK };

static int accept_name(int how, const char *spec, const char *name) {
  switch (how) {
  case PICK_SPEC: return ifname_match(spec, name);
  case PICK_DEFAULT: return strncmp(name, "lo", 2) != 0 && strncmp(name, "docker", 6) != 0;
  default: return strncmp(name, "lo", 2) == 0;
  }
}

/* The first up interface address the rule accepts, IPv4 first; 0 if none. */
static int find_address(int how, const char *spec, struct sockaddr_storage *out,
                        socklen_t *outlen, char *ifname, size_t iflen) {
  struct ifaddrs *list;
  if (getifaddrs(&list) != 0)
    return 0;
  const char *family = getenv("LOOM_SOCKET_FAMILY");
  int found = 0;
  for (int pass = 0; pass < 2 && !found; pass++) {
    int want = pass == 0 ? AF_INET : AF_INET6;
    if (family != NULL && strcasecmp(family, want == AF_INET ? "AF_INET6" : "AF_INET") == 0)
      continue;
    for (struct ifaddrs *it = list; it != NULL && !found; it = it->ifa_next) {
      if (it->ifa_addr == NULL || it->ifa_addr->sa_family != want || !(it->ifa_flags & IFF_UP))
        continue;
      if (want == AF_INET6 &&
          IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)(void *)it->ifa_addr)->sin6_addr))
        continue;
      if (!accept_name(how, spec, it->ifa_name))
        continue;
      *outlen = want == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
      memset(out, 0, sizeof *out);
      memcpy(out, it->ifa_addr, *outlen);
      snprintf(ifname, iflen, "%s", it->ifa_name);
      found = 1;
    }
  }
  freeifaddrs(list);
  return found;
}

static void set_io_options(int fd) {
  int one = 1;
  struct timeval tv = {.tv_sec = IO_TIMEOUT_S, .tv_usec = 0};
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int tcp_ceiling_listen(int loopback, char *where, size_t wherelen, char *ifname,
                       size_t iflen, char *err, size_t errlen) {
  const char *spec = getenv("LOOM_SOCKET_IFNAME");
  struct sockaddr_storage addr;
  socklen_t len = 0;
  int found;
  if (spec != NULL && *spec != '\0')
    found = find_address(PICK_SPEC, spec, &addr, &len, ifname, iflen);
  else if (loopback)
    found = find_address(PICK_LOOPBACK, NULL, &addr, &len, ifname, iflen);
  else
    found = find_address(PICK_DEFAULT, NULL, &addr, &len, ifname, iflen) ||
            find_address(PICK_LOOPBACK, NULL, &addr, &len, ifname, iflen);
  if (!found) {
    snprintf(err, errlen, "no up interface with an address matches %s%s",
             spec && *spec ? "LOOM_SOCKET_IFNAME=" : "the default rule (not lo, not docker, "
                                                    "else lo)", spec && *spec ? spec : "");
    return -1;
  }
  ((struct sockaddr_in *)(void *)&addr)->sin_port = 0; /* same offset in sockaddr_in6 */
  int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&addr, len) != 0 || listen(fd, 1) != 0 ||
      getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
    snprintf(err, errlen, "cannot listen on %s: %s", ifname, strerror(errno));
    if (fd >= 0)
      close(fd);
    return -1;
  }
  char host[NI_MAXHOST], port[NI_MAXSERV];
  int rc = getnameinfo((struct sockaddr *)&addr, len, host, sizeof host, port, sizeof port,
                       NI_NUMERICHOST | NI_NUMERICSERV);
  if (rc != 0) {
    snprintf(err, errlen, "getnameinfo: %s", gai_strerror(rc));
    close(fd);
    return -1;
  }
  snprintf(where, wherelen, "%s %s", host, port);
  return fd;
}

int tcp_ceiling_accept(int listener, int timeout_ms, char *err, size_t errlen) {
  struct pollfd p = {.fd = listener, .events = POLLIN};
  int rc = poll(&p, 1, timeout_ms);
  int fd = rc == 1 ? accept4(listener, NULL, NULL, SOCK_CLOEXEC) : -1;
  if (fd < 0)
    snprintf(err, errlen, "no connection from rank 0 within %d ms%s%s", timeout_ms,
             rc < 0 ? ": " : "", rc < 0 ? strerror(errno) : "");
  else
    set_io_options(fd);
  close(listener);
  return fd;
}

int tcp_ceiling_connect(const char *where, char *err, size_t errlen) {
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (sscanf(where, "%1024s %31s", host, port) != 2) {
    snprintf(err, errlen, "bad address '%s'", where);
    return -1;
  }
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai;
  int rc = getaddrinfo(host, port, &hints, &ai);
  if (rc != 0) {
    snprintf(err, errlen, "%s: %s", host, gai_strerror(rc));
    return -1;
  }
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0)
    set_io_options(fd); /* SO_SNDTIMEO also bounds connect */
  if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    snprintf(err, errlen, "cannot connect to %s port %s: %s", host, port, strerror(errno));
    if (fd >= 0)
      close(fd);
    fd = -1;
  }
  freeaddrinfo(ai);
  return fd;
}

static int write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int read_all(int fd, void *buf, size_t len) {
  char *p = buf;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = ECONNRESET;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

double tcp_ceiling_send(int fd, const void *buf, size_t bytes, int nmsg, char *err,
                        size_t errlen) {
  unsigned char header[16], ack;
  put_u64(header, bytes);
  put_u64(header + 8, (uint64_t)nmsg);
  double t0 = now_s();
  int bad = write_all(fd, header, sizeof header);
  for (int m = 0; m < nmsg && !bad; m++)
    bad = write_all(fd, buf, bytes);
  if (!bad)
    bad = read_all(fd, &ack, 1);
  if (bad) {
    snprintf(err, errlen, "TCP stream to rank 1 failed: %s", strerror(errno));
    return -1;
  }
  return now_s() - t0;
}

int tcp_ceiling_receive(int fd, void *buf, size_t bytes, int nmsg, char *err, size_t errlen) {
  unsigned char header[16], ack = 1;
  if (read_all(fd, header, sizeof header) != 0) {
    snprintf(err, errlen, "TCP stream from rank 0 failed: %s", strerror(errno));
    return -1;
  }
  if (get_u64(header) != bytes || get_u64(header + 8) != (uint64_t)nmsg) {
    snprintf(err, errlen, "TCP stream: rank 0 sends %llu x %llu bytes, expected %d x %zu",
             (unsigned long long)get_u64(header + 8), (unsigned long long)get_u64(header),
             nmsg, bytes);
    return -1;
  }
  for (int m = 0; m < nmsg; m++)
    if (read_all(fd, buf, bytes) != 0) {
      snprintf(err, errlen, "TCP stream from rank 0 failed: %s", strerror(errno));
      return -1;
    }
  if (write_all(fd, &ack, 1) != 0) {
    snprintf(err, errlen, "TCP stream: ack to rank 0 failed: %s", strerror(errno));
    return -1;
  }
  return 0;
}
