/*
 * tensor_args.cpp — torch dtypes and reduce ops in Loom's terms, the checks
 * on every tensor, and Loom errors as exceptions.
 */
#include "tensor_args.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>

namespace loom_torch {

namespace {

const char kCarried[] =
    "Loom carries uint8, int8, int32, int64, float16, bfloat16, float32 and float64; "
    "bool travels as uint8 and complex64/complex128 as pairs of float32/float64";

// torch's own spelling of a dtype, for messages.
const char *dtype_name(at::ScalarType st) {
  switch (st) {
  case at::kByte: return "torch.uint8";
  case at::kChar: return "torch.int8";
  case at::kShort: return "torch.int16";
  case at::kInt: return "torch.int32";
  case at::kLong: return "torch.int64";
  case at::kHalf: return "torch.float16";
  case at::kBFloat16: return "torch.bfloat16";
  case at::kFloat: return "torch.float32";
  case at::kDouble: return "torch.float64";
  case at::kBool: return "torch.bool";
  case at::kComplexHalf: return "torch.complex32";
  case at::kComplexFloat: return "torch.complex64";
  case at::kComplexDouble: return "torch.complex128";
  default: return c10::toString(st);
  }
}

// Loom's type for a torch dtype and how many Loom elements one torch
// element is; false when Loom cannot carry it.
bool loom_type_of(at::ScalarType st, loomDataType_t *dt, size_t *per_element) {
  *per_element = 1;
  switch (st) {
  case at::kByte: *dt = loomUint8; return true;
  case at::kBool: *dt = loomUint8; return true;
  case at::kChar: *dt = loomInt8; return true;
  case at::kInt: *dt = loomInt32; return true;
  case at::kLong: *dt = loomInt64; return true;
  case at::kHalf: *dt = loomFloat16; return true;
  case at::kBFloat16: *dt = loomBfloat16; return true;
  case at::kFloat: *dt = loomFloat32; return true;
  case at::kDouble: *dt = loomFloat64; return true;
  case at::kComplexFloat: *dt = loomFloat32; *per_element = 2; return true;
  case at::kComplexDouble: *dt = loomFloat64; *per_element = 2; return true;
  default: return false;
  }
}

const char *reduce_op_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
  case c10d::ReduceOp::SUM: return "SUM";
  case c10d::ReduceOp::AVG: return "AVG";
  case c10d::ReduceOp::PRODUCT: return "PRODUCT";
  case c10d::ReduceOp::MIN: return "MIN";
  case c10d::ReduceOp::MAX: return "MAX";
  case c10d::ReduceOp::BAND: return "BAND";
  case c10d::ReduceOp::BOR: return "BOR";
  case c10d::ReduceOp::BXOR: return "BXOR";
  case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
  default: return "UNUSED";
  }
}

template <typename T> void store_scalar(unsigned char out[8], T value) {
  static_assert(sizeof(T) <= 8, "a scalar has at most 8 bytes");
  std::memcpy(out, &value, sizeof value);
}

// The PREMUL_SUM factor as one element of `dt`, in `out` (8 bytes).
void premul_scalar(const c10d::ReduceOp &op, loomDataType_t dt, unsigned char out[8]) {
  TORCH_CHECK(op.supplement_.defined(), "loom: PREMUL_SUM without a factor");
  // torch documents the supplement of PREMUL_SUM to be this type.
  auto *sup = static_cast<c10d::NCCLPreMulSumSupplement *>(op.supplement_.get());
  double f = sup->double_factor;
  if (!sup->tensor_factors.empty())
    f = sup->tensor_factors[0].to(at::kCPU).item<double>();
  std::memset(out, 0, 8);
  switch (dt) {
  case loomFloat32: store_scalar(out, static_cast<float>(f)); break;
  case loomFloat64: store_scalar(out, f); break;
  case loomFloat16: store_scalar(out, c10::Half(static_cast<float>(f)).x); break;
  case loomBfloat16: store_scalar(out, c10::BFloat16(static_cast<float>(f)).x); break;
  case loomInt8: store_scalar(out, static_cast<int8_t>(f)); break;
  case loomUint8: store_scalar(out, static_cast<uint8_t>(f)); break;
  case loomInt32: store_scalar(out, static_cast<int32_t>(f)); break;
  default: store_scalar(out, static_cast<int64_t>(f)); break;
  }
}

}  // namespace

