/*
 * loom.h — the public API of Loom, a collective-communication library.
 *
 * The API is shaped like NCCL's so that porting is mechanical: rename the
 * `nccl` prefix to `loom`.  All functions return a loomResult_t; on failure
 * loomGetLastError() gives a human-readable message that names the rank,
 * the peer and the operation involved.
 *
 * Threading: a communicator may be used by one thread at a time, except for
 * loomCommGetAsyncError() and loomCommDump(), which any thread may call at
 * any time before the communicator is destroyed, and loomCommAbort() and
 * loomCommRevoke(), which may be called from another thread while a call
 * on the communicator is blocked (no new call may start once Abort has
 * begun).
 */
#ifndef LOOM_H
#define LOOM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_MAJOR 0
#define LOOM_MINOR 1
#define LOOM_PATCH 0
/* Encoded as NCCL does: MAJOR*10000 + MINOR*100 + PATCH. */
#define LOOM_VERSION_CODE (LOOM_MAJOR * 10000 + LOOM_MINOR * 100 + LOOM_PATCH)

/* Result codes; the values are NCCL's, loomTimeout is Loom's addition. */
typedef enum {
  loomSuccess = 0,
  loomUnhandledCudaError = 1, /* an error reported by the device runtime */
  loomSystemError = 2,        /* a system call failed (socket, memory, ...) */
  loomInternalError = 3,      /* a bug in Loom */
  loomInvalidArgument = 4,    /* a bad argument: NULL pointer, bad type, ... */
  loomInvalidUsage = 5,       /* a correct call used wrongly (mismatch, ...) */
  loomRemoteError = 6,        /* a peer died, closed its connection or failed */
  loomInProgress = 7,         /* a non-blocking operation has not finished */
  loomTimeout = 8,            /* a wait passed its deadline */
  loomNumResults = 9
} loomResult_t;

/* Data types, numbered as NCCL numbers them. */
typedef enum {
  loomInt8 = 0,
  loomChar = 0,
  loomUint8 = 1,
  loomInt32 = 2,
  loomInt = 2,
  loomUint32 = 3,
  loomInt64 = 4,
  loomUint64 = 5,
  loomFloat16 = 6,
  loomHalf = 6,
  loomFloat32 = 7,
  loomFloat = 7,
  loomFloat64 = 8,
  loomDouble = 8,
  loomBfloat16 = 9,
  loomNumTypes = 10
} loomDataType_t;

/* Reduction operations.  Integer sum and product wrap around (two's
 * complement); float16 and bfloat16 are reduced in float32 and rounded to
 * nearest-even after each step; loomAvg divides the sum by the number of
 * ranks (integer division for integer types). */
typedef enum {
  loomSum = 0,
  loomProd = 1,
  loomMax = 2,
  loomMin = 3,
  loomAvg = 4,
  loomNumOps = 5,
  /* Values from loomNumOps up are custom ops made by
   * loomRedOpCreatePreMulSum, valid on the communicator that made them. */
  loomMaxRedOp = 0x7fffffff
} loomRedOp_t;

/* Where the scalar of loomRedOpCreatePreMulSum lives.  Host memory only:
 * the value is read when the op is created. */
typedef enum {
  loomScalarDevice = 0, /* not supported on host streams */
  loomScalarHostImmediate = 1
} loomScalarResidence_t;

/* Opaque handles. */
typedef struct loomComm *loomComm_t;
typedef struct loomStream *loomStream_t;
typedef struct loomEvent *loomEvent_t;

/* Where memory lives and streams run (docs/devices.md).  loomDeviceSim is a
 * simulated accelerator, always built: its memory cannot be touched by host
 * code (a stray access faults) and its streams run work asynchronously on
 * their own threads.  loomDeviceCuda needs the CUDA module
 * (libloom-dev-cuda.so) and a GPU. */
typedef enum { loomDeviceHost = 0, loomDeviceSim = 1, loomDeviceCuda = 2 } loomDevice_t;

/* loomCommSplit: ranks passing this color get no new communicator. */
#define LOOM_SPLIT_NOCOLOR (-1)

