// reference.cu - hand-written CUDA C++ baseline for `cargo xtask bench`.
//
// The Rust-built kernels (saxpy, block_sum) are timed against these nvcc-built
// equivalents in the same run, on the same GPU, with the same n and repetition
// count, so the reported Rust/nvcc ratios compare code generation, not machines.
// The kernels are deliberately written the plain way (no vectorised loads, no
// warp shuffles) because the Rust kernels are plain too; this is a like-for-like
// reference, not a tuned roofline.
//
// Build (on the GPU machine):  nvcc -O3 -arch=sm_90 -o reference reference.cu
// Run:                         ./reference <n_elements> [repetitions=20] [blocks=1056]
//
// Output: one JSON line per kernel on stdout, e.g.
//   {"impl":"nvcc","kernel":"saxpy","n":268435456,"median_ms":0.9,"gbps":3580.0,"bad":0}
// then the launch overhead ("bench":"launch_wait" and "launch_enqueue", microseconds).
// Diagnostics go to stderr so stdout stays machine-readable.
//
// Note on FMA: nvcc contracts a*x+y into an FMA by default (--fmad=true); the
// Rust side does not. We keep nvcc's default on purpose (this is "what nvcc does
// out of the box"); saxpy is memory-bound so the FMA does not affect timing, and
// the 1e-5 tolerance accepts both rounding behaviours.

#include <cuda_runtime.h>

#include "common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

constexpr int kBlock = 256;

