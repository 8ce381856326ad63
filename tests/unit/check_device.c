/*
 * check_device.c — unit tests of the device layer's ops tables
 * (src/device): every backend that can run here (host, sim; cuda when a
 * GPU and the module are there) is put through the same checks:
 *  - its reduction, PreMulSum and average kernels give the bits the host
 *    kernels give, for every datatype and op, queued on its stream;
 *  - its events are seen complete without blocking, only once the work
 *    before them is done (a host function holds the stream);
 *  - its streams wait on the device for a word of host memory
 *    (wait_value_async, the GEQ rule across the 32-bit wrap), while
 *    another stream can still be created;
 *  - classify gives an allocation's bounds; the sim device reports work
 *    on freed memory as the stream's error;
 *  - the sim device's IPC: another process maps an allocation through its
 *    handle and sees and writes the same bytes; a handle of the process
 *    itself, and one whose allocation was freed, are refused.
 */
#include "loom.h"
#include "core/config.h"
#include "device/device.h"
#include "device/reduce.h"
#include "device/sim/sim.h"

#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { COUNT = 1031 };

/* Finite, varied elements of dt (no NaN: payloads may differ by kernel). */
static void fill(void *buf, loomDataType_t dt, size_t count, unsigned seed) {
  size_t es = loom_datatype_size(dt);
  for (size_t i = 0; i < count; i++) {
    unsigned v = (unsigned)(i * 2654435761u) ^ seed;
    unsigned char *e = (unsigned char *)buf + i * es;
    if (dt == loomFloat32) {
      float f = (float)((int)(v % 2001) - 1000) / 8.0f;
      memcpy(e, &f, 4);
    } else if (dt == loomFloat64) {
      double d = (double)((int)(v % 2001) - 1000) / 8.0;
      memcpy(e, &d, 8);
    } else if (dt == loomFloat16 || dt == loomBfloat16) {
      uint16_t h = (uint16_t)((v % 0x7000) | ((v & 0x10000) ? 0x8000 : 0)); /* finite */
      if (dt == loomBfloat16)
        h = (uint16_t)(0x3c00 + (v % 0x0800)) | ((v & 1) ? 0x8000 : 0);
      memcpy(e, &h, 2);
    } else {
      for (size_t b = 0; b < es; b++)
        e[b] = (unsigned char)(v >> (8 * (b % 4)));
    }
  }
}

static const struct loom_device_ops *backend(loomDevice_t d) {
  const struct loom_device_ops *ops = NULL;
  if (loom_device_get(d, &ops, "check_device") != loomSuccess)
    return NULL;
  return ops->stream_create != NULL || d == loomDeviceHost ? ops : NULL;
}

/* Runs one kernel on the device: dst = a op b, premul(a), avg(a) / 3. */
static void run_kernels(const struct loom_device_ops *ops, void *native, void *host_out[3],
                        const void *a, const void *b, loomDataType_t dt, loomRedOp_t op) {
  size_t bytes = COUNT * loom_datatype_size(dt);
  void *da, *db, *dd, *dp, *ds;
  ck_assert_int_eq(ops->mem_alloc(&da, bytes), loomSuccess);
  ck_assert_int_eq(ops->mem_alloc(&db, bytes), loomSuccess);
  ck_assert_int_eq(ops->mem_alloc(&dd, bytes), loomSuccess);
  ck_assert_int_eq(ops->mem_alloc(&dp, bytes), loomSuccess);
  ck_assert_int_eq(ops->mem_alloc(&ds, bytes), loomSuccess);
  ck_assert_int_eq(ops->memcpy_sync(da, a, bytes), loomSuccess);
  ck_assert_int_eq(ops->memcpy_sync(db, b, bytes), loomSuccess);
  unsigned char scalar[8];
  memcpy(scalar, b, loom_datatype_size(dt)); /* any element as the scalar */
  ck_assert_int_eq(ops->reduce_async(dd, da, db, COUNT, dt, op, native), loomSuccess);
  ck_assert_int_eq(ops->premul_async(dp, da, COUNT, dt, scalar, native), loomSuccess);
  ck_assert_int_eq(ops->memcpy_async(ds, da, bytes, native), loomSuccess);
  ck_assert_int_eq(ops->scale_avg_async(ds, COUNT, dt, 3, native), loomSuccess);
  if (ops->stream_sync != NULL)
    ck_assert_int_eq(ops->stream_sync(native), loomSuccess);
  ck_assert_int_eq(ops->memcpy_sync(host_out[0], dd, bytes), loomSuccess);
  ck_assert_int_eq(ops->memcpy_sync(host_out[1], dp, bytes), loomSuccess);
  ck_assert_int_eq(ops->memcpy_sync(host_out[2], ds, bytes), loomSuccess);
  void *all[5] = {da, db, dd, dp, ds};
  for (int i = 0; i < 5; i++)
    ck_assert_int_eq(ops->mem_free(all[i]), loomSuccess);
}

