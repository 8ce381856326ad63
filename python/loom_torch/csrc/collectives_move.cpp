/*
 * collectives_move.cpp — the collectives of the loom backend that move
 * data without reducing it: broadcast, all_gather (list and tensor forms),
 * gather, scatter and all_to_all (list and single-tensor forms, with
 * split sizes).
 */
#include "ProcessGroupLoom.hpp"

#include "staging.hpp"
#include "tensor_args.hpp"

#include <string>

namespace loom_torch {

namespace {

std::string item(const char *list, size_t i) {
  return std::string(list) + "[" + std::to_string(i) + "]";
}

void check_all(const std::vector<at::Tensor> &ts, const char *op, const char *list) {
  for (size_t i = 0; i < ts.size(); i++)
    checked_buffer(ts[i], op, item(list, i));
}

// Loom element counts and displacements of an all-to-all's blocks along
// dim 0: `splits` rows each (equal blocks when empty).
void split_counts(const at::Tensor &t, const std::vector<int64_t> &splits, int size,
                  const char *op, const char *which, std::vector<size_t> &counts,
                  std::vector<size_t> &displs) {
  TORCH_CHECK(t.dim() >= 1, "loom ", op, ": ", which, " must have at least one dimension");
  const int64_t rows = t.size(0);
  const size_t per_row = rows == 0 ? 0 : checked_buffer(t, op, which).count / rows;
  counts.assign(size, 0);
  displs.assign(size, 0);
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "loom ", op, ": ", which, "'s dim 0 (", rows,
                ") does not divide into ", size, " equal blocks; pass split sizes");
  } else {
    TORCH_CHECK(splits.size() == static_cast<size_t>(size), "loom ", op, ": ", splits.size(),
                " ", which, " split sizes for a group of ", size);
    int64_t sum = 0;
    for (int64_t s : splits) {
      TORCH_CHECK(s >= 0, "loom ", op, ": negative ", which, " split size ", s);
      sum += s;
    }
    TORCH_CHECK(sum == rows, "loom ", op, ": ", which, " split sizes add up to ", sum,
                " but its dim 0 is ", rows);
  }
  size_t offset = 0;
  for (int j = 0; j < size; j++) {
    const int64_t block_rows = splits.empty() ? rows / size : splits[j];
    counts[j] = static_cast<size_t>(block_rows) * per_row;
    displs[j] = offset;
    offset += counts[j];
  }
}

}  // namespace

WorkPtr ProcessGroupLoom::broadcast(std::vector<at::Tensor> &tensors,
                                    const c10d::BroadcastOptions &opts) {
  static const char op[] = "broadcast";
  check_count(tensors.size(), 1, op, "tensor (one per process)");
  check_rank(opts.rootRank, size_, op, "src");
  TORCH_CHECK(opts.rootTensor == 0, "loom ", op, ": rootTensor must be 0");
  LoomBuffer b = checked_buffer(tensors[0], op, "tensor");
  std::lock_guard<std::mutex> lock(queue_mutex_);
  auto work = make_work(c10d::OpType::BROADCAST, op, tensors);
  const int root = static_cast<int>(opts.rootRank);
  if (run_inline(b.bytes())) {
    work->complete_now(loomBroadcast(b.ptr, b.ptr, b.count, b.dtype, root, comm_, nullptr));
    return work;
  }
  check_loom(loomBroadcast(b.ptr, b.ptr, b.count, b.dtype, root, comm_, stream_), op);
  return submit(work);
}

WorkPtr ProcessGroupLoom::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                    std::vector<at::Tensor> &inputs,
                                    const c10d::AllgatherOptions & /* opts */) {
  static const char op[] = "all_gather";
  check_count(inputs.size(), 1, op, "input tensor (one per process)");
  check_count(outputs.size(), 1, op, "output list (one per process)");
  check_count(outputs[0].size(), static_cast<size_t>(size_), op,
              "output tensors (one per rank of the group)");
  LoomBuffer in = checked_buffer(inputs[0], op, "input");
  check_all(outputs[0], op, "tensor_list");
  check_same_shape(outputs[0], inputs[0], op, "tensor_list");
  std::lock_guard<std::mutex> lock(queue_mutex_);
  auto work = make_work(c10d::OpType::ALLGATHER, op, outputs[0]);
  work->hold(inputs[0]);
  void *recv = outputs[0][0].data_ptr();
  // Back to back, the list is Loom's receive buffer, unless the input sits
  // in it anywhere but its own slot (Loom refuses such overlaps).
  const bool in_own_slot = inputs[0].data_ptr() == outputs[0][rank_].data_ptr();
  const char *lo = static_cast<const char *>(recv);
  const char *p = static_cast<const char *>(in.ptr);
  const bool overlaps = p + in.bytes() > lo && p < lo + in.bytes() * size_;
  if (!back_to_back(outputs[0]) || (overlaps && !in_own_slot)) {
    at::Tensor flat = staging_buffer(inputs[0], inputs[0].numel() * size_);
    work->hold(flat);
    work->copy_on_success(unpack_copies(flat, outputs[0]));
    recv = flat.data_ptr();
  }
  check_loom(loomAllGather(in.ptr, recv, in.count, in.dtype, comm_, stream_), op);
  return submit(work);
}