#define LOOM_UNIQUE_ID_BYTES 128
/* Identifies one communicator's rendezvous: the root's address and port and
 * a random secret.  Create it once (loomGetUniqueId) and give it to every
 * rank, e.g. with MPI_Bcast. */
typedef struct {
  char internal[LOOM_UNIQUE_ID_BYTES];
} loomUniqueId;

/* Communicator configuration.  Always start from LOOM_CONFIG_INITIALIZER:
 * fields left at their initial value take Loom's defaults (and the
 * environment).
 *   blocking    1 (default): loomCommInitRankConfig returns when the
 *               communicator is ready.  0: it returns loomInProgress at once
 *               and loomCommGetAsyncError reports loomInProgress until the
 *               communicator is ready (then loomSuccess) or failed.
 *   timeout_ms  how long one collective may wait for a peer before failing
 *               with loomTimeout; default LOOM_TIMEOUT_MS (300000).
 *               0 means wait for ever (not recommended).
 *   commName    a name shown in the log (copied).
 *   algo        the algorithms this communicator may use, in LOOM_ALGO's
 *               syntax (e.g. "allreduce:ring"); read at init, overriding
 *               the LOOM_ALGO environment variable for this communicator
 *               only.  NULL (default): LOOM_ALGO's.  Added in 0.2: a
 *               config of the older, smaller size is still accepted. */
typedef struct loomConfig_v1 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int timeout_ms;
  const char *commName;
  const char *algo;
} loomConfig_t;

#define LOOM_CONFIG_UNDEF_INT (-2147483647 - 1)
#define LOOM_CONFIG_MAGIC 0x4c4f4f4du /* "LOOM" */
#define LOOM_CONFIG_INITIALIZER                                                \
  {                                                                            \
    sizeof(loomConfig_t), LOOM_CONFIG_MAGIC, LOOM_VERSION_CODE,                \
        LOOM_CONFIG_UNDEF_INT, LOOM_CONFIG_UNDEF_INT, NULL, NULL               \
  }

/* Marks the library's exported functions: libloom is built with hidden
 * visibility, so only what carries this is part of its ABI. */
#if defined(__GNUC__) && !defined(LOOM_STATIC)
#define LOOM_API __attribute__((visibility("default")))
#else
#define LOOM_API
#endif

/* ---- Errors and version -------------------------------------------------- */

/* A static string describing a result code (never NULL). */
LOOM_API const char *loomGetErrorString(loomResult_t result);

/* The message of the last error seen by the calling thread (empty before
 * the first; not cleared by later successes).  `comm` may be NULL; the text
 * is kept per thread.  loomCommGetAsyncError copies a communicator's error
 * into the caller's text, for errors first seen on another thread. */
LOOM_API const char *loomGetLastError(loomComm_t comm);

/* Writes LOOM_VERSION_CODE of the library (which may differ from the header
 * the program was compiled with). */
LOOM_API loomResult_t loomGetVersion(int *version);

/* ---- Communicator life cycle --------------------------------------------- */

/* Creates a unique id and starts the root listener in this process; the
 * listener thread ends when every rank has arrived, or LOOM_BOOTSTRAP_TIMEOUT
 * seconds after the first rank connected (or after its start, when none
 * does).  When LOOM_COMM_ID=host:port is set, every
 * caller gets the same id without starting anything: rank 0's
 * loomCommInitRank hosts the root at that address. */
LOOM_API loomResult_t loomGetUniqueId(loomUniqueId *uniqueId);

/* Creates this rank's member of an nranks-wide communicator.  Collective:
 * every rank 0..nranks-1 must call it with the same id.  Fails with
 * loomTimeout, naming the ranks that never arrived, after
 * LOOM_BOOTSTRAP_TIMEOUT seconds. */
LOOM_API loomResult_t loomCommInitRank(loomComm_t *comm, int nranks,
                                       loomUniqueId commId, int rank);
LOOM_API loomResult_t loomCommInitRankConfig(loomComm_t *comm, int nranks,
                                             loomUniqueId commId, int rank,
                                             loomConfig_t *config);
