/*
 * ProcessGroupLoom.cpp — the process group's life cycle (unique id through
 * the store, communicator and stream), how an operation's work is queued,
 * coalescing blocks, point-to-point calls and the barrier.  The
 * collectives are in collectives_reduce.cpp and collectives_move.cpp.
 */
#include "ProcessGroupLoom.hpp"

#include "tensor_args.hpp"

#include <Python.h>

#include <climits>
#include <set>
#include <thread>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace loom_torch {

namespace {

// Releases the GIL for the scope when this thread holds it: tearing down
// waits for the stream, whose completions may run Python future callbacks.
class GilRelease {
 public:
  GilRelease() {
    if (Py_IsInitialized() && PyGILState_Check())
      saved_ = PyEval_SaveThread();
  }
  ~GilRelease() {
    if (saved_ != nullptr)
      PyEval_RestoreThread(saved_);
  }
  GilRelease(const GilRelease &) = delete;
  GilRelease &operator=(const GilRelease &) = delete;

 private:
  PyThreadState *saved_ = nullptr;
};

int timeout_ms_of(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0)
    return 0;  // Loom: wait for ever
  return timeout.count() > INT_MAX ? INT_MAX : static_cast<int>(timeout.count());
}

// The unique id of this group's communicator, through the store.  Every
// rank counts its inits on the store, so a store that serves a second
// group of the same name (init, destroy, init again) gets a fresh key.
loomUniqueId exchange_unique_id(c10d::Store &store, int rank, int size) {
  int64_t arrivals = store.add("loom_torch/inits", 1);
  std::string key = "loom_torch/unique_id/" + std::to_string((arrivals - 1) / size);
  loomUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank == 0) {
    check_loom(loomGetUniqueId(&id), "init");
    const uint8_t *p = reinterpret_cast<const uint8_t *>(id.internal);
    store.set(key, std::vector<uint8_t>(p, p + sizeof id.internal));
  } else {
    std::vector<uint8_t> bytes = store.get(key);  // waits up to the store's timeout
    TORCH_CHECK(bytes.size() == sizeof id.internal, "loom init: the unique id in the store under '",
                key, "' has ", bytes.size(), " bytes, expected ", sizeof id.internal);
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  return id;
}

// LOOM_TORCH_INLINE_BYTES: all_reduce, broadcast and barrier up to this
// size run on the caller's thread when the group's stream is idle
// (docs/torch.md).  Off by default: such a call blocks until every rank
// has made it, even with async_op=True, so a program that overlaps it
// with another group's collective (gloo's, say) in a different order on
// different ranks would wait until the timeout where queued calls do not.
size_t inline_bytes_setting() {
  const char *s = std::getenv("LOOM_TORCH_INLINE_BYTES");
  if (s == nullptr || *s == '\0')
    return 0;
  char *end = nullptr;
  unsigned long long v = std::strtoull(s, &end, 10);
  TORCH_CHECK(end != s && *end == '\0', "loom init: LOOM_TORCH_INLINE_BYTES=", s,
              " is not a byte count (e.g. 65536; 0 turns inline calls off)");
  return static_cast<size_t>(v);
}

// The groups not yet destroyed, for drain_all.
std::mutex live_mutex;
std::set<ProcessGroupLoom *> live_groups;

}  // namespace

