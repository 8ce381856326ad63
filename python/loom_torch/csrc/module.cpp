/*
 * module.cpp — the Python module loom_torch._C: binds ProcessGroupLoom as
 * a subclass of torch's own ProcessGroup (1.x) or Backend (2.x) binding,
 * so that torch.distributed calls its operations directly.
 */
#include <torch/csrc/utils/pybind.h>

#include <pybind11/chrono.h>

#include "ProcessGroupLoom.hpp"

namespace py = pybind11;
using loom_torch::BackendBase;
using loom_torch::ProcessGroupLoom;

PYBIND11_MODULE(_C, m) {
  m.doc() = "Loom's torch.distributed backend (import loom_torch to register \"loom\")";
  // The base class's binding lives in torch.distributed's C module.
  py::module_::import("torch.distributed");

  py::class_<ProcessGroupLoom, BackendBase, c10::intrusive_ptr<ProcessGroupLoom>>(
      m, "ProcessGroupLoom",
      "One Loom communicator and host stream; operations return Work at once.")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupLoom>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>())
      .def("shrink", &ProcessGroupLoom::shrink, py::arg("exclude_ranks"), py::arg("abort") = true,
           "a group of this group's ranks without exclude_ranks, made without the store "
           "(loomCommShrink); None on an excluded rank",
           py::call_guard<py::gil_scoped_release>())
      .def("dump", &ProcessGroupLoom::dump, py::arg("path") = std::string(),
           "the group's flight recorder as JSON to path (empty: into LOOM_TRACE_DUMP_DIR), "
           "for loom-trace (loomCommDump)",
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("timeout", &ProcessGroupLoom::timeout,
                             "the group's timeout, which is the communicator's timeout_ms");

  m.def("_drain_at_exit", &ProcessGroupLoom::drain_all, py::arg("seconds"),
        "waits up to `seconds` for every live group's queued work (registered with atexit)");
  m.def(
      "loom_version",
      [] {
        int version = 0;
        loomGetVersion(&version);
        return version;
      },
      "Loom's LOOM_VERSION_CODE as the loaded libloom reports it");
}