/* As loomCommInitRankConfig, with the rendezvous spread over nIds
 * bootstrap roots (NCCL's ncclCommInitRankScalable): commIds[i] is made by
 * loomGetUniqueId (LOOM_COMM_ID unset) in some process that stays up
 * until init returns, each id once, and every rank passes the same nIds
 * ids in the same order.  Root i serves ranks [i * nranks / nIds,
 * (i + 1) * nranks / nIds), so no root handles more than
 * ceil(nranks / nIds) hellos; put each node's ranks in one such block, or
 * its ranks in two blocks reach each other over the network.  1 <= nIds
 * <= nranks; nIds = 1 is loomCommInitRankConfig. */
LOOM_API loomResult_t loomCommInitRankScalable(loomComm_t *comm, int nranks, int rank,
                                               int nIds, loomUniqueId *commIds,
                                               loomConfig_t *config);

/* Creates ndev communicators of one ndev-rank clique in this process (rank i
 * in comms[i]), e.g. one per thread or device.  devlist may be NULL; its
 * entries are checked (>= 0) but not used: host ranks have no device.
 * Single-process only. */
LOOM_API loomResult_t loomCommInitAll(loomComm_t *comms, int ndev,
                                      const int *devlist);

/* Splits comm into disjoint communicators, one per color.  Collective over
 * comm: every rank calls it.  Ranks of one color are ordered by key, then
 * by their rank in comm.  color == LOOM_SPLIT_NOCOLOR (or any negative)
 * gives *newcomm = NULL.  config may be NULL; fields it leaves unset take
 * the parent's timeout and the name "<parent>.<color>". */
LOOM_API loomResult_t loomCommSplit(loomComm_t comm, int color, int key,
                                    loomComm_t *newcomm, loomConfig_t *config);

/* Carrying on without failed ranks.
 *
 * loomCommRevoke stops the communicator's work without freeing it: a call
 * blocked on it in another thread returns loomRemoteError at once, queued
 * stream work fails, and the ranks still waiting in a call with this one
 * are told (best effort, over the bootstrap ring) and fail naming it.
 * Afterwards every call on comm returns loomInvalidUsage except
 * loomCommShrink, loomCommDump, loomCommGetAsyncError, loomCommDestroy and
 * loomCommAbort.  Local: peers need not call it.
 *
 * loomCommShrink makes a communicator of comm's ranks without the nExclude
 * ranks in excludeRanks, keeping their order (new ranks fill the gaps),
 * with no new unique id: the survivors meet at the lowest surviving rank,
 * which serves the rendezvous on a port every rank published at init, and
 * prove a secret derived from comm's with the excluded set and the number
 * of shrinks of comm so far.  Every surviving rank calls it with the same
 * set (the excluded ranks need not call; if they do they get *newcomm =
 * NULL); a survivor with another set cannot join, and everyone fails at
 * LOOM_BOOTSTRAP_TIMEOUT.  comm may be broken (a rank died) or revoked.
 * flags: LOOM_SHRINK_DEFAULT waits for this rank's work on comm to end;
 * LOOM_SHRINK_ABORT revokes comm first, so work blocked on a dead rank
 * ends at once.  config as for loomCommSplit (unset fields: the parent's
 * timeout, the name "<parent>.shrink<N>").  comm stays to be destroyed. */
#define LOOM_SHRINK_DEFAULT 0
#define LOOM_SHRINK_ABORT 1
LOOM_API loomResult_t loomCommShrink(loomComm_t comm, const int *excludeRanks, int nExclude,
                                     loomComm_t *newcomm, loomConfig_t *config, int flags);
LOOM_API loomResult_t loomCommRevoke(loomComm_t comm);

/* Waits for work queued on streams for this communicator, then synchronises
 * with the other ranks (a bootstrap barrier), so that a following
 * loomCommDestroy cannot strand a peer mid-operation.  Afterwards only
 * loomCommDestroy may be called. */
LOOM_API loomResult_t loomCommFinalize(loomComm_t comm);

/* Waits for work queued on streams for this communicator, then frees its
 * resources (closes connections). */
LOOM_API loomResult_t loomCommDestroy(loomComm_t comm);