void ProcessGroupLoom::drain_all(double seconds) {
  GilRelease nogil;  // completions may need the GIL
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
  std::lock_guard<std::mutex> lock(live_mutex);
  for (ProcessGroupLoom *g : live_groups)
    while (loomStreamQuery(g->stream_) == loomInProgress &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

namespace {
// Runs on the main thread at its next bytecode (Py_AddPendingCall): the
// straggler warning as a Python RuntimeWarning.  -1 when the warning
// filters made it an exception, which Python then raises there.
int issue_straggler_warning(void *arg) {
  std::unique_ptr<std::string> text(static_cast<std::string *>(arg));
  return PyErr_WarnEx(PyExc_RuntimeWarning, text->c_str(), 1);
}

// Loom's straggler callback (LOOM_STRAGGLER_WARN_MS), on Loom's stream
// worker: it must not take the GIL (the main thread may hold it while it
// waits for this very work), so the warning is handed to the main thread.
void on_straggler(loomComm_t /* comm */, int /* late_rank */, const char *text,
                  void * /* arg */) {
  if (!Py_IsInitialized() || _Py_IsFinalizing())
    return;
  auto *copy = new std::string(std::string("loom: ") + text);
  if (Py_AddPendingCall(issue_straggler_warning, copy) != 0)
    delete copy;  // the queue is full: the WARN in Loom's log remains
}
}  // namespace

ProcessGroupLoom::ProcessGroupLoom(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                                   int size, std::chrono::milliseconds timeout)
    : BackendBase(rank, size), timeout_(timeout), inline_bytes_(inline_bytes_setting()) {
  TORCH_CHECK(store, "loom init: no store was given");
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "loom init: rank ", rank,
              " is not in a group of ", size);
  loomUniqueId id = exchange_unique_id(*store, rank, size);
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeout_ms = timeout_ms_of(timeout);
  config.commName = "torch";
  check_loom(loomCommInitRankConfig(&comm_, size, id, rank, &config), "init");
  start();
}

ProcessGroupLoom::ProcessGroupLoom(loomComm_t comm, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : BackendBase(rank, size), comm_(comm), timeout_(timeout),
      inline_bytes_(inline_bytes_setting()) {
  start();
}

void ProcessGroupLoom::start() {
  loomCommSetStragglerCallback(comm_, on_straggler, nullptr);
  loomResult_t res = loomStreamCreate(&stream_);
  if (res != loomSuccess) {
    std::string text = loom_error_text(res);
    loomCommDestroy(comm_);
    throw std::runtime_error("loom init: " + text);
  }
  init();
  std::lock_guard<std::mutex> lock(live_mutex);
  live_groups.insert(this);
}

ProcessGroupLoom::~ProcessGroupLoom() {
  {
    std::lock_guard<std::mutex> lock(live_mutex);
    live_groups.erase(this);
  }
  GilRelease nogil;
  // Queued work first: it completes (or fails, bounded by the timeout).
  loomStreamSynchronize(stream_);
  loomResult_t state = loomSuccess;
  loomCommGetAsyncError(comm_, &state);
  if (state == loomSuccess)
    loomCommDestroy(comm_);
  else
    loomCommAbort(comm_);  // broken: tell the peers and free it at once
  loomStreamDestroy(stream_);
}

c10::intrusive_ptr<ProcessGroupLoom> ProcessGroupLoom::shrink(const std::vector<int64_t> &exclude,
                                                              bool abort) {
  std::vector<int> ranks;
  for (int64_t r : exclude) {
    TORCH_CHECK(r >= 0 && r < size_, "loom shrink: rank ", r, " is not in a group of ", size_);
    ranks.push_back(static_cast<int>(r));
  }
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeout_ms = timeout_ms_of(timeout_);
  loomComm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    check_loom(loomCommShrink(comm_, ranks.data(), static_cast<int>(ranks.size()), &comm, &config,
                              abort ? LOOM_SHRINK_ABORT : LOOM_SHRINK_DEFAULT),
               "shrink");
  }
  if (comm == nullptr)
    return {};  // this rank was excluded
  int rank = 0, size = 0;
  loomCommUserRank(comm, &rank);
  loomCommCount(comm, &size);
  return c10::make_intrusive<ProcessGroupLoom>(comm, rank, size, timeout_);
}

void ProcessGroupLoom::dump(const std::string &path) {
  check_loom(loomCommDump(comm_, path.empty() ? nullptr : path.c_str()), "dump");
}

c10::intrusive_ptr<WorkLoom> ProcessGroupLoom::make_work(c10d::OpType type, const char *name,
                                                         std::vector<at::Tensor> outputs) {
  return c10::make_intrusive<WorkLoom>(rank_, type, name, std::move(outputs), comm_);
}

WorkPtr ProcessGroupLoom::submit_group(const c10::intrusive_ptr<WorkLoom> &work, const char *op,
                                       size_t n,
                                       const std::function<loomResult_t(size_t)> &call) {
  loomGroupStart();
  loomResult_t res = loomSuccess;
  for (size_t i = 0; i < n && res == loomSuccess; i++)
    res = call(i);
  std::string error = res == loomSuccess ? "" : loom_error_text(res);
  loomResult_t end = loomGroupEnd();
  if (error.empty() && end != loomSuccess)
    error = loom_error_text(end);
  submit(work);
  TORCH_CHECK(error.empty(), "loom ", op, ": ", error);
  return work;
}

bool ProcessGroupLoom::run_inline(size_t bytes) {
  return !coalescing_ && bytes <= inline_bytes_ && loomStreamQuery(stream_) == loomSuccess;
}

WorkPtr ProcessGroupLoom::submit(const c10::intrusive_ptr<WorkLoom> &work) {
  if (coalescing_)
    coalesced_.push_back(work);
  else
    work->launch(stream_);
  return work;
}

void ProcessGroupLoom::check_peer(int peer, const char *op) const {
  check_rank(peer, size_, op, "peer");
  TORCH_CHECK(peer != rank_ || coalescing_, "loom ", op, ": peer ", peer, " is this rank; "
              "a send to itself needs its receive in the same batch_isend_irecv");
}

// ---- coalescing -------------------------------------------------------------------

void ProcessGroupLoom::startCoalescing() {
  std::lock_guard<std::mutex> lock(queue_mutex_);
  TORCH_CHECK(!coalescing_, "loom: a coalescing block is already open on this group");
  loomGroupStart();
  coalescing_ = true;
}

namespace {
// Closes the Loom group and queues the completions of its works.  Every
// work completes, also when the group could not be queued.
void finish_block(std::vector<c10::intrusive_ptr<WorkLoom>> &works, loomStream_t stream) {
  loomResult_t res = loomGroupEnd();
  const bool queued = res == loomSuccess;  // else nothing of the group was queued
  std::string error = queued ? "" : "loom batch: " + loom_error_text(res);
  for (auto &w : works) {
    if (!queued) {
      w->abandon(error);
      continue;
    }
    try {
      w->launch(stream);  // on failure: completes w with the error, throws
    } catch (const std::exception &e) {
      if (error.empty())
        error = e.what();
    }
  }
  works.clear();
  if (!error.empty())
    throw std::runtime_error(error);
}
}  // namespace

#if TORCH_VERSION_MAJOR >= 2 && !(TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR == 0)
WorkPtr ProcessGroupLoom::endCoalescing() {
  std::lock_guard<std::mutex> lock(queue_mutex_);
  TORCH_CHECK(coalescing_, "loom: endCoalescing without startCoalescing");
  coalescing_ = false;
  std::vector<at::Tensor> outputs;
  for (auto &w : coalesced_) {
    auto r = w->result();
    outputs.insert(outputs.end(), r.begin(), r.end());
  }
  // Completes with the block: the stream runs in order.
  auto all = make_work(c10d::OpType::UNKNOWN, "coalesced", outputs);
  coalesced_.push_back(all);
  finish_block(coalesced_, stream_);
  return all;
}
#else
void ProcessGroupLoom::endCoalescing(std::vector<WorkPtr> & /* reqs: the same works */) {
  std::lock_guard<std::mutex> lock(queue_mutex_);
  TORCH_CHECK(coalescing_, "loom: endCoalescing without startCoalescing");
  coalescing_ = false;
  finish_block(coalesced_, stream_);
}
#endif

// ---- point to point ------------------------------------------------------------------

WorkPtr ProcessGroupLoom::send(std::vector<at::Tensor> &tensors, int dstRank, int /* tag */) {
  check_count(tensors.size(), 1, "send", "tensor");
  LoomBuffer b = checked_buffer(tensors[0], "send", "tensor");
  std::lock_guard<std::mutex> lock(queue_mutex_);
  check_peer(dstRank, "send");
  auto work = make_work(c10d::OpType::SEND, "send", {});
  work->hold(tensors[0]);
  check_loom(loomSend(b.ptr, b.count, b.dtype, dstRank, comm_, stream_), "send");
  return submit(work);
}

WorkPtr ProcessGroupLoom::recv(std::vector<at::Tensor> &tensors, int srcRank, int /* tag */) {
  check_count(tensors.size(), 1, "recv", "tensor");
  LoomBuffer b = checked_buffer(tensors[0], "recv", "tensor");
  std::lock_guard<std::mutex> lock(queue_mutex_);
  check_peer(srcRank, "recv");
  auto work = make_work(c10d::OpType::RECV, "recv", {tensors[0]});
  check_loom(loomRecv(b.ptr, b.count, b.dtype, srcRank, comm_, stream_), "recv");
  return submit(work);
}

WorkPtr ProcessGroupLoom::recvAnysource(std::vector<at::Tensor> &tensors, int /* tag */) {
  check_count(tensors.size(), 1, "recv", "tensor");
  LoomBuffer b = checked_buffer(tensors[0], "recv", "tensor");
  std::lock_guard<std::mutex> lock(queue_mutex_);
  auto work = make_work(c10d::OpType::RECVANYSOURCE, "recv", {tensors[0]});
  check_loom(loomRecvAny(b.ptr, b.count, b.dtype, work->source_slot(), comm_, stream_), "recv");
  return submit(work);
}

WorkPtr ProcessGroupLoom::barrier(const c10d::BarrierOptions & /* opts */) {
  std::lock_guard<std::mutex> lock(queue_mutex_);
  auto work = make_work(c10d::OpType::BARRIER, "barrier", {});
  if (run_inline(0)) {
    work->complete_now(loomBarrier(comm_, nullptr));
    return work;
  }
  check_loom(loomBarrier(comm_, stream_), "barrier");
  return submit(work);
}

}  // namespace loom_torch
