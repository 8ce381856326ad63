/*
 * conformance — one set of checks that every transport must pass, run
 * through the ops table only (as libfabric's fabtests hold providers to
 * one contract):
 *
 *   conformance tcp | shm | ofi | ib | PLUGIN.so
 *
 * ofi runs the provider LOOM_OFI_PROVIDER names (tests use tcp); ib needs
 * an RDMA device, or the build linked with tests/unit/fake_rdma.c
 * (conformance_ib_fake); PLUGIN.so is a LOOM_NET_PLUGIN library.  Prints a
 * PASS/FAIL/SKIP line per check; exit 0 when all passed, 77 when the
 * transport is not available here (the reason printed), 1 otherwise.
 */
#include "conformance.h"
#include "config.h"
#include "transport.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void conformance_check(struct conformance *c, int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s: %s: ", ok ? "PASS" : "FAIL", c->name);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  c->failures += !ok;
}

void conformance_skip(const char *what, const char *why) {
  printf("SKIP: %s: %s\n", what, why);
}

/* The transport named, and what it may leave out; NULL (why set) when it
 * is not available here. */
static int pick(const char *name, struct conformance *c, const char **why) {
  *c = (struct conformance){.name = name};
#ifndef CONFORMANCE_IB_ONLY
  if (strcmp(name, "tcp") == 0) {
    c->tp = &loom_transport_tcp;
  } else if (strcmp(name, "shm") == 0) {
    c->tp = &loom_transport_shm;
    c->no_auth = "shared memory joins ranks of one host and user by segment name; the "
                 "secret guards the bootstrap that hands the names out";
    c->no_deadline = "a shared-memory connect maps the peer's segment, which exists from "
                     "init on: there is no listener to wait for";
    c->no_peer_gone = "shared memory sees a peer's death by its pid (two ranks of this "
                      "process share one); test_faults.sh kills ranks over shm";
  } else if (strcmp(name, "ofi") == 0) {
#ifdef LOOM_HAVE_FABRIC
    c->tp = &loom_transport_ofi;
    c->no_peer_gone = "libfabric's RDM endpoints (tcp;ofi_rxm) report no error when a peer "
                      "closes its endpoint; Loom learns of a dead rank through the bootstrap "
                      "ring's notices and the timeout (test_ofi.sh kills ranks over ofi)";
#else
    *why = "this Loom was built without libfabric";
#endif
  } else if (strstr(name, ".so") != NULL) {
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    c->tp = h != NULL ? dlsym(h, LOOM_NET_PLUGIN_SYMBOL) : NULL;
    if (c->tp == NULL)
      *why = dlerror();
  } else
#endif
      if (strcmp(name, "ib") == 0) {
#ifdef LOOM_HAVE_VERBS
    static char reason[512];
    if (loom_ib_available(reason, sizeof reason))
      c->tp = &loom_transport_ib;
    else
      *why = reason;
#else
    *why = "this Loom was built without libibverbs and librdmacm";
#endif
  } else {
    *why = "unknown transport (tcp, shm, ofi, ib or a plugin's .so)";
  }
  return c->tp != NULL;
}

int main(int argc, char **argv) {
  struct conformance c;
  const char *why = NULL;
  if (argc != 2) {
    fprintf(stderr, "usage: %s tcp|shm|ofi|ib|PLUGIN.so\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!pick(argv[1], &c, &why)) {
    printf("SKIP: %s: %s\n", argv[1], why);
    return 77;
  }
  check_exchange(&c);
  check_fingerprint_mismatch(&c);
  check_length_mismatch(&c);
  check_other_secret(&c);
  check_peer_gone(&c);
  check_unlistened(&c);
  check_probe(&c);
  printf("%s: %s\n", c.name, c.failures ? "some checks failed" : "all checks passed");
  return c.failures ? 1 : 0;
}
