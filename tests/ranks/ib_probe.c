/*
 * ib_probe.c — for tests/ranks/test_ib.sh: asks the ibverbs transport
 * whether this machine can run it (loom_ib_available) and prints the
 * answer; with --init, also runs the transport's init and fini for a
 * one-rank-of-two communicator on loopback and prints the outcome (the
 * error text when init fails, the address blob's size when it works).
 * Exit 0: available (and, with --init, init succeeded); 2: not available
 * here (with --init: init failed, saying why); 3: not built in.
 */
#include "config.h"
#include "core/error.h"
#include "transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef LOOM_HAVE_VERBS
static int try_init(void) {
  static const uint8_t secret[LOOM_NET_SECRET_BYTES] = {1, 2, 3};
  struct sockaddr_in lo = {.sin_family = AF_INET};
  lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct loom_transport_comm info = {.rank = 0, .nranks = 2, .secret = secret,
                                     .local_sockaddr = &lo, .comm_name = "ib_probe"};
  uint8_t addr[256] = {0};
  void *ctx = NULL;
  if (loom_transport_ib.addr_bytes > sizeof addr)
    return 1;
  loomResult_t res = loom_transport_ib.init(&info, &ctx, addr);
  if (res != loomSuccess) {
    printf("ib: init failed (%s): %s\n", loomGetErrorString(res), loom_last_error());
    return 2;
  }
  printf("ib: init succeeded: %zu-byte address\n", loom_transport_ib.addr_bytes);
  loom_transport_ib.fini(ctx);
  return 0;
}
#endif

int main(int argc, char **argv) {
#ifdef LOOM_HAVE_VERBS
  char why[1024];
  int rc = 0;
  if (loom_ib_available(why, sizeof why)) {
    printf("ib: available: %s\n", why);
  } else {
    printf("ib: unavailable: %s\n", why);
    rc = 2;
  }
  if (argc > 1 && strcmp(argv[1], "--init") == 0) {
    int init_rc = try_init();
    if (init_rc == 1)
      return 1;
    if (init_rc != rc) {
      printf("ib: loom_ib_available and init disagree\n");
      return 1;
    }
  }
  return rc;
#else
  (void)argc, (void)argv;
  printf("ib: not built (configure found no libibverbs and librdmacm; Debian: "
         "libibverbs-dev librdmacm-dev)\n");
  return 3;
#endif
}
