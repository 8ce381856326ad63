/*
 * staging.hpp — one contiguous buffer for a list of tensors: Loom's calls
 * take one buffer where torch's take a list (all_gather, gather, scatter,
 * reduce_scatter, all_to_all).  Lists that already lie back to back in
 * memory are used as they are; others are copied to and from a staging
 * buffer on the stream, in order with the other work queued there.
 */
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <vector>

namespace loom_torch {

// Whether the (contiguous) tensors lie back to back in memory, in order.
inline bool back_to_back(const std::vector<at::Tensor> &ts) {
  if (ts.empty())
    return false;
  const char *base = static_cast<const char *>(ts[0].data_ptr());
  size_t offset = 0;
  for (const at::Tensor &t : ts) {
    if (base == nullptr || static_cast<const char *>(t.data_ptr()) != base + offset)
      return false;
    offset += t.nbytes();
  }
  return true;
}

// A new 1-D tensor of `numel` elements of `like`'s dtype, on the CPU.
inline at::Tensor staging_buffer(const at::Tensor &like, int64_t numel) {
  return at::empty({numel}, like.options());
}

// Total element count of a list.
inline int64_t total_numel(const std::vector<at::Tensor> &ts) {
  int64_t n = 0;
  for (const at::Tensor &t : ts)
    n += t.numel();
  return n;
}

// A copy of `bytes` bytes; done on the stream's worker, in stream order.
struct ByteCopy {
  void *dst;
  const void *src;
  size_t bytes;
};

// The copies that gather the list's tensors, in order, into `flat`.
inline std::vector<ByteCopy> pack_copies(const std::vector<at::Tensor> &ts, at::Tensor &flat) {
  std::vector<ByteCopy> copies;
  char *dst = static_cast<char *>(flat.data_ptr());
  for (const at::Tensor &t : ts) {
    if (t.nbytes() > 0)
      copies.push_back(ByteCopy{dst, t.data_ptr(), t.nbytes()});
    dst += t.nbytes();
  }
  return copies;
}

// The copies that spread `flat` over the list's tensors, in order.
inline std::vector<ByteCopy> unpack_copies(at::Tensor &flat, const std::vector<at::Tensor> &ts) {
  std::vector<ByteCopy> copies;
  const char *src = static_cast<const char *>(flat.data_ptr());
  for (const at::Tensor &t : ts) {
    if (t.nbytes() > 0)
      copies.push_back(ByteCopy{t.data_ptr(), src, t.nbytes()});
    src += t.nbytes();
  }
  return copies;
}

}  // namespace loom_torch
