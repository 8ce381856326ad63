/*
 * WorkLoom.hpp — the Work object of one operation queued on a process
 * group's Loom stream.
 *
 * The operation's calls are queued on the stream, then a host function
 * (loomLaunchHostFunc) behind them; when the stream reaches it, the work
 * is complete: it copies results out of staging buffers, records the
 * error (the stream's pending error, or the communicator's), wakes wait()
 * and completes the future.  Until then the work holds every tensor the
 * calls read or write.
 */
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "loom.h"
#include "staging.hpp"

namespace loom_torch {

class WorkLoom : public c10d::Work {
 public:
  // `outputs` become result() and the future's value.
  WorkLoom(int rank, c10d::OpType type, const char *name, std::vector<at::Tensor> outputs,
           loomComm_t comm);
  ~WorkLoom() override;

  // Keeps `t` alive until the work completes.
  void hold(const at::Tensor &t) { held_.push_back(t); }
  void hold(const std::vector<at::Tensor> &ts) { held_.insert(held_.end(), ts.begin(), ts.end()); }

  // Copies done on completion when the calls succeeded: results in a
  // staging buffer go to the user's tensors.  Both ends must stay alive:
  // hold() them (or list them as outputs).
  void copy_on_success(const std::vector<ByteCopy> &copies);

  // Queues the completion behind the calls already queued on `stream`.
  // On failure the work completes at once with the error and this throws.
  void launch(loomStream_t stream);

  // Completes the work with `error` without running it (its calls were
  // never queued).
  void abandon(const std::string &error) { complete(error); }

  // Completes a work whose call already ran on the caller's thread
  // (stream NULL) with that call's result.
  void complete_now(loomResult_t res);

  // A receive from any source (recvAnysource): where loomRecvAny writes
  // the sender's rank, which sourceRank() then returns.
  int *source_slot() {
    any_source_ = true;
    return &source_;
  }
  int sourceRank() const override;

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  static void on_stream_done(void *self);  // the host function
  void complete(const std::string &error);

  std::string name_;
  loomComm_t comm_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> held_;
  std::vector<ByteCopy> copies_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  // Set once complete, after finish(): wait() polls it for a few
  // microseconds before it sleeps, which saves a wake-up on small calls.
  std::atomic<bool> done_{false};
  bool any_source_ = false;
  int source_ = -1;  // written by the stream's worker before completion
};

// Queues `copies` on `stream` (a host function): input tensors gathered
// into a staging buffer in stream order, after the work queued before.
// The buffers must stay alive until then (the work of the call holds them).
void launch_copies(loomStream_t stream, std::vector<ByteCopy> copies, const char *op);

}  // namespace loom_torch
