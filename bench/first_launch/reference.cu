// First-launch reference for berth's `first_launch` (bench/first_launch/main.rs): a fresh
// process's first kernel launch in CUDA C++, same machine, same run.
//
// Build: nvcc -O3 -arch=sm_90 -o first_launch first_launch.cu   (SASS for sm_90 embedded)
// Run:   CUDA_CACHE_DISABLE=1 ./first_launch
//
// Times `cudaFree(0)` (the runtime's context creation, the counterpart of `Gpu::new()`), then
// the first `saxpy` launch until `cudaDeviceSynchronize` returns (the runtime loads the
// module here, lazily), then a second launch. The result is checked against the host.
//
// Output: one JSON line, e.g.
//   {"impl":"nvcc","bench":"first_launch","module":"sass","kernel":"saxpy","init_ms":150.0,"ms":1.2,"second_ms":0.02,"bad":0}

#include <cuda_runtime.h>

#include "common.h"

#include <chrono>
#include <cstdio>
#include <vector>

__global__ void saxpy(float a, const float* x, float* y, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

static double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

int main() {
  auto t = std::chrono::steady_clock::now();
  CUDA_CHECK(cudaFree(0));
  double init = ms_since(t);

  const unsigned n = 1u << 16;
  std::vector<float> x(n), y(n, 1.0f);
  for (unsigned i = 0; i < n; i++) x[i] = float(i);
  float *dx, *dy;
  CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));

  t = std::chrono::steady_clock::now();
  saxpy<<<(n + 255) / 256, 256>>>(2.0f, dx, dy, n);
  CUDA_CHECK(cudaDeviceSynchronize());
  double first = ms_since(t);
  t = std::chrono::steady_clock::now();
  saxpy<<<(n + 255) / 256, 256>>>(2.0f, dx, dy, n);
  CUDA_CHECK(cudaDeviceSynchronize());
  double second = ms_since(t);

  CUDA_CHECK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  unsigned bad = 0;
  for (unsigned i = 0; i < n; i++) {
    float want = 2.0f * x[i] + (2.0f * x[i] + 1.0f);
    if (y[i] != want) bad++;
  }
  std::printf(
      "{\"impl\":\"nvcc\",\"bench\":\"first_launch\",\"module\":\"sass\",\"kernel\":\"saxpy\","
      "\"init_ms\":%.3f,\"ms\":%.3f,\"second_ms\":%.3f,\"bad\":%u}\n",
      init, first, second, bad);
  return bad != 0;
}
