/*
 * kernels.cu — the CUDA backend's element-wise kernels (kernels.h):
 * reduce (dst = a op b), premul (dst = src * scalar) and scale_avg
 * (buf /= nranks), for every loomDataType_t.
 *
 * They must give the bits device/reduce.c gives on the host, so the rules
 * are restated here, not approximated:
 *  - Integer sum and prod wrap around: they run on the unsigned type of
 *    the same width (signed overflow would be undefined; the bits of a
 *    wrap-around result do not depend on signedness).  max/min compare in
 *    the real type, signed or unsigned.
 *  - Floating max/min propagate NaN: x when x is NaN or the larger
 *    (smaller), else y — the host's expression, not fmaxf/fminf.
 *  - float16 and bfloat16 widen to float32, combine, and round back to
 *    nearest even after every step.  The conversions are device/half.h's
 *    own integer code, compiled __host__ __device__ (no cuda_fp16/cuda_bf16
 *    intrinsics, whose NaN payloads need not match F16C's).
 *  - scale_avg: integers divide in C (truncating toward zero), float32 by
 *    (float)n, float64 by (double)n, float16/bfloat16 in float32.
 * nvcc's defaults keep float division and arithmetic IEEE-exact (-prec-div
 * true, no flush to zero); this file must not be built with
 * --use_fast_math.  No expression here is a multiply-add, so FMA
 * contraction cannot change a result either.
 *
 * One element per thread per step in a grid-stride loop: simple, and
 * every index is read and written by one thread, so dst may be a and/or b.
 */
#include "kernels.h"
#include "device/half.h" /* the host's conversions, compiled for the device too */

#include <stdint.h>
#include <string.h>

#define LOOM_HD __host__ __device__ __forceinline__

namespace {

/* ---- element types ---------------------------------------------------------- */

/* The 16-bit floats, kept as their bits; distinct types pick the conversion. */
struct f16 {
  uint16_t bits;
};
struct bf16 {
  uint16_t bits;
};

/* How an element is computed on: widen to `calc`, combine, narrow back. */
template <class T> struct Arith {
  typedef T calc;
  static LOOM_HD T widen(T x) { return x; }
  static LOOM_HD T narrow(T x) { return x; }
};
template <> struct Arith<f16> {
  typedef float calc;
  static LOOM_HD float widen(f16 x) { return loom_half_to_float(x.bits); }
  static LOOM_HD f16 narrow(float f) {
    f16 h = {loom_float_to_half(f)};
    return h;
  }
};
template <> struct Arith<bf16> {
  typedef float calc;
  static LOOM_HD float widen(bf16 x) { return loom_bf16_to_float(x.bits); }
  static LOOM_HD bf16 narrow(float f) {
    bf16 b = {loom_float_to_bf16(f)};
    return b;
  }
};

/* ---- the operations --------------------------------------------------------- */

LOOM_HD bool is_nan(float x) { return x != x; }
LOOM_HD bool is_nan(double x) { return x != x; }
template <class T> LOOM_HD bool is_nan(T) { return false; } /* integers */

/* Sum and Prod only ever see unsigned integers or floats (see Storage). */
struct SumOp {
  template <class T> static LOOM_HD T apply(T x, T y) { return (T)(x + y); }
};
struct ProdOp {
  template <class T> static LOOM_HD T apply(T x, T y) { return (T)(x * y); }
};
struct MaxOp {
  template <class T> static LOOM_HD T apply(T x, T y) { return (x > y || is_nan(x)) ? x : y; }
};
struct MinOp {
  template <class T> static LOOM_HD T apply(T x, T y) { return (x < y || is_nan(x)) ? x : y; }
};

template <class Op, class T> LOOM_HD T combine(T x, T y) {
  typedef Arith<T> A;
  return A::narrow(Op::template apply<typename A::calc>(A::widen(x), A::widen(y)));
}

/* x / n by loom_scale_avg's rules (n >= 2). */
LOOM_HD int8_t divide(int8_t x, int n) { return (int8_t)(x / n); }
LOOM_HD uint8_t divide(uint8_t x, int n) { return (uint8_t)(x / n); }
LOOM_HD int32_t divide(int32_t x, int n) { return x / n; }
LOOM_HD uint32_t divide(uint32_t x, int n) { return x / (uint32_t)n; }
LOOM_HD int64_t divide(int64_t x, int n) { return x / (int64_t)n; }
LOOM_HD uint64_t divide(uint64_t x, int n) { return x / (uint64_t)n; }
LOOM_HD float divide(float x, int n) { return x / (float)n; }
LOOM_HD double divide(double x, int n) { return x / (double)n; }

template <class T> LOOM_HD T scale_one(T x, int n) {
  return Arith<T>::narrow(divide(Arith<T>::widen(x), n));
}

/* ---- kernels ---------------------------------------------------------------- */

__device__ __forceinline__ size_t first_index() {
  return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ size_t grid_stride() { return (size_t)gridDim.x * blockDim.x; }

template <class Op, class T>
__global__ void reduce_kernel(T *dst, const T *a, const T *b, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride())
    dst[i] = combine<Op>(a[i], b[i]);
}

template <class T> __global__ void premul_kernel(T *dst, const T *src, T scalar, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride())
    dst[i] = combine<ProdOp>(src[i], scalar);
}

