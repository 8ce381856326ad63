/*
 * WorkLoom.cpp — completion of a queued operation: the host function that
 * finishes the work on the stream's worker, and wait() with a deadline.
 */
#include "WorkLoom.hpp"

#include "tensor_args.hpp"

#include <ATen/core/jit_type.h>

#include <Python.h>

#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <thread>
#include <utility>

namespace loom_torch {

namespace {
// How long wait() polls before it sleeps (as Loom's LOOM_SPIN_US default).
constexpr std::chrono::microseconds kSpin(50);
}  // namespace

WorkLoom::WorkLoom(int rank, c10d::OpType type, const char *name,
                   std::vector<at::Tensor> outputs, loomComm_t comm)
    : c10d::Work(rank, type), name_(name), comm_(comm), outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

WorkLoom::~WorkLoom() = default;

void WorkLoom::copy_on_success(const std::vector<ByteCopy> &copies) {
  copies_.insert(copies_.end(), copies.begin(), copies.end());
}

void WorkLoom::launch(loomStream_t stream) {
  // The stream's reference: taken back by on_stream_done.
  WorkLoom *owned = c10::intrusive_ptr<WorkLoom>::unsafe_reclaim_from_nonowning(this).release();
  loomResult_t res = loomLaunchHostFunc(stream, on_stream_done, owned);
  if (res != loomSuccess) {
    c10::intrusive_ptr<WorkLoom>::reclaim(owned);  // drops it again
    std::string text = "loom " + name_ + ": " + loom_error_text(res);
    complete(text);
    throw std::runtime_error(text);
  }
}

namespace {
// Whether the interpreter is shutting down.  Then this thread (Loom's, not
// Python's) must not drop the last reference of a tensor or complete a
// future: either may take the GIL (a tensor's Python object, a callback),
// and a thread that takes the GIL during finalization is ended by Python
// with pthread_exit, whose unwinding through C++ frames that may not throw
// calls std::terminate: the process dies of SIGABRT at exit.
bool python_exiting() { return !Py_IsInitialized() || _Py_IsFinalizing(); }
}  // namespace

void WorkLoom::on_stream_done(void *self) {
  auto work = c10::intrusive_ptr<WorkLoom>::reclaim(static_cast<WorkLoom *>(self));
  if (python_exiting()) {
    (void)work.release();  // leaked on purpose: the process is ending
    return;
  }
  // The stream's first unsynchronised failure (the process group never
  // synchronises its stream, so once set it stays: a failure breaks the
  // communicator, and every later call fails too).
  std::string error = loomGetLastError(nullptr);
  if (error.empty()) {
    loomResult_t async = loomSuccess;
    if (loomCommGetAsyncError(work->comm_, &async) == loomSuccess && async != loomSuccess &&
        async != loomInProgress)
      error = loom_error_text(async);
  }
  if (!error.empty())
    error = "loom " + work->name_ + ": " + error;
  work->complete(error);
}

void WorkLoom::complete_now(loomResult_t res) {
  complete(res == loomSuccess ? "" : "loom " + name_ + ": " + loom_error_text(res));
}

void WorkLoom::complete(const std::string &error) {
  // Runs on Loom's worker thread, called from C: nothing may escape.
  try {
    std::exception_ptr failure;
    if (error.empty()) {
      for (const ByteCopy &c : copies_)
        std::memcpy(c.dst, c.src, c.bytes);
    } else {
      failure = std::make_exception_ptr(std::runtime_error(error));
    }
    copies_.clear();
    held_.clear();
    // The future first, as gloo does: once wait() returns, the future is
    // complete too.
    if (failure)
      future_->setError(failure);
    else
      future_->markCompleted(c10::IValue(outputs_));
    finish(failure);
    done_.store(true, std::memory_order_release);
  } catch (const std::exception &e) {
    TORCH_WARN("loom ", name_, ": completing the work failed: ", e.what());
  } catch (...) {
    TORCH_WARN("loom ", name_, ": completing the work failed");
  }
}

int WorkLoom::sourceRank() const {
  if (!any_source_)
    return c10d::Work::sourceRank();  // torch's error: not a recv from any source
  std::lock_guard<std::mutex> lock(mutex_);  // completed_ is set under it, after source_
  TORCH_CHECK(completed_, "loom: ", name_,
              ": the sender is known once the receive has completed (call wait() first)");
  TORCH_CHECK(!exception_ && source_ >= 0, "loom: ", name_,
              ": the receive failed, so it has no sender (wait() raises its error)");
  return source_;
}

bool WorkLoom::wait(std::chrono::milliseconds timeout) {
  // Small calls complete within microseconds: poll (yielding the core to
  // the stream's worker) before sleeping on the condition variable.
  const auto spin_until = std::chrono::steady_clock::now() + kSpin;
  while (!done_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < spin_until)
    std::this_thread::yield();
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [this] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [this] { return completed_; })) {
    TORCH_CHECK(false, "loom ", name_, ": not complete after wait(timeout=", timeout.count(),
                " ms); it keeps running, bounded by the process group's timeout");
  }
  if (exception_)
    std::rethrow_exception(exception_);
  return true;
}

namespace {
void run_copies(void *arg) {
  std::unique_ptr<std::vector<ByteCopy>> copies(static_cast<std::vector<ByteCopy> *>(arg));
  for (const ByteCopy &c : *copies)
    std::memcpy(c.dst, c.src, c.bytes);
}
}  // namespace

void launch_copies(loomStream_t stream, std::vector<ByteCopy> copies, const char *op) {
  if (copies.empty())
    return;
  auto *arg = new std::vector<ByteCopy>(std::move(copies));
  loomResult_t res = loomLaunchHostFunc(stream, run_copies, arg);
  if (res != loomSuccess) {
    delete arg;
    check_loom(res, op);
  }
}

}  // namespace loom_torch