WorkPtr ProcessGroupLoom::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputLists,
                                              std::vector<at::Tensor> &inputs,
                                              const c10d::AllgatherOptions & /* opts */) {
  static const char op[] = "all_gather_coalesced";
  // outputLists[r][i] receives rank r's inputs[i].
  check_count(outputLists.size(), static_cast<size_t>(size_), op,
              "output lists (one per rank of the group)");
  std::vector<LoomBuffer> in;
  std::vector<at::Tensor> outputs;
  std::vector<std::vector<at::Tensor>> by_input(inputs.size());
  for (size_t i = 0; i < inputs.size(); i++)
    in.push_back(checked_buffer(inputs[i], op, item("input_tensor_list", i)));
  for (int r = 0; r < size_; r++) {
    check_count(outputLists[r].size(), inputs.size(), op,
                "tensors in each output list (one per input tensor)");
    check_all(outputLists[r], op, "output_tensor_lists");
    for (size_t i = 0; i < inputs.size(); i++)
      by_input[i].push_back(outputLists[r][i]);
    outputs.insert(outputs.end(), outputLists[r].begin(), outputLists[r].end());
  }
  for (size_t i = 0; i < inputs.size(); i++)
    check_same_shape(by_input[i], inputs[i], op, "output_tensor_lists");
  std::lock_guard<std::mutex> lock(queue_mutex_);
  auto work = make_work(c10d::OpType::ALLGATHER_COALESCED, op, outputs);
  work->hold(inputs);
  // Each input's ranks land in a staging buffer of its own (the outputs
  // of one input need not lie back to back), copied out on success.
  return submit_group(work, op, inputs.size(), [&](size_t i) {
    at::Tensor flat = staging_buffer(inputs[i], inputs[i].numel() * size_);
    work->hold(flat);
    work->copy_on_success(unpack_copies(flat, by_input[i]));
    return loomAllGather(in[i].ptr, flat.data_ptr(), in[i].count, in[i].dtype, comm_, stream_);
  });
}

WorkPtr ProcessGroupLoom::_allgather_base(at::Tensor &output, at::Tensor &input,
                                          const c10d::AllgatherOptions & /* opts */) {
  static const char op[] = "all_gather_into_tensor";
  LoomBuffer out = checked_buffer(output, op, "output");
  LoomBuffer in = checked_buffer(input, op, "input");
  check_whole_and_part(output, "output", input, "input", size_, op);
  std::lock_guard<std::mutex> lock(queue_mutex_);
  auto work = make_work(c10d::OpType::_ALLGATHER_BASE, op, {output});
  work->hold(input);
  check_loom(loomAllGather(in.ptr, out.ptr, in.count, in.dtype, comm_, stream_), op);
  return submit(work);
}

WorkPtr ProcessGroupLoom::gather(std::vector<std::vector<at::Tensor>> &outputs,
                                 std::vector<at::Tensor> &inputs,
                                 const c10d::GatherOptions &opts) {
  static const char op[] = "gather";
  check_rank(opts.rootRank, size_, op, "dst");
  const int root = static_cast<int>(opts.rootRank);
  check_count(inputs.size(), 1, op, "input tensor (one per process)");
  LoomBuffer in = checked_buffer(inputs[0], op, "input");
  if (rank_ == root) {
    check_count(outputs.size(), 1, op, "gather_list on the destination rank");
    check_count(outputs[0].size(), static_cast<size_t>(size_), op,
                "tensors in gather_list (one per rank of the group)");
    check_all(outputs[0], op, "gather_list");
    check_same_shape(outputs[0], inputs[0], op, "gather_list");
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(), "loom ", op,
                ": gather_list must be empty (None) on ranks other than dst ", root);
  }
  std::lock_guard<std::mutex> lock(queue_mutex_);
  auto work = make_work(c10d::OpType::GATHER, op,
                        rank_ == root ? outputs[0] : std::vector<at::Tensor>{});
  work->hold(inputs[0]);
  void *recv = nullptr;
  if (rank_ == root) {
    at::Tensor flat = staging_buffer(inputs[0], inputs[0].numel() * size_);
    work->hold(flat);
    work->copy_on_success(unpack_copies(flat, outputs[0]));
    recv = flat.data_ptr();
  }
  check_loom(loomGather(in.ptr, recv, in.count, in.dtype, root, comm_, stream_), op);
  return submit(work);
}

