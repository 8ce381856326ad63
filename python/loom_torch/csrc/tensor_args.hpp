/*
 * tensor_args.hpp — what the backend checks and translates before any
 * tensor reaches Loom: torch dtypes and reduce ops to Loom's, the checks
 * every tensor must pass (CPU, dense, contiguous, a dtype Loom has), and
 * Loom's error text turned into a Python exception.
 */
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "loom.h"

namespace loom_torch {

// A tensor as Loom sees it: a pointer, an element count and a Loom type.
// Complex tensors travel as pairs of real numbers (twice the count).
struct LoomBuffer {
  void *ptr;
  size_t count;
  loomDataType_t dtype;
  size_t bytes() const;
};

// Checks `t` (CPU, strided, contiguous, a dtype Loom can carry) and returns
// its buffer.  `op` and `what` name the call and the argument in the
// message, e.g. "loom all_gather: output tensor 2 is not contiguous".
LoomBuffer checked_buffer(const at::Tensor &t, const char *op, const std::string &what);

// Checks that every tensor of `list` has the dtype and element count of
// `like` (messages name the list and the index).
void check_same_shape(const std::vector<at::Tensor> &list, const at::Tensor &like,
                      const char *op, const char *list_name);

// Checks that a vector argument holds exactly `n` entries.
void check_count(size_t got, size_t n, const char *op, const char *what);

// For the single-tensor forms (all_gather_into_tensor, reduce_scatter_tensor):
// input and output share a dtype, and the `whole` one (named `whole_name`)
// holds group size x the elements of the `part` one.
void check_whole_and_part(const at::Tensor &whole, const char *whole_name,
                          const at::Tensor &part, const char *part_name, int size,
                          const char *op);

// Checks a root or peer rank against the group size.
void check_rank(int64_t rank, int size, const char *op, const char *what);

// A reduction as Loom runs it.  A PREMUL_SUM op is created on `comm` for
// the call and must be released with release() once the call is queued
// (Loom resolves it when the call is made).
class LoomReduction {
 public:
  LoomReduction(const c10d::ReduceOp &op, const at::Tensor &t, loomComm_t comm,
                const char *opname);
  ~LoomReduction();
  LoomReduction(const LoomReduction &) = delete;
  LoomReduction &operator=(const LoomReduction &) = delete;
  loomRedOp_t op() const { return op_; }

 private:
  loomRedOp_t op_;
  loomComm_t comm_;
  bool custom_ = false;
};

// Throws a RuntimeError "loom <op>: <Loom's last error>" when res failed.
void check_loom(loomResult_t res, const char *op);

// The message of Loom's last error on this thread, or the name of `res`
// when Loom left none.
std::string loom_error_text(loomResult_t res);

}  // namespace loom_torch