/* Stops the communicator: a collective blocked in another thread returns
 * loomRemoteError at once, connections are closed and resources freed;
 * peers are told and fail their own operations naming this rank.  (A
 * non-blocking init or a loomCommFinalize still running in another thread
 * is waited for; both are bounded by a few LOOM_BOOTSTRAP_TIMEOUT periods.)
 * The handle is dead afterwards: no thread may start a call on it once
 * Abort has begun. */
LOOM_API loomResult_t loomCommAbort(loomComm_t comm);

/* The communicator's asynchronous state: loomSuccess, loomInProgress (a
 * non-blocking init still running) or the error that broke it. */
LOOM_API loomResult_t loomCommGetAsyncError(loomComm_t comm,
                                            loomResult_t *asyncError);

/* Straggler warnings.  When a collective of comm has moved nothing for
 * LOOM_STRAGGLER_WARN_MS (default 10 s; 0 turns them off), this rank logs
 * one WARN naming the rank that has not joined the call (lateRank; -1
 * when every rank has joined and the call is stuck for another reason),
 * and, with a callback set, calls fn(comm, lateRank, text, arg) once for
 * that call with the WARN's text, on the thread that waits (a stream's
 * worker, or the caller).  fn must return soon and must not call Loom on
 * comm.  NULL removes it; a call already under way on another thread may
 * still run with the old fn and arg, so keep arg valid until the
 * communicator is destroyed. */
typedef void (*loomStragglerCallback_t)(loomComm_t comm, int lateRank, const char *text,
                                        void *arg);
LOOM_API loomResult_t loomCommSetStragglerCallback(loomComm_t comm,
                                                   loomStragglerCallback_t fn, void *arg);

/* The flight recorder.  Each communicator keeps its last LOOM_TRACE_BUFFER
 * calls (default 2000; 0 turns it off): arguments, algorithm, peers and
 * bytes per peer, state (queued, started, finished, failed) and times.  A
 * communicator that fails or is aborted dumps it once (LOOM_DUMP_ON_ERROR)
 * into LOOM_TRACE_DUMP_DIR; loomCommDump writes it now, as JSON, to path,
 * or with path NULL to LOOM_TRACE_DUMP_DIR/loom-trace.<comm>.<rank>.json.
 * Any thread may call it, even while a collective runs.  The loom-trace
 * tool merges every rank's dump into a verdict (docs/debugging.md).
 * loomInvalidUsage when the recorder is off; loomInvalidArgument when path
 * is NULL and LOOM_TRACE_DUMP_DIR unset; loomSystemError when the file
 * cannot be written. */
LOOM_API loomResult_t loomCommDump(loomComm_t comm, const char *path);

LOOM_API loomResult_t loomCommCount(const loomComm_t comm, int *count);
LOOM_API loomResult_t loomCommUserRank(const loomComm_t comm, int *rank);

/* ---- Collectives ----------------------------------------------------------
 */

/* Every collective and point-to-point call:
 *   - counts are in elements of `datatype`;
 *   - stream == NULL runs the call to completion on the calling thread;
 *     a stream (loomStreamCreate) queues it and the call returns at once:
 *     the buffers must stay valid and untouched until the stream (or an
 *     event recorded after the call) is synchronised;
 *   - between loomGroupStart and loomGroupEnd the call is only recorded;
 *   - bad arguments return loomInvalidArgument at once, with a message;
 *   - ranks calling different collectives, counts, types, ops or roots in
 *     the same position get loomInvalidUsage naming both calls; a rank
 *     whose part ended before any peer could tell (one that only sends,
 *     e.g. a root in its own view) gets it from its next call, and the
 *     mismatched call's results are undefined;
 *   - a dead or stuck peer gives loomRemoteError or loomTimeout naming it. */

/* Reduces `count` elements of every rank's sendbuff with `op` and writes the
 * result to every rank's recvbuff.  In place when sendbuff == recvbuff.
 * stream == NULL runs the call to completion on the calling thread. */
LOOM_API loomResult_t loomAllReduce(const void *sendbuff, void *recvbuff,
                                    size_t count, loomDataType_t datatype,
                                    loomRedOp_t op, loomComm_t comm,
                                    loomStream_t stream);