__global__ void saxpy(float a, const float* x, float* y, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// Assumes blockDim.x == kBlock (power of two), which is how it is launched.
__global__ void block_sum(const float* x, float* partial, size_t n) {
    __shared__ float tile[kBlock];
    float acc = 0.0f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        acc += x[i];
    tile[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = tile[0];
}

// splitmix64: deterministic and much faster than mt19937 for filling ~10^8
// elements, which otherwise dominates the run time at large n.
static uint64_t g_rng = 0x243F6A8885A308D3ull;
static float uniform_nonzero() {
    for (;;) {
        uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        // 24 random bits -> exactly representable float in [-1, 1).
        float f = (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
        if (f != 0.0f) return f;
    }
}

// Times each launch on its own (event pair around one launch, then sync) so the
// median is robust to the odd slow launch (clock ramp, first-touch effects).
template <typename Launch>
static double time_median_ms(int reps, Launch launch) {
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<float> ms(reps);
    for (int r = 0; r < reps; ++r) {
        CUDA_CHECK(cudaEventRecord(start));
        launch();
        CUDA_CHECK(cudaEventRecord(stop));
        CUDA_CHECK(cudaEventSynchronize(stop));
        CUDA_CHECK(cudaEventElapsedTime(&ms[r], start, stop));
    }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    return median(ms);
}

static void emit(const char* kernel, size_t n, double ms, double bytes, size_t bad) {
    double gbps = bytes / (ms * 1e-3) / 1e9;
    std::printf("{\"impl\":\"nvcc\",\"kernel\":\"%s\",\"n\":%zu,\"median_ms\":%.6f,"
                "\"gbps\":%.3f,\"bad\":%zu}\n",
                kernel, n, ms, gbps, bad);
    std::fflush(stdout);
}

static void bench_saxpy(size_t n, int reps, const std::vector<float>& hx) {
    const float a = 1.5f;
    std::vector<float> hy0(n), hy(n);
    for (auto& v : hy0) v = uniform_nonzero();

    float *dx, *dy;
    CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(dx, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    // y is both input and output, so it is "poisoned" simply by loading y0.
    CUDA_CHECK(cudaMemcpy(dy, hy0.data(), n * sizeof(float), cudaMemcpyHostToDevice));

    unsigned grid = (unsigned)((n + kBlock - 1) / kBlock);
    auto launch = [&] {
        saxpy<<<grid, kBlock>>>(a, dx, dy, n);
        CUDA_CHECK_LAUNCH();
    };
    launch();  // warm-up: module load, clocks, TLB
    CUDA_CHECK(cudaDeviceSynchronize());
    double ms = time_median_ms(reps, launch);

    // The timed launches accumulated into y; reset it so exactly one checked
    // application of saxpy can be compared with the host.
    CUDA_CHECK(cudaMemcpy(dy, hy0.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(hy.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));

    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        // Double on the host so the reference is independent of FMA contraction.
        double want = (double)a * hx[i] + hy0[i];
        if (!(std::fabs((double)hy[i] - want) <= 1e-5)) ++bad;  // NaN counts as bad
    }
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));
    emit("saxpy", n, ms, 12.0 * (double)n, bad);  // read x, read y, write y
}

static void bench_block_sum(size_t n, int reps, unsigned blocks, const std::vector<float>& hx) {
    float *dx, *dp;
    CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dp, blocks * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(dx, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    // 0xFF bytes are a NaN pattern, so any partial the kernel fails to write
    // poisons the host sum and is caught by the check.
    auto poison = [&] { CUDA_CHECK(cudaMemset(dp, 0xFF, blocks * sizeof(float))); };
    poison();

    auto launch = [&] {
        block_sum<<<blocks, kBlock>>>(dx, dp, n);
        CUDA_CHECK_LAUNCH();
    };
    launch();  // warm-up
    CUDA_CHECK(cudaDeviceSynchronize());
    double ms = time_median_ms(reps, launch);

    // Re-poison so the check proves the checked launch itself wrote every partial.
    poison();
    launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> hp(blocks);
    CUDA_CHECK(cudaMemcpy(hp.data(), dp, blocks * sizeof(float), cudaMemcpyDeviceToHost));

    double got = 0.0, want = 0.0;
    for (float p : hp) got += p;
    for (size_t i = 0; i < n; ++i) want += hx[i];
    // Floor the denominator at 1: a sum of values in [-1,1] can land near zero,
    // where a pure relative error would flag harmless float rounding.
    double rel = std::fabs(got - want) / std::max(std::fabs(want), 1.0);
    size_t bad = (rel < 1e-4) ? 0 : 1;  // NaN fails the comparison -> bad
    if (bad)
        std::fprintf(stderr, "block_sum mismatch: got %.9g want %.9g rel %.3g\n", got, want, rel);
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dp));
    emit("block_sum", n, ms, 4.0 * (double)n, bad);
}

// Launch overhead: saxpy over 256 elements (one block) on a non-blocking stream, as berth's
// launches on a `Gpu` run. "launch_wait": host time of one launch plus the stream wait,
// median and p99 of `rounds`; "launch_enqueue": host time per launch of `rounds` launches
// queued back to back without waiting (then one wait). The result is checked after one more
// launch from fresh inputs.
static void bench_launch(int rounds) {
    const size_t n = 256;
    std::vector<float> hx(n), hy(n);
    for (auto& v : hx) v = uniform_nonzero();
    for (auto& v : hy) v = uniform_nonzero();
    float *dx = nullptr, *dy = nullptr;
    CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(dx, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dy, hy.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    // A copy from pageable memory may return before its DMA lands, and the non-blocking
    // stream does not wait for the legacy stream's work.
    CUDA_CHECK(cudaDeviceSynchronize());
    const float a = 1e-6f;
    using clock = std::chrono::steady_clock;
    for (int i = 0; i < 100; ++i) {
        saxpy<<<1, kBlock, 0, s>>>(a, dx, dy, n);
        CUDA_CHECK_LAUNCH();
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<float> us(rounds);
    for (int r = 0; r < rounds; ++r) {
        auto t0 = clock::now();
        saxpy<<<1, kBlock, 0, s>>>(a, dx, dy, n);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaStreamSynchronize(s));
        us[r] = std::chrono::duration<float, std::micro>(clock::now() - t0).count();
    }
    auto t0 = clock::now();
    for (int r = 0; r < rounds; ++r) {
        saxpy<<<1, kBlock, 0, s>>>(a, dx, dy, n);
    }
    double enqueue_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count() / rounds;
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(s));
    // The check: one launch from fresh inputs.
    CUDA_CHECK(cudaMemcpy(dy, hy.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());  // as above
    saxpy<<<1, kBlock, 0, s>>>(a, dx, dy, n);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<float> got(n);
    CUDA_CHECK(cudaMemcpy(got.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
        if (std::fabs(got[i] - (a * hx[i] + hy[i])) > 1e-5f) ++bad;
    std::vector<float> sorted = us;
    std::sort(sorted.begin(), sorted.end());
    double p99 = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
    std::printf("{\"impl\":\"nvcc\",\"bench\":\"launch_wait\",\"n\":%zu,\"rounds\":%d,"
                "\"median_us\":%.3f,\"p99_us\":%.3f,\"bad\":%zu}\n",
                n, rounds, median(us), p99, bad);
    std::printf("{\"impl\":\"nvcc\",\"bench\":\"launch_enqueue\",\"n\":%zu,\"rounds\":%d,"
                "\"median_us\":%.3f,\"bad\":%zu}\n",
                n, rounds, enqueue_us, bad);
    std::fflush(stdout);
    CUDA_CHECK(cudaStreamDestroy(s));
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));
}

int main(int argc, char** argv) {
    if (argc < 2 || argc > 4) {
        std::fprintf(stderr, "usage: %s <n_elements> [repetitions=20] [blocks=1056]\n", argv[0]);
        return 2;
    }
    char* end = nullptr;
    unsigned long long n_arg = std::strtoull(argv[1], &end, 10);
    if (*end || n_arg == 0) { std::fprintf(stderr, "bad n_elements: %s\n", argv[1]); return 2; }
    long reps = argc > 2 ? std::strtol(argv[2], &end, 10) : 20;
    if (argc > 2 && (*end || reps < 1)) { std::fprintf(stderr, "bad repetitions: %s\n", argv[2]); return 2; }
    // 132 SMs on H200 x 8 resident blocks of 256 threads = full occupancy.
    long blocks = argc > 3 ? std::strtol(argv[3], &end, 10) : 132 * 8;
    if (argc > 3 && (*end || blocks < 1)) { std::fprintf(stderr, "bad blocks: %s\n", argv[3]); return 2; }
    size_t n = (size_t)n_arg;
    if ((n + kBlock - 1) / kBlock > 0x7FFFFFFFull) { std::fprintf(stderr, "n too large for a 1-D grid\n"); return 2; }

    cudaDeviceProp prop = current_device_prop();
    std::fprintf(stderr, "device: %s (%d SMs), n=%zu reps=%ld blocks=%ld\n",
                 prop.name, prop.multiProcessorCount, n, reps, blocks);

    std::vector<float> hx(n);
    for (auto& v : hx) v = uniform_nonzero();

    bench_saxpy(n, (int)reps, hx);
    bench_block_sum(n, (int)reps, (unsigned)blocks, hx);
    bench_launch(2000);
    return 0;
}
