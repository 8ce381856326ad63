// cuda_d2d.cu — the GPU's own device-to-device cudaMemcpy bandwidth, the
// ceiling bench/device-check.sh prints beside `loom-perf --device cuda`.
// For each size from -b to -e (times 4): -n copies timed with CUDA events
// after -w warm-up copies; prints "bytes  us_per_copy  GB/s" (bytes copied
// per second, as loom-perf's algbw).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CK(call)                                                                    \
  do {                                                                              \
    cudaError_t e_ = (call);                                                        \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "cuda_d2d: %s: %s\n", #call, cudaGetErrorString(e_));    \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

int main(int argc, char **argv) {
  size_t lo = 8, hi = 256u << 20;
  int iters = 20, warm = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "-b")) lo = std::strtoull(argv[i + 1], nullptr, 0);
    else if (!std::strcmp(argv[i], "-e")) hi = std::strtoull(argv[i + 1], nullptr, 0);
    else if (!std::strcmp(argv[i], "-n")) iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-w")) warm = std::atoi(argv[i + 1]);
  }
  void *a = nullptr, *b = nullptr;
  CK(cudaMalloc(&a, hi));
  CK(cudaMalloc(&b, hi));
  CK(cudaMemset(a, 1, hi));
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  std::printf("# cuda_d2d: cudaMemcpy device to device, %d copies per size\n", iters);
  std::printf("# %12s %12s %10s\n", "bytes", "us", "GB/s");
  for (size_t n = lo; n <= hi; n *= 4) {
    for (int w = 0; w < warm; w++)
      CK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(t0));
    for (int k = 0; k < iters; k++)
      CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(t1));
    CK(cudaEventSynchronize(t1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, t0, t1));
    double us = 1000.0 * ms / iters;
    std::printf("  %12zu %12.2f %10.2f\n", n, us, (double)n / us / 1e3);
  }
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 0;
}
