/*
 * redop.c — custom reduction ops: loomRedOpCreatePreMulSum gives an op
 * value from loomNumOps up, valid on its communicator; reducing with it
 * sums scalar * x, the scalar being each rank's own.  A call resolves its
 * op when it is made, so the op may be destroyed once the call returns
 * (even while it is queued on a stream).  The premultiplied copy is made
 * by device/reduce.c's loom_premul.
 */
#include "api/comm.h"
#include "api/task.h"
#include "core/error.h"
#include "device/device.h"
#include "device/reduce.h"

#include <string.h>

#define BAD(...) loom_error(loomInvalidArgument, LOOM_LOG_COLL, __VA_ARGS__)

loomResult_t loom_redop_resolve(loomComm_t comm, loomRedOp_t op, loomDataType_t datatype,
                                loomRedOp_t *base, unsigned char scalar[8], int *premul,
                                const char *fn) {
  *premul = 0;
  *base = op;
  if ((int)op >= 0 && op < loomNumOps)
    return loomSuccess;
  unsigned idx = (unsigned)op - (unsigned)loomNumOps;
  pthread_mutex_lock(&comm->ops_lock);
  int in_use = (int)op >= 0 && idx < LOOM_MAX_CUSTOM_OPS && comm->custom_ops[idx].in_use;
  loomDataType_t made_for = in_use ? comm->custom_ops[idx].datatype : datatype;
  if (in_use && made_for == datatype)
    memcpy(scalar, comm->custom_ops[idx].scalar, sizeof comm->custom_ops[idx].scalar);
  pthread_mutex_unlock(&comm->ops_lock);
  if (!in_use)
    return BAD("%s: invalid reduction op %d (use loomSum, loomProd, loomMax, loomMin, loomAvg "
               "or an op from loomRedOpCreatePreMulSum on this communicator)",
               fn, (int)op);
  if (made_for != datatype)
    return BAD("%s: op %d was made for %s but the call uses %s", fn, (int)op,
               loom_datatype_name(made_for), loom_datatype_name(datatype));
  *base = loomSum;
  *premul = 1;
  return loomSuccess;
}

loomResult_t loomRedOpCreatePreMulSum(loomRedOp_t *op, void *scalar, loomDataType_t datatype,
                                      loomScalarResidence_t residence, loomComm_t comm) {
  static const char fn[] = "loomRedOpCreatePreMulSum";
  LOOM_CHECK(loom_comm_check_usable(comm, fn));
  if (op == NULL || scalar == NULL)
    return BAD("%s: %s is NULL", fn, op == NULL ? "op" : "scalar");
  if ((int)datatype < 0 || datatype >= loomNumTypes)
    return BAD("%s: invalid datatype %d", fn, (int)datatype);
  const struct loom_device_ops *ops;
  uintptr_t base;
  size_t size;
  loomDevice_t where = loom_device_of(scalar, &ops, &base, &size);
  if (residence == loomScalarHostImmediate && where != loomDeviceHost)
    return BAD("%s: scalar %p is %s device memory, but loomScalarHostImmediate reads it "
               "from the host: pass a host copy", fn, scalar, loom_device_name(where));
  if (residence != loomScalarHostImmediate)
    return BAD("%s: residence %d is not supported (host streams read the scalar from host "
               "memory: use loomScalarHostImmediate)",
               fn, (int)residence);
  pthread_mutex_lock(&comm->ops_lock);
  int idx = -1;
  for (int i = 0; i < LOOM_MAX_CUSTOM_OPS && idx < 0; i++)
    if (!comm->custom_ops[i].in_use)
      idx = i;
  if (idx >= 0) {
    comm->custom_ops[idx].in_use = 1;
    comm->custom_ops[idx].datatype = datatype;
    memcpy(comm->custom_ops[idx].scalar, scalar, loom_datatype_size(datatype));
  }
  pthread_mutex_unlock(&comm->ops_lock);
  if (idx < 0)
    return loom_error(loomInvalidUsage, LOOM_LOG_COLL,
                      "%s: all %d custom ops of this communicator are in use "
                      "(loomRedOpDestroy frees them)",
                      fn, LOOM_MAX_CUSTOM_OPS);
  *op = (loomRedOp_t)((int)loomNumOps + idx);
  return loomSuccess;
}

loomResult_t loomRedOpDestroy(loomRedOp_t op, loomComm_t comm) {
  static const char fn[] = "loomRedOpDestroy";
  if (comm == NULL || comm->magic != LOOM_COMM_MAGIC)
    return BAD("%s: comm is not a live communicator", fn);
  unsigned idx = (unsigned)op - (unsigned)loomNumOps;
  if ((int)op < (int)loomNumOps || idx >= LOOM_MAX_CUSTOM_OPS)
    return BAD("%s: op %d is not a custom op", fn, (int)op);
  pthread_mutex_lock(&comm->ops_lock);
  int was = comm->custom_ops[idx].in_use;
  comm->custom_ops[idx].in_use = 0;
  pthread_mutex_unlock(&comm->ops_lock);
  if (!was)
    return BAD("%s: op %d is not in use on this communicator", fn, (int)op);
  return loomSuccess;
}
