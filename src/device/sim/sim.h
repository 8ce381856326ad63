/*
 * sim.h — the simulated device's internals, shared by its memory
 * (sim_mem.c), its streams (sim_stream.c) and its ops table (sim_ops.c).
 *
 * Device memory is an address range reserved PROT_NONE: host code that
 * dereferences a device pointer faults at once, as it would on a GPU.
 * Each allocation's bytes live in a memfd mapped elsewhere (the storage);
 * only the backend translates a device address into its storage address.
 * Streams are worker threads running copies and kernels in order, each
 * after a random delay of up to LOOM_SIM_DELAY_US, so that a missing
 * ordering shows as wrong data instead of passing by luck.  As in CUDA,
 * creating a stream or opening an IPC handle waits while a host function
 * runs (loom_sim_api_exclusive): a host function that blocks until other
 * backend work is queued deadlocks here as it would on a GPU.
 */
#ifndef LOOM_DEVICE_SIM_SIM_H
#define LOOM_DEVICE_SIM_SIM_H

#include "loom.h"

#include <stddef.h>
#include <stdint.h>

/* ---- memory (sim_mem.c) ---- */
loomResult_t loom_sim_alloc(void **ptr, size_t bytes);
loomResult_t loom_sim_free(void *ptr);
/* 1 when ptr lies in the simulated device's address range. */
int loom_sim_in_range(const void *ptr);
/* 1 when ptr is simulated device memory; bounds of its allocation (size 0
 * when no live allocation holds it). */
int loom_sim_classify(const void *ptr, uintptr_t *base, size_t *size);
/* The host address of [ptr, ptr+bytes): ptr itself for host memory, the
 * storage for device memory; NULL (with *why set) when the span is not
 * inside one live allocation. */
void *loom_sim_translate(const void *ptr, size_t bytes, const char **why);
struct loom_alloc;
/* Gives allocation a (bytes, span, storage, fd set) an address in the
 * range: a->base; errors name fn. */
loomResult_t loom_sim_place(struct loom_alloc *a, const char *fn);
/* Takes the allocation starting at base out of the range into *out if
 * its `imported` flag matches: 0, or -1 when there is none such. */
int loom_sim_unplace(uintptr_t base, int imported, struct loom_alloc *out);
/* Maps a->fd's a->span bytes as a's storage and places it (*ptr: its
 * device address); on failure the file is closed and nothing is kept. */
loomResult_t loom_sim_map_and_place(struct loom_alloc *a, const char *fn, void **ptr);
/* Unmaps a's storage and closes its file (a taken out of the range). */
void loom_sim_release(const struct loom_alloc *a);
/* The allocation holding ptr: 1 with *out filled, or 0. */
int loom_sim_lookup(const void *ptr, struct loom_alloc *out);

/* ---- IPC (sim_ipc.c): another process's allocation, through its memfd ---- */
#define LOOM_SIM_IPC_HANDLE_BYTES 40
loomResult_t loom_sim_ipc_get(const void *ptr, void *handle, size_t *offset);
loomResult_t loom_sim_ipc_open(const void *handle, void **base);
void loom_sim_ipc_close(void *base);

/* ---- streams (sim_stream.c) ---- */
struct loom_sim_stream;
struct loom_sim_event;

enum loom_sim_op_kind { LOOM_SIM_COPY, LOOM_SIM_REDUCE, LOOM_SIM_PREMUL, LOOM_SIM_SCALE,
                        LOOM_SIM_HOST_FUNC, LOOM_SIM_EVENT, LOOM_SIM_WAIT,
                        LOOM_SIM_WAIT_VALUE };

struct loom_sim_op {
  enum loom_sim_op_kind kind;
  void *dst;
  const void *a, *b;
  size_t count; /* bytes for a copy, elements for a kernel */
  loomDataType_t dt;
  loomRedOp_t op;
  unsigned char scalar[8];
  int nranks;
  void (*fn)(void *);
  void *arg;
  struct loom_sim_event *event;
  uint64_t event_seq;
  const uint32_t *flag; /* LOOM_SIM_WAIT_VALUE: until (int32_t)(*flag - value) >= 0 */
  uint32_t value;
  struct loom_sim_op *next;
};

/* Calls that CUDA serialises against running host functions (stream
 * creation, IPC opens) run between these two: they wait while any host
 * function runs. */
void loom_sim_api_exclusive(void);
void loom_sim_api_shared_end(void);

loomResult_t loom_sim_stream_create(void **native);
void loom_sim_stream_destroy(void *native);
/* native NULL: the default stream, where the simulator runs nothing. */
loomResult_t loom_sim_stream_sync(void *native);
loomResult_t loom_sim_stream_query(void *native);
/* Queues a copy of *op (the stream owns the copy). */
loomResult_t loom_sim_stream_push(void *native, const struct loom_sim_op *op);
/* Runs one op now on the calling thread: loomSuccess, or an error whose
 * text is in `text`. */
loomResult_t loom_sim_op_run(const struct loom_sim_op *op, char *text, size_t len);

loomResult_t loom_sim_event_create(void **event);
void loom_sim_event_destroy(void *event);
loomResult_t loom_sim_event_record(void *event, void *native);
loomResult_t loom_sim_event_query(void *event);
/* Called by the stream when it reaches the record numbered seq. */
void loom_sim_event_reached(struct loom_sim_event *ev, uint64_t seq);
/* Queues on the stream a wait for the event's last record (the event is
 * kept alive by the queued wait). */
loomResult_t loom_sim_stream_wait_event(void *native, void *event);
/* Queues a wait until (int32_t)(*flag - value) >= 0 (device.h's
 * wait_value_async). */
loomResult_t loom_sim_wait_value(void *native, const uint32_t *flag, uint32_t value);
/* Wakes the streams waiting on flag (device.h's wait_value_wake). */
void loom_sim_wake_value(uint32_t *flag);

#endif