size_t LoomBuffer::bytes() const {
  static const size_t sizes[loomNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  return count * sizes[dtype];
}

LoomBuffer checked_buffer(const at::Tensor &t, const char *op, const std::string &what) {
  TORCH_CHECK(t.defined(), "loom ", op, ": ", what, " is an undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "loom ", op, ": ", what, " is on device ", t.device().str(),
              "; the loom backend moves CPU tensors only (copy it with .cpu(), or use a "
              "device backend such as nccl for device tensors)");
  TORCH_CHECK(t.layout() == at::kStrided, "loom ", op, ": ", what,
              " is not a dense tensor (layout ", t.layout(), "); sparse tensors are not supported");
  TORCH_CHECK(t.is_contiguous(), "loom ", op, ": ", what,
              " is not contiguous; pass a contiguous tensor (e.g. t.contiguous(), and copy "
              "the result back)");
  loomDataType_t dt;
  size_t per_element;
  TORCH_CHECK(loom_type_of(t.scalar_type(), &dt, &per_element), "loom ", op, ": ", what,
              " has dtype ", dtype_name(t.scalar_type()), ", which the loom backend does not "
              "support (", kCarried, ")");
  return LoomBuffer{t.data_ptr(), static_cast<size_t>(t.numel()) * per_element, dt};
}

void check_same_shape(const std::vector<at::Tensor> &list, const at::Tensor &like,
                      const char *op, const char *list_name) {
  for (size_t i = 0; i < list.size(); i++) {
    TORCH_CHECK(list[i].scalar_type() == like.scalar_type(), "loom ", op, ": ", list_name, "[",
                i, "] has dtype ", dtype_name(list[i].scalar_type()), " but the tensor it pairs "
                "with has ", dtype_name(like.scalar_type()));
    TORCH_CHECK(list[i].numel() == like.numel(), "loom ", op, ": ", list_name, "[", i, "] has ",
                list[i].numel(), " elements but the tensor it pairs with has ", like.numel());
  }
}

void check_count(size_t got, size_t n, const char *op, const char *what) {
  TORCH_CHECK(got == n, "loom ", op, ": expected ", n, " ", what, ", got ", got);
}

void check_whole_and_part(const at::Tensor &whole, const char *whole_name,
                          const at::Tensor &part, const char *part_name, int size,
                          const char *op) {
  TORCH_CHECK(whole.scalar_type() == part.scalar_type(), "loom ", op,
              ": input and output must have one dtype");
  TORCH_CHECK(whole.numel() == part.numel() * size, "loom ", op, ": ", whole_name, " has ",
              whole.numel(), " elements; it must have group size (", size, ") x ", part_name,
              "'s ", part.numel());
}

void check_rank(int64_t rank, int size, const char *op, const char *what) {
  TORCH_CHECK(rank >= 0 && rank < size, "loom ", op, ": ", what, " ", rank,
              " is not a rank of this group (0..", size - 1, ")");
}

LoomReduction::LoomReduction(const c10d::ReduceOp &op, const at::Tensor &t, loomComm_t comm,
                             const char *opname)
    : op_(loomSum), comm_(comm) {
  const c10d::ReduceOp::RedOpType kind = op.op_;
  const bool is_bool = t.scalar_type() == at::kBool;
  const bool is_complex = t.is_complex();
  switch (kind) {
  case c10d::ReduceOp::SUM: op_ = loomSum; break;
  case c10d::ReduceOp::AVG: op_ = loomAvg; break;
  case c10d::ReduceOp::PRODUCT: op_ = loomProd; break;
  case c10d::ReduceOp::MIN: op_ = loomMin; break;
  case c10d::ReduceOp::MAX: op_ = loomMax; break;
  case c10d::ReduceOp::PREMUL_SUM: break;
  default:
    TORCH_CHECK(false, "loom ", opname, ": ReduceOp.", reduce_op_name(kind),
                " is not supported (loom reduces with SUM, AVG, PRODUCT, MIN, MAX and "
                "PREMUL_SUM)");
  }
  TORCH_CHECK(!is_bool || kind == c10d::ReduceOp::MIN || kind == c10d::ReduceOp::MAX ||
                  kind == c10d::ReduceOp::PRODUCT,
              "loom ", opname, ": ReduceOp.", reduce_op_name(kind), " on torch.bool tensors is "
              "not supported (MIN, MAX and PRODUCT are: logical and/or)");
  TORCH_CHECK(!is_complex || kind == c10d::ReduceOp::SUM || kind == c10d::ReduceOp::AVG ||
                  kind == c10d::ReduceOp::PREMUL_SUM,
              "loom ", opname, ": ReduceOp.", reduce_op_name(kind), " on complex tensors is not "
              "supported (SUM, AVG and PREMUL_SUM with a real factor are)");
  if (kind == c10d::ReduceOp::PREMUL_SUM) {
    loomDataType_t dt;
    size_t per_element;
    TORCH_CHECK(loom_type_of(t.scalar_type(), &dt, &per_element), "loom ", opname,
                ": PREMUL_SUM on dtype ", dtype_name(t.scalar_type()), " is not supported");
    unsigned char scalar[8];
    premul_scalar(op, dt, scalar);
    check_loom(loomRedOpCreatePreMulSum(&op_, scalar, dt, loomScalarHostImmediate, comm),
               opname);
    custom_ = true;
  }
}

LoomReduction::~LoomReduction() {
  if (custom_)
    loomRedOpDestroy(op_, comm_);
}

std::string loom_error_text(loomResult_t res) {
  const char *text = loomGetLastError(nullptr);
  if (text != nullptr && *text != '\0')
    return text;
  return loomGetErrorString(res);
}

void check_loom(loomResult_t res, const char *op) {
  if (res != loomSuccess)
    throw std::runtime_error(std::string("loom ") + op + ": " + loom_error_text(res));
}

}  // namespace loom_torch