static void kernels_match_host(loomDevice_t d) {
  const struct loom_device_ops *ops = backend(d);
  if (ops == NULL)
    return; /* cuda without a GPU */
  void *native = NULL;
  if (ops->stream_create != NULL)
    ck_assert_int_eq(ops->stream_create(&native), loomSuccess);
  unsigned char a[COUNT * 8], b[COUNT * 8], want[3][COUNT * 8], got[3][COUNT * 8];
  for (int t = 0; t < loomNumTypes; t++)
    for (int o = 0; o < loomNumOps; o++) {
      loomDataType_t dt = (loomDataType_t)t;
      size_t bytes = COUNT * loom_datatype_size(dt);
      fill(a, dt, COUNT, 11u * (unsigned)t + 1);
      fill(b, dt, COUNT, 7u * (unsigned)o + 5);
      loom_reduce(want[0], a, b, COUNT, dt, (loomRedOp_t)o);
      loom_premul(want[1], a, COUNT, dt, b);
      memcpy(want[2], a, bytes);
      loom_scale_avg(want[2], COUNT, dt, 3);
      void *out[3] = {got[0], got[1], got[2]};
      run_kernels(ops, native, out, a, b, dt, (loomRedOp_t)o);
      for (int k = 0; k < 3; k++)
        ck_assert_msg(memcmp(got[k], want[k], bytes) == 0, "%s: %s %s kernel %d differs",
                      ops->name, loom_datatype_name(dt), loom_redop_name((loomRedOp_t)o), k);
    }
  if (native != NULL)
    ops->stream_destroy(native);
}

START_TEST(sim_kernels_match_host) { kernels_match_host(loomDeviceSim); }
END_TEST

START_TEST(host_kernels_match_host) { kernels_match_host(loomDeviceHost); }
END_TEST

START_TEST(cuda_kernels_match_host) { kernels_match_host(loomDeviceCuda); }
END_TEST

/* ---- events ---- */

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Polls ev for up to 5 s: its final answer. */
static loomResult_t event_within(const struct loom_device_ops *ops, void *ev) {
  for (int polls = 0; ops->event_query(ev) == loomInProgress && polls < 5000; polls++)
    sleep_ms(1);
  return ops->event_query(ev);
}


static atomic_int gate;

static void hold(void *arg) {
  (void)arg;
  for (int i = 0; i < 5000 && !atomic_load(&gate); i++) {
    struct timespec ms = {.tv_nsec = 1000000};
    nanosleep(&ms, NULL);
  }
}

static void events_wait_for_work(loomDevice_t d) {
  const struct loom_device_ops *ops = backend(d);
  if (ops == NULL || ops->event_create == NULL)
    return;
  void *native, *ev;
  ck_assert_int_eq(ops->stream_create(&native), loomSuccess);
  ck_assert_int_eq(ops->event_create(&ev), loomSuccess);
  ck_assert_int_eq(ops->event_query(ev), loomSuccess); /* never recorded */
  atomic_store(&gate, 0);
  ck_assert_int_eq(ops->host_func(native, hold, NULL), loomSuccess);
  ck_assert_int_eq(ops->event_record(ev, native), loomSuccess);
  for (int i = 0; i < 20; i++)
    ck_assert_int_eq(ops->event_query(ev), loomInProgress);
  ck_assert_int_eq(ops->stream_query(native), loomInProgress);
  atomic_store(&gate, 1);
  ck_assert_int_eq(event_within(ops, ev), loomSuccess);
  ck_assert_int_eq(ops->stream_sync(native), loomSuccess);
  ck_assert_int_eq(ops->stream_query(native), loomSuccess);
  ops->event_destroy(ev);
  ops->stream_destroy(native);
}

