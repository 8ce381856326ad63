/*
 * shrink.c — carrying on without failed ranks: loomCommRevoke (stop the
 * communicator's work, keep its resources) and loomCommShrink (a
 * communicator of the survivors, without a new unique id).
 *
 * Every rank opens a listening socket at init, its shrink port, and
 * publishes its address in the topology all-gather (comm_topo.c).  Nothing
 * is accepted on it until a shrink: then the lowest surviving rank serves
 * the survivors' rendezvous on it with the bootstrap root's code
 * (bootstrap/root.c: every connection must prove the secret, a flood
 * cannot starve it), and every survivor joins knowing the address and the
 * secret without being told: the secret is derived from the parent's, the
 * excluded set and how many shrinks of the parent came before.
 */
#include "api/comm.h"
#include "core/config.h"
#include "core/error.h"
#include "core/hmac.h"
#include "net/bytes.h"
#include "trace/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

loomResult_t loom_comm_shrink_listen(loomComm_t comm) {
  union loom_sockaddr at = *loom_bootstrap_local_addr(comm->bs);
  loom_sockaddr_set_port(&at, 0);
  return loom_socket_listen(&at, &comm->shrink_fd, &comm->shrink_addr);
}

loomResult_t loomCommRevoke(loomComm_t comm) {
  LOOM_CHECK(loom_comm_check_handle(comm, "loomCommRevoke"));
  if (atomic_exchange(&comm->revoked, 1) != 0)
    return loomSuccess; /* already revoked */
  char text[96];
  snprintf(text, sizeof text, "rank %d revoked the communicator (loomCommRevoke)", comm->rank);
  loom_comm_stop(comm, LOOM_NOTICE_REVOKE, "revoke", text);
  LOOM_INFO(LOOM_LOG_INIT, "comm %s: rank %d revoked it", comm->name, comm->rank);
  return loomSuccess;
}

/* Checks the excluded set: ranks of comm, none twice, not all of them.
 * Marks them in out (nranks flags). */
static loomResult_t read_excluded(const loomComm_t comm, const int *ranks, int n,
                                  uint8_t *out) {
  static const char fn[] = "loomCommShrink";
  if (n < 0 || n >= comm->nranks)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "%s: rank %d: nExclude = %d (must be 0 to nranks - 1 = %d)", fn,
                      comm->rank, n, comm->nranks - 1);
  if (n > 0 && ranks == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "%s: rank %d: excludeRanks is NULL with nExclude = %d", fn, comm->rank, n);
  for (int i = 0; i < n; i++) {
    if (ranks[i] < 0 || ranks[i] >= comm->nranks)
      return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                        "%s: rank %d: excludeRanks[%d] = %d is not a rank of the %d", fn,
                        comm->rank, i, ranks[i], comm->nranks);
    if (out[ranks[i]])
      return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                        "%s: rank %d: excludeRanks names rank %d twice", fn, comm->rank,
                        ranks[i]);
    out[ranks[i]] = 1;
  }
  return loomSuccess;
}

/* The shrink's id: the lowest survivor's shrink port, and a secret every
 * survivor derives alike from the parent's, the shrink's number and the
 * excluded set (so that survivors who disagree on it cannot meet). */
static loomResult_t shrink_id(const loomComm_t comm, const uint8_t *excluded, int lowest,
                              struct loom_id_fields *f) {
  memset(f, 0, sizeof *f);
  if (loom_sockaddr_decode(comm->shrink_addrs + (size_t)lowest * LOOM_SOCKADDR_BYTES,
                           &f->root) != 0)
    return loom_error(loomInternalError, LOOM_LOG_INIT,
                      "loomCommShrink: rank %d: rank %d's shrink port address is unreadable",
                      comm->rank, lowest);
  uint8_t head[8];
  loom_put_u32(head, comm->shrinks);
  loom_put_u32(head + 4, (uint32_t)comm->nranks);
  const struct loom_bytes parts[] = {
      {"loom/shrink", 11}, {head, sizeof head}, {excluded, (size_t)comm->nranks}};
  uint8_t digest[LOOM_SHA256_BYTES];
  loom_hmac_sha256(loom_bootstrap_secret(comm->bs), LOOM_SECRET_BYTES, parts, 3, digest);
  memcpy(f->secret, digest, LOOM_SECRET_BYTES);
  return loomSuccess;
}

/* The rank's part in the shrink over the parent, under op_lock: revoke or
 * wait, then the id, the new rank and size; the lowest survivor serves the
 * rendezvous. */
