/*
 * collectives_reduce.cpp — the reductions of the loom backend: all_reduce
 * (also coalesced, through one Loom group so that Loom fuses them into
 * buckets), reduce, reduce_scatter and reduce_scatter_tensor.
 */
#include "ProcessGroupLoom.hpp"

#include "staging.hpp"
#include "tensor_args.hpp"

#include <string>

namespace loom_torch {

WorkPtr ProcessGroupLoom::allreduce(std::vector<at::Tensor> &tensors,
                                    const c10d::AllreduceOptions &opts) {
  static const char op[] = "all_reduce";
  check_count(tensors.size(), 1, op, "tensor (one per process)");
  LoomBuffer b = checked_buffer(tensors[0], op, "tensor");
  std::lock_guard<std::mutex> lock(queue_mutex_);
  LoomReduction red(opts.reduceOp, tensors[0], comm_, op);
  auto work = make_work(c10d::OpType::ALLREDUCE, op, tensors);
  if (run_inline(b.bytes())) {
    work->complete_now(loomAllReduce(b.ptr, b.ptr, b.count, b.dtype, red.op(), comm_, nullptr));
    return work;
  }
  check_loom(loomAllReduce(b.ptr, b.ptr, b.count, b.dtype, red.op(), comm_, stream_), op);
  return submit(work);
}

WorkPtr ProcessGroupLoom::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                              const c10d::AllreduceCoalescedOptions &opts) {
  static const char op[] = "all_reduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "loom ", op, ": no tensors");
  std::vector<LoomBuffer> bufs;
  for (size_t i = 0; i < tensors.size(); i++) {
    bufs.push_back(checked_buffer(tensors[i], op, "tensor " + std::to_string(i)));
    TORCH_CHECK(tensors[i].scalar_type() == tensors[0].scalar_type(), "loom ", op,
                ": all tensors must have one dtype (tensor ", i, " differs from tensor 0)");
  }
  std::lock_guard<std::mutex> lock(queue_mutex_);
  LoomReduction red(opts.reduceOp, tensors[0], comm_, op);
  auto work = make_work(c10d::OpType::ALLREDUCE_COALESCED, op, tensors);
  // One group: Loom fuses consecutive all-reduces of one type and op.
  return submit_group(work, op, bufs.size(), [&](size_t i) {
    return loomAllReduce(bufs[i].ptr, bufs[i].ptr, bufs[i].count, bufs[i].dtype, red.op(), comm_,
                         stream_);
  });
}

WorkPtr ProcessGroupLoom::reduce(std::vector<at::Tensor> &tensors,
                                 const c10d::ReduceOptions &opts) {
  static const char op[] = "reduce";
  check_count(tensors.size(), 1, op, "tensor (one per process)");
  check_rank(opts.rootRank, size_, op, "dst");
  TORCH_CHECK(opts.rootTensor == 0, "loom ", op, ": rootTensor must be 0");
  LoomBuffer b = checked_buffer(tensors[0], op, "tensor");
  std::lock_guard<std::mutex> lock(queue_mutex_);
  LoomReduction red(opts.reduceOp, tensors[0], comm_, op);
  auto work = make_work(c10d::OpType::REDUCE, op, tensors);
  check_loom(loomReduce(b.ptr, b.ptr, b.count, b.dtype, red.op(),
                        static_cast<int>(opts.rootRank), comm_, stream_),
             op);
  return submit(work);
}

WorkPtr ProcessGroupLoom::reduce_scatter(std::vector<at::Tensor> &outputs,
                                         std::vector<std::vector<at::Tensor>> &inputs,
                                         const c10d::ReduceScatterOptions &opts) {
  static const char op[] = "reduce_scatter";
  check_count(outputs.size(), 1, op, "output tensor (one per process)");
  check_count(inputs.size(), 1, op, "input list (one per process)");
  check_count(inputs[0].size(), static_cast<size_t>(size_), op,
              "input tensors (one per rank of the group)");
  LoomBuffer out = checked_buffer(outputs[0], op, "output");
  for (size_t i = 0; i < inputs[0].size(); i++)
    checked_buffer(inputs[0][i], op, "input_list[" + std::to_string(i) + "]");
  check_same_shape(inputs[0], outputs[0], op, "input_list");
  std::lock_guard<std::mutex> lock(queue_mutex_);
  LoomReduction red(opts.reduceOp, outputs[0], comm_, op);
  auto work = make_work(c10d::OpType::REDUCE_SCATTER, op, outputs);
  work->hold(inputs[0]);
  const void *send = inputs[0][0].data_ptr();
  if (!back_to_back(inputs[0])) {
    at::Tensor flat = staging_buffer(outputs[0], total_numel(inputs[0]));
    launch_copies(stream_, pack_copies(inputs[0], flat), op);
    work->hold(flat);
    send = flat.data_ptr();
  }
  check_loom(loomReduceScatter(send, out.ptr, out.count, out.dtype, red.op(), comm_, stream_), op);
  return submit(work);
}

WorkPtr ProcessGroupLoom::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                               const c10d::ReduceScatterOptions &opts) {
  static const char op[] = "reduce_scatter_tensor";
  LoomBuffer out = checked_buffer(output, op, "output");
  LoomBuffer in = checked_buffer(input, op, "input");
  check_whole_and_part(input, "input", output, "output", size_, op);
  std::lock_guard<std::mutex> lock(queue_mutex_);
  LoomReduction red(opts.reduceOp, output, comm_, op);
  auto work = make_work(c10d::OpType::_REDUCE_SCATTER_BASE, op, {output});
  work->hold(input);
  check_loom(loomReduceScatter(in.ptr, out.ptr, out.count, out.dtype, red.op(), comm_, stream_),
             op);
  return submit(work);
}

}  // namespace loom_torch