/* Gathers `sendcount` elements from every rank into every rank's recvbuff,
 * rank i's data at recvbuff + i*sendcount elements.  In place when
 * sendbuff == recvbuff + rank*sendcount elements. */
LOOM_API loomResult_t loomAllGather(const void *sendbuff, void *recvbuff,
                                    size_t sendcount, loomDataType_t datatype,
                                    loomComm_t comm, loomStream_t stream);

/* Reduces like loomAllReduce, then leaves rank i the i-th block of
 * `recvcount` elements: sendbuff holds nranks*recvcount elements, recvbuff
 * recvcount.  In place when recvbuff == sendbuff + rank*recvcount. */
LOOM_API loomResult_t loomReduceScatter(const void *sendbuff, void *recvbuff,
                                        size_t recvcount,
                                        loomDataType_t datatype, loomRedOp_t op,
                                        loomComm_t comm, loomStream_t stream);

/* Copies root's sendbuff to every rank's recvbuff (count elements).
 * sendbuff is read on root only.  In place when sendbuff == recvbuff. */
LOOM_API loomResult_t loomBroadcast(const void *sendbuff, void *recvbuff,
                                    size_t count, loomDataType_t datatype,
                                    int root, loomComm_t comm,
                                    loomStream_t stream);

/* Reduces every rank's sendbuff into root's recvbuff.  recvbuff is written
 * on root only (it may be NULL elsewhere). */
LOOM_API loomResult_t loomReduce(const void *sendbuff, void *recvbuff,
                                 size_t count, loomDataType_t datatype,
                                 loomRedOp_t op, int root, loomComm_t comm,
                                 loomStream_t stream);

/* Every rank sends `count` elements to every rank: block j of sendbuff
 * (at j*count) goes to rank j, and block i of recvbuff receives rank i's.
 * sendbuff and recvbuff must not overlap. */
LOOM_API loomResult_t loomAllToAll(const void *sendbuff, void *recvbuff,
                                   size_t count, loomDataType_t datatype,
                                   loomComm_t comm, loomStream_t stream);

/* All-to-all with per-peer sizes: sendcounts[j] elements at
 * sendbuff + sdispls[j] go to rank j, which must post recvcounts[i] equal to
 * it for this rank i; they land at recvbuff + rdispls[i].  Displacements
 * are in elements.  The arrays are copied before the call returns. */
LOOM_API loomResult_t loomAllToAllv(
    const void *sendbuff, const size_t sendcounts[], const size_t sdispls[],
    void *recvbuff, const size_t recvcounts[], const size_t rdispls[],
    loomDataType_t datatype, loomComm_t comm, loomStream_t stream);

/* Root receives `sendcount` elements from every rank, rank i's at
 * recvbuff + i*sendcount (recvbuff is used on root only).  In place on root
 * when sendbuff == recvbuff + root*sendcount. */
LOOM_API loomResult_t loomGather(const void *sendbuff, void *recvbuff,
                                 size_t sendcount, loomDataType_t datatype,
                                 int root, loomComm_t comm,
                                 loomStream_t stream);

/* Root sends block i of sendbuff (recvcount elements at i*recvcount) to
 * rank i (sendbuff is read on root only).  In place on root when
 * recvbuff == sendbuff + root*recvcount. */
LOOM_API loomResult_t loomScatter(const void *sendbuff, void *recvbuff,
                                  size_t recvcount, loomDataType_t datatype,
                                  int root, loomComm_t comm,
                                  loomStream_t stream);

/* Point to point.  peer may be this rank only inside a group (a send to
 * itself matched by a receive from itself).  A loomSend to `peer` matches
 * peer's loomRecv from this rank with the same count and type; several
 * between one pair match in issue order (sizes are compared in bytes).
 * Outside a group a send returns once its data is handed to the transport
 * (small messages before the peer receives, large ones only as the peer
 * receives: as with MPI_Send, two ranks that first send large messages to
 * each other deadlock; over TCP, the first message to a peer also waits
 * for that peer to enter any Loom call, which connects the pair, unless
 * LOOM_CONNECT=eager); inside loomGroupStart/End any mix of sends and
 * receives, in any order, completes without deadlock. */
