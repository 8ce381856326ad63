/*
 * ProcessGroupLoom.hpp — the "loom" torch.distributed backend: one Loom
 * communicator and one Loom host stream per process group.
 *
 * Every operation checks its tensors on the calling thread, queues Loom
 * calls on the group's stream and returns a WorkLoom at once; the stream's
 * worker runs the calls in issue order.  PyTorch 1.x subclasses
 * c10d::ProcessGroup, 2.x c10d::Backend (chosen at compile time).
 */
#pragma once

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

#include "WorkLoom.hpp"
#include "loom.h"

namespace loom_torch {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

class ProcessGroupLoom : public BackendBase {
 public:
  // Collective over the group: rank 0 makes a unique id and publishes it in
  // `store`; the others read it (waiting up to the store's timeout).  The
  // group's `timeout` becomes the communicator's timeout_ms.
  ProcessGroupLoom(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                   std::chrono::milliseconds timeout);
  // A group around a communicator made already (shrink): takes it.
  ProcessGroupLoom(loomComm_t comm, int rank, int size, std::chrono::milliseconds timeout);
  ~ProcessGroupLoom() override;

  // loomCommShrink: a group of this group's ranks without `exclude` (group
  // ranks), in order, made without the store; `abort` revokes this group
  // first (LOOM_SHRINK_ABORT) so work stuck on a dead rank ends at once.
  // Every surviving rank calls it with the same list; an excluded rank
  // that calls gets nullptr (None).  This group stays usable only for
  // destruction.
  c10::intrusive_ptr<ProcessGroupLoom> shrink(const std::vector<int64_t> &exclude, bool abort);
  // loomCommDump: the flight recorder as JSON to `path` (empty: into
  // LOOM_TRACE_DUMP_DIR); any thread, also while operations run.
  void dump(const std::string &path);

  const std::string getBackendName() const override { return "loom"; }

  // At interpreter exit (atexit, before finalization): waits up to
  // `seconds` for every live group's queued work, so that it completes
  // while Python can still run its callbacks and free its tensors.
  static void drain_all(double seconds);
  std::chrono::milliseconds timeout() const { return timeout_; }

  WorkPtr broadcast(std::vector<at::Tensor> &tensors,
                    const c10d::BroadcastOptions &opts = c10d::BroadcastOptions()) override;
  WorkPtr allreduce(std::vector<at::Tensor> &tensors,
                    const c10d::AllreduceOptions &opts = c10d::AllreduceOptions()) override;
  WorkPtr allreduce_coalesced(
      std::vector<at::Tensor> &tensors,
      const c10d::AllreduceCoalescedOptions &opts = c10d::AllreduceCoalescedOptions()) override;
  WorkPtr reduce(std::vector<at::Tensor> &tensors,
                 const c10d::ReduceOptions &opts = c10d::ReduceOptions()) override;
  WorkPtr allgather(std::vector<std::vector<at::Tensor>> &outputs,
                    std::vector<at::Tensor> &inputs,
                    const c10d::AllgatherOptions &opts = c10d::AllgatherOptions()) override;
  // One all-gather per input tensor (each may have its own shape and
  // dtype; outputLists[r][i] receives rank r's inputs[i]), queued as one
  // Loom group and completed as one work.
  WorkPtr allgather_coalesced(
      std::vector<std::vector<at::Tensor>> &outputLists, std::vector<at::Tensor> &inputs,
      const c10d::AllgatherOptions &opts = c10d::AllgatherOptions()) override;
  WorkPtr _allgather_base(at::Tensor &output, at::Tensor &input,
                          const c10d::AllgatherOptions &opts = c10d::AllgatherOptions()) override;
  WorkPtr gather(std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
                 const c10d::GatherOptions &opts = c10d::GatherOptions()) override;
  WorkPtr scatter(std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
                  const c10d::ScatterOptions &opts = c10d::ScatterOptions()) override;
  WorkPtr reduce_scatter(
      std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
      const c10d::ReduceScatterOptions &opts = c10d::ReduceScatterOptions()) override;
  WorkPtr _reduce_scatter_base(
      at::Tensor &output, at::Tensor &input,
      const c10d::ReduceScatterOptions &opts = c10d::ReduceScatterOptions()) override;
  WorkPtr alltoall_base(at::Tensor &output, at::Tensor &input,
                        std::vector<int64_t> &outputSplitSizes,
                        std::vector<int64_t> &inputSplitSizes,
                        const c10d::AllToAllOptions &opts = c10d::AllToAllOptions()) override;
  WorkPtr alltoall(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                   const c10d::AllToAllOptions &opts = c10d::AllToAllOptions()) override;
  WorkPtr send(std::vector<at::Tensor> &tensors, int dstRank, int tag) override;
  WorkPtr recv(std::vector<at::Tensor> &tensors, int srcRank, int tag) override;
  WorkPtr recvAnysource(std::vector<at::Tensor> &tensors, int tag) override;
  WorkPtr barrier(const c10d::BarrierOptions &opts = c10d::BarrierOptions()) override;

  // Coalescing (batch_isend_irecv): the calls between start and end form
  // one loomGroupStart/End, so sends and receives in any order complete
  // (Loom runs a group's collectives first, then its sends and receives).
  void startCoalescing() override;
#if TORCH_VERSION_MAJOR >= 2 && !(TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR == 0)
  WorkPtr endCoalescing() override;
#else
  void endCoalescing(std::vector<WorkPtr> &reqs) override;
#endif

 private:
  // A work for an operation about to be queued.
  c10::intrusive_ptr<WorkLoom> make_work(c10d::OpType type, const char *name,
                                         std::vector<at::Tensor> outputs);
  // Queues the completion of `work` behind its calls, or keeps it for the
  // end of the current coalescing block; returns it.
  WorkPtr submit(const c10::intrusive_ptr<WorkLoom> &work);
  // Whether an operation of `bytes` runs on the caller's thread (stream
  // NULL) instead of the stream: at most LOOM_TORCH_INLINE_BYTES, outside
  // a coalescing block, and the stream idle, so the order is the same.  It
  // saves the hop to the stream's worker and back, which costs more than a
  // small call itself, but the call no longer returns before it is done.
  bool run_inline(size_t bytes);
  // Queues call(0) .. call(n - 1) as one Loom group and `work` behind
  // them (caller holds queue_mutex_).  Whatever got queued keeps its
  // tensors alive through the work, also when a call fails; then this
  // throws naming op.
  WorkPtr submit_group(const c10::intrusive_ptr<WorkLoom> &work, const char *op, size_t n,
                       const std::function<loomResult_t(size_t)> &call);
  void check_peer(int peer, const char *op) const;
  // What both constructors do once comm_ is made: the straggler callback,
  // the stream, and the live-group list.
  void start();

  loomComm_t comm_ = nullptr;
  loomStream_t stream_ = nullptr;
  std::chrono::milliseconds timeout_;
  size_t inline_bytes_;  // LOOM_TORCH_INLINE_BYTES (default 0: never)
  // Serialises the queuing of one operation (its calls and completion)
  // against other threads using this group.
  std::mutex queue_mutex_;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<WorkLoom>> coalesced_;
};

}  // namespace loom_torch