START_TEST(sim_events_wait_for_work) { events_wait_for_work(loomDeviceSim); }
END_TEST

START_TEST(cuda_events_wait_for_work) { events_wait_for_work(loomDeviceCuda); }
END_TEST

/* ---- waiting for a host word ---- */

static void streams_wait_for_host_word(loomDevice_t d) {
  const struct loom_device_ops *ops = backend(d);
  if (ops == NULL || ops->wait_value_async == NULL)
    return;
  uint32_t *flag;
  void *native, *other, *ev;
  ck_assert_int_eq(ops->host_alloc((void **)&flag, 64), loomSuccess);
  __atomic_store_n(flag, 0xfffffffeu, __ATOMIC_RELEASE);
  ck_assert_int_eq(ops->stream_create(&native), loomSuccess);
  ck_assert_int_eq(ops->event_create(&ev), loomSuccess);
  ck_assert_int_eq(ops->wait_value_async(native, flag, 1), loomSuccess); /* past the wrap */
  ck_assert_int_eq(ops->event_record(ev, native), loomSuccess);
  /* held: another stream can be made meanwhile (a blocking host function
   * would make CUDA wait here) */
  ck_assert_int_eq(ops->stream_create(&other), loomSuccess);
  ops->stream_destroy(other);
  sleep_ms(20);
  ck_assert_int_eq(ops->event_query(ev), loomInProgress);
  __atomic_store_n(flag, 0xffffffffu, __ATOMIC_RELEASE);
  sleep_ms(20);
  ck_assert_int_eq(ops->event_query(ev), loomInProgress); /* -1 is short of 1 */
  __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
  sleep_ms(20);
  ck_assert_int_eq(ops->event_query(ev), loomInProgress);
  __atomic_store_n(flag, 2, __ATOMIC_RELEASE); /* past the value also lets it go */
  ck_assert_int_eq(event_within(ops, ev), loomSuccess);
  ck_assert_int_eq(ops->stream_sync(native), loomSuccess);
  ops->event_destroy(ev);
  ops->stream_destroy(native);
  ops->host_free(flag);
}

START_TEST(sim_streams_wait_for_host_word) { streams_wait_for_host_word(loomDeviceSim); }
END_TEST

START_TEST(cuda_streams_wait_for_host_word) { streams_wait_for_host_word(loomDeviceCuda); }
END_TEST

/* ---- memory ---- */

START_TEST(sim_bounds_and_errors) {
  const struct loom_device_ops *ops = backend(loomDeviceSim);
  void *p, *q;
  ck_assert_int_eq(ops->mem_alloc(&p, 1000), loomSuccess);
  ck_assert_int_eq(ops->mem_alloc(&q, 5000), loomSuccess);
  uintptr_t base;
  size_t size;
  ck_assert_int_eq(ops->classify((char *)p + 999, &base, &size), 1);
  ck_assert_ptr_eq((void *)base, p);
  ck_assert_uint_eq(size, 1000);
  int local;
  ck_assert_int_eq(ops->classify(&local, &base, &size), 0);
  ck_assert_int_eq(loom_device_check_span((char *)p + 10, 990, "x", "t"), loomSuccess);
  ck_assert_int_eq(loom_device_check_span((char *)p + 10, 991, "x", "t"), loomInvalidArgument);
  /* work on freed memory is the stream's error, reported once */
  void *native;
  char host[64];
  ck_assert_int_eq(ops->stream_create(&native), loomSuccess);
  ck_assert_int_eq(ops->mem_free(p), loomSuccess);
  ck_assert_int_eq(ops->memcpy_async(host, p, sizeof host, native), loomSuccess);
  ck_assert_int_eq(ops->stream_sync(native), loomInvalidArgument);
  ck_assert_msg(strstr(loomGetLastError(NULL), "not in a live allocation") != NULL, "%s",
                loomGetLastError(NULL));
  ck_assert_int_eq(ops->stream_sync(native), loomSuccess);
  ops->stream_destroy(native);
  /* the freed range is reused, first fit */
  void *r;
  ck_assert_int_eq(ops->mem_alloc(&r, 4096), loomSuccess);
  ck_assert_ptr_eq(r, p);
  ck_assert_int_eq(ops->mem_free(r), loomSuccess);
  ck_assert_int_eq(ops->mem_free(q), loomSuccess);
  ck_assert_int_eq(ops->mem_free(q), loomInvalidArgument);
}
END_TEST