LOOM_API loomResult_t loomSend(const void *sendbuff, size_t count,
                               loomDataType_t datatype, int peer,
                               loomComm_t comm, loomStream_t stream);
LOOM_API loomResult_t loomRecv(void *recvbuff, size_t count,
                               loomDataType_t datatype, int peer,
                               loomComm_t comm, loomStream_t stream);

/* A receive from whichever rank sends first (MPI_ANY_SOURCE, torch's
 * recv(src=None)): matches the next loomSend to this rank from any other
 * rank, as a loomRecv naming that rank would (per sender, sends still
 * match in issue order; sizes compare in bytes), and writes the sender's
 * rank to *source (on a stream: when the receive runs; read it after
 * synchronising).  Messages of collectives are never taken.  count must
 * be > 0, and the call cannot be inside loomGroupStart/End
 * (loomInvalidUsage).  It times out like any call (timeout_ms), but
 * then nothing was consumed and the communicator stays usable.  A peer
 * reached through a network plugin without `probe` cannot be served:
 * loomInvalidArgument. */
LOOM_API loomResult_t loomRecvAny(void *recvbuff, size_t count,
                                  loomDataType_t datatype, int *source,
                                  loomComm_t comm, loomStream_t stream);

/* Returns (or, on a stream, completes) once every rank has called it. */
LOOM_API loomResult_t loomBarrier(loomComm_t comm, loomStream_t stream);

/* A custom op: sum of (scalar * x) over ranks, the scalar (one element of
 * datatype, read from *scalar now) being this rank's.  Use it only with
 * `datatype` and `comm`; free it with loomRedOpDestroy. */
LOOM_API loomResult_t loomRedOpCreatePreMulSum(loomRedOp_t *op, void *scalar,
                                               loomDataType_t datatype,
                                               loomScalarResidence_t residence,
                                               loomComm_t comm);
LOOM_API loomResult_t loomRedOpDestroy(loomRedOp_t op, loomComm_t comm);

/* ---- Groups ----------------------------------------------------------------
 */

/* Calls between loomGroupStart and loomGroupEnd (per thread, nestable) are
 * recorded and issued together at the outermost loomGroupEnd: sends and
 * receives never deadlock whatever their order; small all-reduces and
 * all-gathers of one communicator, type and op are fused into buckets of up
 * to LOOM_BUCKET_BYTES (every rank must then make the same calls with the
 * same buffer aliasing and LOOM_BUCKET_BYTES, or the fused calls differ and
 * fail with loomInvalidUsage); calls on several communicators progress
 * together, also when they share a stream
 * (so one thread can drive every rank of loomCommInitAll).  Errors of the
 * calls run at loomGroupEnd (those without a stream) are returned by it;
 * those queued on a stream by loomStreamSynchronize. */
LOOM_API loomResult_t loomGroupStart(void);
LOOM_API loomResult_t loomGroupEnd(void);

/* ---- Host streams and events ------------------------------------------------
 */

/* A stream is a worker thread running queued work in issue order.  Work on
 * different streams runs concurrently. */
LOOM_API loomResult_t loomStreamCreate(loomStream_t *stream);
/* Waits for the queued work, then frees the stream. */
LOOM_API loomResult_t loomStreamDestroy(loomStream_t stream);
/* Waits until everything queued so far has run.  Returns the first error
 * of that work since the previous synchronisation (its message as the
 * last error), else loomSuccess. */
LOOM_API loomResult_t loomStreamSynchronize(loomStream_t stream);
/* loomSuccess when all queued work has run, loomInProgress otherwise. */
LOOM_API loomResult_t loomStreamQuery(loomStream_t stream);
/* Makes later work on `stream` wait until `event`'s last record completes. */
LOOM_API loomResult_t loomStreamWaitEvent(loomStream_t stream,
                                          loomEvent_t event);