template <class T> __global__ void scale_avg_kernel(T *buf, int nranks, size_t count) {
  for (size_t i = first_index(); i < count; i += grid_stride())
    buf[i] = scale_one(buf[i], nranks);
}

/* ---- launch ----------------------------------------------------------------- */

const unsigned kThreadsPerBlock = 256;
/* Enough blocks to fill an H200 several times over; larger buffers loop. */
const size_t kMaxBlocks = 8192;

static unsigned blocks_for(size_t count) {
  size_t blocks = (count + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return (unsigned)(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

/* A misaligned element would fault the kernel and poison the context;
 * refused before launch instead. */
template <class T> bool aligned(const void *p) { return (uintptr_t)p % sizeof(T) == 0; }

/* The type an element of T is stored as for an op: signed integers as
 * their unsigned type when the op wraps around (sum, prod). */
template <class T, bool Wrap> struct Storage {
  typedef T type;
};
template <> struct Storage<int8_t, true> {
  typedef uint8_t type;
};
template <> struct Storage<int32_t, true> {
  typedef uint32_t type;
};
template <> struct Storage<int64_t, true> {
  typedef uint64_t type;
};

template <class T> struct Same {
  typedef T type;
};

/* Queues kernel k on stream with these arguments (converted to k's
 * parameter types) and returns this launch's own error: cudaGetLastError
 * after a <<<>>> launch would also return an older error still in the
 * thread's slot (a failed cudaMalloc, say), reporting a queued kernel as
 * failed. */
template <class... P>
cudaError_t launch(void (*k)(P...), unsigned blocks, unsigned threads, cudaStream_t stream,
                   typename Same<P>::type... args) {
  void *argv[] = {&args..., nullptr};
  return cudaLaunchKernel(reinterpret_cast<const void *>(k), dim3(blocks), dim3(threads), argv,
                          0, stream);
}

/* L::run<T>(args) for the element type of dt. */
template <class L, bool Wrap, class Args>
cudaError_t with_type(loomDataType_t dt, const Args &args) {
  switch (dt) {
  case loomInt8:
    return L::template run<typename Storage<int8_t, Wrap>::type>(args);
  case loomUint8:
    return L::template run<uint8_t>(args);
  case loomInt32:
    return L::template run<typename Storage<int32_t, Wrap>::type>(args);
  case loomUint32:
    return L::template run<uint32_t>(args);
  case loomInt64:
    return L::template run<typename Storage<int64_t, Wrap>::type>(args);
  case loomUint64:
    return L::template run<uint64_t>(args);
  case loomFloat16:
    return L::template run<f16>(args);
  case loomFloat32:
    return L::template run<float>(args);
  case loomFloat64:
    return L::template run<double>(args);
  case loomBfloat16:
    return L::template run<bf16>(args);
  default:
    return cudaErrorInvalidValue;
  }
}

struct ReduceArgs {
  void *dst;
  const void *a, *b;
  size_t count;
  cudaStream_t stream;
};

template <class Op> struct ReduceLaunch {
  template <class T> static cudaError_t run(const ReduceArgs &r) {
    if (!aligned<T>(r.dst) || !aligned<T>(r.a) || !aligned<T>(r.b))
      return cudaErrorMisalignedAddress;
    return launch(reduce_kernel<Op, T>, blocks_for(r.count), kThreadsPerBlock, r.stream,
                  (T *)r.dst, (const T *)r.a, (const T *)r.b, r.count);
  }
};

struct PremulArgs {
  void *dst;
  const void *src, *scalar;
  size_t count;
  cudaStream_t stream;
};

struct PremulLaunch {
  template <class T> static cudaError_t run(const PremulArgs &p) {
    if (!aligned<T>(p.dst) || !aligned<T>(p.src))
      return cudaErrorMisalignedAddress;
    T scalar;
    memcpy(&scalar, p.scalar, sizeof scalar); /* host bytes, passed by value */
    return launch(premul_kernel<T>, blocks_for(p.count), kThreadsPerBlock, p.stream, (T *)p.dst,
                  (const T *)p.src, scalar, p.count);
  }
};

struct ScaleArgs {
  void *buf;
  int nranks;
  size_t count;
  cudaStream_t stream;
};

struct ScaleLaunch {
  template <class T> static cudaError_t run(const ScaleArgs &s) {
    if (!aligned<T>(s.buf))
      return cudaErrorMisalignedAddress;
    return launch(scale_avg_kernel<T>, blocks_for(s.count), kThreadsPerBlock, s.stream,
                  (T *)s.buf, s.nranks, s.count);
  }
};

} // namespace

/* ---- the C entry points (kernels.h) ----------------------------------------- */

extern "C" cudaError_t loom_cuda_reduce(void *dst, const void *a, const void *b, size_t count,
                                        loomDataType_t dt, loomRedOp_t op,
                                        cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  ReduceArgs r = {dst, a, b, count, stream};
  switch (op) {
  case loomSum:
  case loomAvg: /* summed here; divided once at the end (scale_avg) */
    return with_type<ReduceLaunch<SumOp>, true>(dt, r);
  case loomProd:
    return with_type<ReduceLaunch<ProdOp>, true>(dt, r);
  case loomMax:
    return with_type<ReduceLaunch<MaxOp>, false>(dt, r);
  case loomMin:
    return with_type<ReduceLaunch<MinOp>, false>(dt, r);
  default:
    return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t loom_cuda_premul(void *dst, const void *src, size_t count,
                                        loomDataType_t dt, const void *scalar,
                                        cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  PremulArgs p = {dst, src, scalar, count, stream};
  return with_type<PremulLaunch, true>(dt, p);
}

extern "C" cudaError_t loom_cuda_scale_avg(void *buf, size_t count, loomDataType_t dt,
                                           int nranks, cudaStream_t stream) {
  if (count == 0 || nranks <= 1)
    return cudaSuccess;
  ScaleArgs s = {buf, nranks, count, stream};
  return with_type<ScaleLaunch, false>(dt, s);
}

/* One thread polls the host word until (int32_t)(*flag - value) >= 0:
 * the stream's later work waits for the host, as cuStreamWaitValue32
 * would make it (cuda_wait.c uses this where that call is refused). */
__global__ void wait_value_kernel(const volatile unsigned *flag, unsigned value) {
  while (static_cast<int>(*flag - value) < 0)
    __nanosleep(2000);
}

extern "C" cudaError_t loom_cuda_wait_kernel(const uint32_t *flag, uint32_t value,
                                            cudaStream_t stream) {
  return launch(wait_value_kernel, 1, 1, stream,
                reinterpret_cast<const volatile unsigned *>(flag), value);
}