static loomResult_t prepare(loomComm_t comm, const uint8_t *excluded, int *newrank, int *newn,
                            int *lowest_out, loomUniqueId *id) {
  int lowest = -1;
  *newrank = -1;
  *newn = 0;
  for (int r = 0; r < comm->nranks; r++) {
    if (excluded[r])
      continue;
    if (lowest < 0)
      lowest = r;
    if (r == comm->rank)
      *newrank = *newn;
    (*newn)++;
  }
  *lowest_out = lowest;
  struct loom_id_fields f;
  LOOM_CHECK(shrink_id(comm, excluded, lowest, &f));
  loom_id_encode(&f, id);
  if (lowest != comm->rank)
    return loomSuccess;
  int fd = dup(comm->shrink_fd);
  if (fd < 0)
    return loom_error(loomSystemError, LOOM_LOG_INIT,
                      "loomCommShrink: rank %d: cannot reuse the shrink port: %s", comm->rank,
                      strerror(errno));
  return loom_root_serve(fd, &comm->shrink_addr, f.secret,
                         (int)loom_param_int(LOOM_PARAM_BOOTSTRAP_TIMEOUT));
}

/* Unset config fields take the parent's timeout and "<parent>.shrink<N>". */
static loomResult_t init_survivors(loomComm_t comm, int newn, int newrank, int lowest,
                                   loomUniqueId id, loomConfig_t *config, loomComm_t *newcomm) {
  loomConfig_t cfg;
  char suffix[24], name[80];
  snprintf(suffix, sizeof suffix, "shrink%u", comm->shrinks - 1);
  loom_comm_child_config(comm, config, suffix, &cfg, name, sizeof name);
  loomResult_t res = loomCommInitRankConfig(newcomm, newn, id, newrank, &cfg);
  if (res != loomSuccess && res != loomInProgress) {
    char text[1200];
    snprintf(text, sizeof text,
             "%s (loomCommShrink: the survivors meet at parent rank %d, the lowest not "
             "excluded, and are numbered in parent order; every surviving rank must call "
             "it with the same excludeRanks, after the same number of earlier shrinks of "
             "this communicator)",
             loom_last_error(), lowest);
    loom_set_last_error(text);
  }
  return res;
}

loomResult_t loomCommShrink(loomComm_t comm, const int *excludeRanks, int nExclude,
                            loomComm_t *newcomm, loomConfig_t *config, int flags) {
  static const char fn[] = "loomCommShrink";
  if (newcomm == NULL)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT, "%s: newcomm is NULL", fn);
  *newcomm = NULL;
  LOOM_CHECK(loom_comm_check_handle(comm, fn));
  if (flags != LOOM_SHRINK_DEFAULT && flags != LOOM_SHRINK_ABORT)
    return loom_error(loomInvalidArgument, LOOM_LOG_INIT,
                      "%s: rank %d: flags = %d (LOOM_SHRINK_DEFAULT or LOOM_SHRINK_ABORT)", fn,
                      comm->rank, flags);
  int state = atomic_load_explicit(&comm->async_error, memory_order_acquire);
  if (state == loomInProgress || comm->shrink_addrs == NULL)
    return loom_error(loomInvalidUsage, LOOM_LOG_INIT,
                      "%s: rank %d: the communicator never finished its init", fn, comm->rank);
  int blocking, timeout_ms;
  const char *cfg_name;
  LOOM_CHECK(loom_read_config(config, &blocking, &timeout_ms, &cfg_name));
  uint8_t *excluded = calloc((size_t)comm->nranks, 1);
  if (excluded == NULL)
    return loom_error(loomSystemError, LOOM_LOG_INIT, "%s: out of memory", fn);
  loomResult_t res = read_excluded(comm, excludeRanks, nExclude, excluded);
  if (res == loomSuccess && flags == LOOM_SHRINK_ABORT)
    res = loomCommRevoke(comm);
  int newrank = -1, newn = 0, lowest = -1;
  loomUniqueId id;
  if (res == loomSuccess) {
    loom_comm_wait_tasks(comm);
    loom_oplock_lock(&comm->op_lock);
    uint64_t trace_id = loom_comm_trace_op(comm, LOOM_TRACE_SHRINK);
    comm->shrinks++;
    if (!excluded[comm->rank])
      res = prepare(comm, excluded, &newrank, &newn, &lowest, &id);
    loom_comm_trace_op_ended(comm, trace_id, res);
    loom_oplock_unlock(&comm->op_lock);
  }
  free(excluded);
  if (res != loomSuccess || newrank < 0)
    return res;
  LOOM_INFO(LOOM_LOG_INIT, "comm %s: rank %d shrinks to rank %d of %d (%d excluded)", comm->name,
            comm->rank, newrank, newn, nExclude);
  return init_survivors(comm, newn, newrank, lowest, id, config, newcomm);
}
