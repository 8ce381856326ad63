/*
 * devbuf.h — device mirrors of a test's host buffers (coll_test -d, -S):
 * every buffer the test makes has a host copy, which the test fills and
 * checks as before, and a device copy, which the calls get (D(p) maps a
 * host pointer to its device twin; pointers into no mirrored buffer stay
 * as they are).  Around every call the host copies are uploaded and
 * downloaded again, guard bytes included, so an overrun on the device
 * shows as a written guard.  With a stream (-S) the upload, the call and
 * the download are all queued on the device stream with no host
 * synchronisation between them, then the stream is synchronised: a
 * missing ordering gives wrong data (LOOM_SIM_DELAY_US makes sure).
 */
#ifndef LOOM_TEST_DEVBUF_H
#define LOOM_TEST_DEVBUF_H

#include "loom.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct devbuf {
  unsigned char *host, *dev;
  size_t bytes;
};

static struct {
  int on;              /* buffers are mirrored on `device` */
  loomDevice_t device;
  loomStream_t stream; /* -S: the device stream every call is queued on */
  struct devbuf *v;
  int n, cap;
} devbufs;

#define STREAM (devbufs.stream)

static void devbuf_fail(const char *what, loomResult_t r) {
  fprintf(stderr, "devbuf: %s: %s: %s\n", what, loomGetErrorString(r), loomGetLastError(NULL));
  exit(1);
}

/* "host", "sim" or "cuda"; queue on a stream of that device when
 * use_stream. */
static void devbuf_setup(const char *name, int use_stream) {
  loomDevice_t d = strcmp(name, "host") == 0  ? loomDeviceHost
                   : strcmp(name, "sim") == 0 ? loomDeviceSim
                   : strcmp(name, "cuda") == 0 ? loomDeviceCuda
                                               : (loomDevice_t)-1;
  if ((int)d < 0) {
    fprintf(stderr, "devbuf: unknown device '%s' (host, sim, cuda)\n", name);
    exit(2);
  }
  devbufs.on = 1;
  devbufs.device = d;
  loomResult_t r;
  if (use_stream && (r = loomStreamCreateOnDevice(&devbufs.stream, d)) != loomSuccess)
    devbuf_fail("loomStreamCreateOnDevice", r);
}

static void devbuf_add(void *host, size_t bytes) {
  if (!devbufs.on)
    return;
  if (devbufs.n == devbufs.cap) {
    devbufs.cap = devbufs.cap ? 2 * devbufs.cap : 64;
    devbufs.v = realloc(devbufs.v, sizeof *devbufs.v * (size_t)devbufs.cap);
    if (devbufs.v == NULL)
      devbuf_fail("out of memory", loomSystemError);
  }
  struct devbuf *b = &devbufs.v[devbufs.n++];
  b->host = host;
  b->bytes = bytes;
  loomResult_t r = loomMemAlloc((void **)&b->dev, bytes, devbufs.device);
  if (r != loomSuccess)
    devbuf_fail("loomMemAlloc", r);
}

static void devbuf_remove(void *host) {
  for (int i = 0; devbufs.on && i < devbufs.n; i++)
    if (devbufs.v[i].host == host) {
      loomResult_t r = loomMemFree(devbufs.v[i].dev);
      if (r != loomSuccess)
        devbuf_fail("loomMemFree", r);
      devbufs.v[i] = devbufs.v[--devbufs.n];
      return;
    }
}

/* The device twin of host pointer p (p itself outside mirrored buffers). */
static void *D(const void *p) {
  const unsigned char *c = p;
  for (int i = 0; devbufs.on && c != NULL && i < devbufs.n; i++)
    if (c >= devbufs.v[i].host && c < devbufs.v[i].host + devbufs.v[i].bytes)
      return devbufs.v[i].dev + (c - devbufs.v[i].host);
  return (void *)p;
}

static void devbuf_copy_all(int up) {
  for (int i = 0; devbufs.on && i < devbufs.n; i++) {
    struct devbuf *b = &devbufs.v[i];
    loomResult_t r = up ? loomMemcpyAsync(b->dev, b->host, b->bytes, devbufs.stream)
                        : loomMemcpyAsync(b->host, b->dev, b->bytes, devbufs.stream);
    if (r != loomSuccess)
      devbuf_fail(up ? "upload" : "download", r);
  }
}

static loomResult_t devbuf_before(void) {
  devbuf_copy_all(1);
  return loomSuccess;
}

/* Downloads and, with a stream, synchronises it: the call's result. */
static loomResult_t devbuf_after(loomResult_t res) {
  if (res != loomSuccess || !devbufs.on)
    return res;
  devbuf_copy_all(0);
  return devbufs.stream != NULL ? loomStreamSynchronize(devbufs.stream) : loomSuccess;
}

static void devbuf_teardown(void) {
  if (devbufs.stream != NULL)
    loomStreamDestroy(devbufs.stream);
  free(devbufs.v);
}

#endif