/* Queues a call of fn(arg) on the stream's worker, after the work queued
 * before it (like cudaLaunchHostFunc).  fn runs whether or not that work
 * failed: while it runs, loomGetLastError(NULL) is the message of the
 * stream's first failure since the last loomStreamSynchronize ("" when
 * none), which it does not collect.  fn must not synchronise or destroy
 * its own stream, and should be short: later work waits for it.  Not
 * recorded by loomGroupStart: launch it after loomGroupEnd. */
LOOM_API loomResult_t loomLaunchHostFunc(loomStream_t stream,
                                         void (*fn)(void *), void *arg);

/* ---- Device memory and device streams (docs/devices.md) -------------------
 *
 * Every collective and send/recv accepts device buffers.  On a stream of
 * that device the call is queued and returns at once, ordered with the
 * stream's other work (copies, events, host functions, and for a stream
 * made from a native one, whatever else is queued there).  With
 * stream == NULL it runs to completion.  Buffers of one device with a
 * stream of another (or a host stream), a span past the end of an
 * allocation, or buffers of two devices in one call: loomInvalidArgument. */

/* Device memory.  loomDeviceHost: pinned host memory that the node's
 * other ranks can map, so that a collective of LOOM_HOST_IPC_MIN bytes or
 * more on such buffers reads and writes the peers' buffers directly
 * (docs/environment.md). */
LOOM_API loomResult_t loomMemAlloc(void **ptr, size_t bytes, loomDevice_t device);
/* Frees what loomMemAlloc returned; anything else: loomInvalidArgument. */
LOOM_API loomResult_t loomMemFree(void *ptr);
/* The device owning ptr; memory no device claims (malloc'd) is
 * loomDeviceHost. */
LOOM_API loomResult_t loomPointerGetDevice(const void *ptr, loomDevice_t *device);
/* A stream whose work runs on `device` (loomDeviceHost: loomStreamCreate). */
LOOM_API loomResult_t loomStreamCreateOnDevice(loomStream_t *stream, loomDevice_t device);
/* A stream over the backend's own (e.g. a cudaStream_t): Loom queues its
 * work there, ordered with the caller's; loomStreamDestroy leaves the
 * native stream alive. */
LOOM_API loomResult_t loomStreamCreateFromNative(loomStream_t *stream, loomDevice_t device,
                                                 void *native);
/* The device a stream runs on. */
LOOM_API loomResult_t loomStreamGetDevice(loomStream_t stream, loomDevice_t *device);
/* Copies bytes from src to dst, the direction taken from the pointers.
 * Queued on `stream` (returns at once); stream == NULL: done on return. */
LOOM_API loomResult_t loomMemcpyAsync(void *dst, const void *src, size_t bytes,
                                      loomStream_t stream);

LOOM_API loomResult_t loomEventCreate(loomEvent_t *event);
/* Marks the point in `stream` reached by work queued so far (NULL stream:
 * complete at once). */
LOOM_API loomResult_t loomEventRecord(loomEvent_t event, loomStream_t stream);
/* Waits for the last record to complete (at once if never recorded). */
LOOM_API loomResult_t loomEventSynchronize(loomEvent_t event);
/* loomSuccess when the last record completed, else loomInProgress. */
LOOM_API loomResult_t loomEventQuery(loomEvent_t event);
LOOM_API loomResult_t loomEventDestroy(loomEvent_t event);

/* ---- Launch environment ---------------------------------------------------
 */

/* Where a launcher put this process: read from loomrun (LOOM_RANK,
 * LOOM_NRANKS, LOOM_LOCAL_RANK), Open MPI's mpirun (OMPI_COMM_WORLD_RANK,
 * _SIZE, _LOCAL_RANK), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) or
 * torchrun (RANK, WORLD_SIZE, LOCAL_RANK), in that order. */
typedef struct {
  int rank;
  int nranks;
  int localRank;        /* -1 when the launcher does not say */
  const char *launcher; /* "loomrun", "mpirun", "slurm" or "torchrun" */
} loomLaunchInfo_t;

/* Fills `info` from the environment; loomInvalidUsage with a message when
 * no known launcher's variables are set or they are inconsistent. */
LOOM_API loomResult_t loomGetLaunchInfo(loomLaunchInfo_t *info);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_H */