WorkPtr ProcessGroupLoom::scatter(std::vector<at::Tensor> &outputs,
                                  std::vector<std::vector<at::Tensor>> &inputs,
                                  const c10d::ScatterOptions &opts) {
  static const char op[] = "scatter";
  check_rank(opts.rootRank, size_, op, "src");
  const int root = static_cast<int>(opts.rootRank);
  check_count(outputs.size(), 1, op, "output tensor (one per process)");
  LoomBuffer out = checked_buffer(outputs[0], op, "output");
  if (rank_ == root) {
    check_count(inputs.size(), 1, op, "scatter_list on the source rank");
    check_count(inputs[0].size(), static_cast<size_t>(size_), op,
                "tensors in scatter_list (one per rank of the group)");
    check_all(inputs[0], op, "scatter_list");
    check_same_shape(inputs[0], outputs[0], op, "scatter_list");
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(), "loom ", op,
                ": scatter_list must be empty (None) on ranks other than src ", root);
  }
  std::lock_guard<std::mutex> lock(queue_mutex_);
  auto work = make_work(c10d::OpType::SCATTER, op, outputs);
  const void *send = nullptr;
  if (rank_ == root) {
    at::Tensor flat = staging_buffer(outputs[0], outputs[0].numel() * size_);
    work->hold(inputs[0]);
    work->hold(flat);
    launch_copies(stream_, pack_copies(inputs[0], flat), op);
    send = flat.data_ptr();
  }
  check_loom(loomScatter(send, out.ptr, out.count, out.dtype, root, comm_, stream_), op);
  return submit(work);
}

WorkPtr ProcessGroupLoom::alltoall_base(at::Tensor &output, at::Tensor &input,
                                        std::vector<int64_t> &outputSplitSizes,
                                        std::vector<int64_t> &inputSplitSizes,
                                        const c10d::AllToAllOptions & /* opts */) {
  static const char op[] = "all_to_all_single";
  LoomBuffer out = checked_buffer(output, op, "output");
  LoomBuffer in = checked_buffer(input, op, "input");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "loom ", op,
              ": input and output must have one dtype");
  std::vector<size_t> sendcounts, sdispls, recvcounts, rdispls;
  split_counts(input, inputSplitSizes, size_, op, "input", sendcounts, sdispls);
  split_counts(output, outputSplitSizes, size_, op, "output", recvcounts, rdispls);
  if (inputSplitSizes.empty() && outputSplitSizes.empty())
    TORCH_CHECK(in.count == out.count, "loom ", op, ": input has ", input.numel(),
                " elements and output ", output.numel(), "; without split sizes they must be "
                "equal");
  std::lock_guard<std::mutex> lock(queue_mutex_);
  auto work = make_work(c10d::OpType::ALLTOALL_BASE, op, {output});
  work->hold(input);
  check_loom(loomAllToAllv(in.ptr, sendcounts.data(), sdispls.data(), out.ptr, recvcounts.data(),
                           rdispls.data(), in.dtype, comm_, stream_),
             op);
  return submit(work);
}

WorkPtr ProcessGroupLoom::alltoall(std::vector<at::Tensor> &outputs,
                                   std::vector<at::Tensor> &inputs,
                                   const c10d::AllToAllOptions & /* opts */) {
  static const char op[] = "all_to_all";
  check_count(inputs.size(), static_cast<size_t>(size_), op, "input tensors (one per rank)");
  check_count(outputs.size(), static_cast<size_t>(size_), op, "output tensors (one per rank)");
  check_all(inputs, op, "input_tensor_list");
  check_all(outputs, op, "output_tensor_list");
  const at::ScalarType dtype = inputs[0].scalar_type();
  for (int j = 0; j < size_; j++)
    TORCH_CHECK(inputs[j].scalar_type() == dtype && outputs[j].scalar_type() == dtype, "loom ",
                op, ": all tensors must have one dtype (input_tensor_list[0]'s)");
  std::vector<size_t> sendcounts(size_), sdispls(size_), recvcounts(size_), rdispls(size_);
  size_t soff = 0, roff = 0;
  for (int j = 0; j < size_; j++) {
    sendcounts[j] = checked_buffer(inputs[j], op, item("input_tensor_list", j)).count;
    recvcounts[j] = checked_buffer(outputs[j], op, item("output_tensor_list", j)).count;
    sdispls[j] = soff;
    rdispls[j] = roff;
    soff += sendcounts[j];
    roff += recvcounts[j];
  }
  const loomDataType_t ldt = checked_buffer(inputs[0], op, "input_tensor_list[0]").dtype;
  std::lock_guard<std::mutex> lock(queue_mutex_);
  auto work = make_work(c10d::OpType::ALLTOALL, op, outputs);
  work->hold(inputs);
  at::Tensor flat_in = staging_buffer(inputs[0], total_numel(inputs));
  at::Tensor flat_out = staging_buffer(inputs[0], total_numel(outputs));
  work->hold(flat_in);
  work->hold(flat_out);
  launch_copies(stream_, pack_copies(inputs, flat_in), op);
  work->copy_on_success(unpack_copies(flat_out, outputs));
  check_loom(loomAllToAllv(flat_in.data_ptr(), sendcounts.data(), sdispls.data(),
                           flat_out.data_ptr(), recvcounts.data(), rdispls.data(), ldt, comm_,
                           stream_),
             op);
  return submit(work);
}

}  // namespace loom_torch