/* In a child process: opens the handle, checks it reads `want` and writes
 * `put` at byte 100.  The child's exit status: 0 when all went well. */
static int child_maps(const struct loom_device_ops *ops, const unsigned char *handle, char want,
                      char put) {
  void *base;
  if (ops->ipc_open(handle, &base) != loomSuccess)
    return 2;
  uintptr_t lo;
  size_t size;
  char got[256];
  if (ops->classify(base, &lo, &size) != 1 || size != 5000 ||
      ops->memcpy_sync(got, base, sizeof got) != loomSuccess)
    return 3;
  for (size_t i = 0; i < sizeof got; i++)
    if (got[i] != want)
      return 4;
  if (ops->mem_free(base) != loomInvalidArgument) /* not loomMemFree's to free */
    return 5;
  if (ops->memcpy_sync((char *)base + 100, &put, 1) != loomSuccess)
    return 6;
  ops->ipc_close(base);
  return 0;
}

static int run_child(const struct loom_device_ops *ops, const unsigned char *handle, char want,
                     char put) {
  pid_t pid = fork();
  if (pid == 0)
    _exit(child_maps(ops, handle, want, put));
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status));
  return WEXITSTATUS(status);
}

START_TEST(sim_ipc_shares_memory) {
  const struct loom_device_ops *ops = backend(loomDeviceSim);
  ck_assert_uint_eq(ops->ipc_handle_bytes, LOOM_SIM_IPC_HANDLE_BYTES);
  void *p;
  ck_assert_int_eq(ops->mem_alloc(&p, 5000), loomSuccess);
  char fill_bytes[5000];
  memset(fill_bytes, 'a', sizeof fill_bytes);
  ck_assert_int_eq(ops->memcpy_sync(p, fill_bytes, sizeof fill_bytes), loomSuccess);
  unsigned char handle[LOOM_IPC_HANDLE_MAX];
  size_t off = 1;
  ck_assert_int_eq(ops->ipc_get((char *)p + 40, handle, &off), loomSuccess);
  ck_assert_uint_eq(off, 40);
  void *self;
  ck_assert_int_eq(ops->ipc_open(handle, &self), loomInvalidArgument);
  ck_assert_int_eq(run_child(ops, handle, 'a', 'z'), 0);
  char got;
  ck_assert_int_eq(ops->memcpy_sync(&got, (char *)p + 100, 1), loomSuccess);
  ck_assert_int_eq(got, 'z'); /* the child's write */
  ck_assert_int_eq(ops->mem_free(p), loomSuccess);
  ck_assert_int_eq(run_child(ops, handle, 'a', 'z'), 2); /* freed: refused */
  /* a new allocation on the same descriptor number is another file */
  ck_assert_int_eq(ops->mem_alloc(&p, 5000), loomSuccess);
  unsigned char again[LOOM_IPC_HANDLE_MAX];
  ck_assert_int_eq(ops->ipc_get(p, again, &off), loomSuccess);
  ck_assert_int_eq(memcmp(again + 8, handle + 8, 4), 0); /* the same fd... */
  ck_assert_int_eq(run_child(ops, handle, 'a', 'z'), 2); /* ...but not the same file */
  ck_assert_int_eq(ops->mem_free(p), loomSuccess);
}
END_TEST

static Suite *device_suite(void) {
  Suite *s = suite_create("device");
  TCase *tc = tcase_create("kernels");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, host_kernels_match_host);
  tcase_add_test(tc, sim_kernels_match_host);
  tcase_add_test(tc, cuda_kernels_match_host);
  suite_add_tcase(s, tc);
  tc = tcase_create("streams");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, sim_events_wait_for_work);
  tcase_add_test(tc, cuda_events_wait_for_work);
  tcase_add_test(tc, sim_streams_wait_for_host_word);
  tcase_add_test(tc, cuda_streams_wait_for_host_word);
  tcase_add_test(tc, sim_bounds_and_errors);
  tcase_add_test(tc, sim_ipc_shares_memory);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  setenv("LOOM_DEBUG", "NONE", 1);
  loom_config_reload();
  SRunner *sr = srunner_create(device_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
