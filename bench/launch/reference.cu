// Launch-queue reference for berth's `bench_launch` (bench/launch/main.rs): the same
// chain of 1,000 dependent launches of a 1D Jacobi step, in CUDA C++, same machine, same run.
//
// Build: nvcc -O3 -arch=sm_90 -o launch launch.cu
// Run:   ./launch [n ...] [--reps R]      (default n = 65536 and 4194304, R = 10)
//
// For each n:
//   "launch_chain": jacobi(a, b), jacobi(b, a), ... (1,000 launches) queued on one
//                   non-blocking stream, one cudaStreamSynchronize at the end;
//   "graph_chain":  the same launches captured once into a CUDA graph, instantiated, and
//                   replayed (cudaGraphLaunch + one synchronise).
// Host time from the first launch to the end of the wait (std::chrono), median over R
// repetitions after one warm-up, divided by 1,000. The last result is checked against the
// host on three windows of the array (start, middle, end), as the berth side does.
//
// Output: one JSON line per (bench, n), e.g.
//   {"impl":"nvcc","bench":"launch_chain","n":65536,"launches":1000,"per_launch_us":3.9,"total_ms":3.9,"bad":0}
//
// FMA: nvcc may contract 0.5f*a + 0.25f*(l+r); both products are by powers of two (exact),
// so the contracted and uncontracted results are the same bits as the host's.

#include <cuda_runtime.h>

#include "common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

static const int kLaunches = 1000;
static const int kBlock = 256;

__global__ void jacobi(const float* a, float* b, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        b[i] = (i == 0 || i + 1 == n) ? a[i] : 0.5f * a[i] + 0.25f * (a[i - 1] + a[i + 1]);
    }
}

static void jacobi_host(const std::vector<float>& a, std::vector<float>& b) {
    size_t n = b.size();
    for (size_t i = 0; i < n; ++i) {
        b[i] = (i == 0 || i + 1 == n) ? a[i] : 0.5f * a[i] + 0.25f * (a[i - 1] + a[i + 1]);
    }
}

// Elements of `got` (after `steps` steps from `x`) that differ from the host's, on windows at
// the start, middle and end (each computed alone: exact `steps` elements from a cut edge).
static long windows_bad(const std::vector<float>& x, const std::vector<float>& got, size_t steps) {
    size_t n = x.size();
    size_t w = std::min<size_t>(1024, n);
    long bad = 0;
    size_t centres[3] = {0, n / 2, n - w};
    for (size_t centre : centres) {
        size_t lo = centre > steps ? centre - steps : 0;
        size_t hi = std::min(n, centre + w + steps);
        std::vector<float> p(x.begin() + lo, x.begin() + hi), q(p.size());
        for (size_t k = 0; k < steps; ++k) {
            jacobi_host(p, q);
            std::swap(p, q);
        }
        size_t from = lo == 0 ? 0 : steps;
        size_t to = hi == n ? hi - lo : hi - lo - steps;
        for (size_t i = from; i < to; ++i) {
            if (std::fabs(p[i] - got[lo + i]) > 1e-6f) ++bad;
        }
    }
    return bad;
}

static void report(const char* bench, size_t n, double seconds, long bad) {
    std::printf(
        "{\"impl\":\"nvcc\",\"bench\":\"%s\",\"n\":%zu,\"launches\":%d,\"per_launch_us\":%.3f,"
        "\"total_ms\":%.4f,\"bad\":%ld}\n",
        bench, n, kLaunches, seconds * 1e6 / kLaunches, seconds * 1e3, bad);
    std::fflush(stdout);
}

static void enqueue_chain(float* a, float* b, size_t n, cudaStream_t s) {
    unsigned blocks = (unsigned)((n + kBlock - 1) / kBlock);
    for (int k = 0; k < kLaunches / 2; ++k) {
        jacobi<<<blocks, kBlock, 0, s>>>(a, b, n);
        jacobi<<<blocks, kBlock, 0, s>>>(b, a, n);
    }
}

static void bench(size_t n, int reps) {
    std::mt19937 rng(12345 + (unsigned)n);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(n);
    for (auto& v : x) v = dist(rng);
    const size_t bytes = n * sizeof(float);
    float *a = nullptr, *b = nullptr;
    CUDA_CHECK(cudaMalloc(&a, bytes));
    CUDA_CHECK(cudaMalloc(&b, bytes));
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    using clock = std::chrono::steady_clock;
    std::vector<float> got(n);

    // Queued on one stream, one wait.
    std::vector<double> times;
    for (int rep = 0; rep <= reps; ++rep) {
        CUDA_CHECK(cudaMemcpy(a, x.data(), bytes, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(b, x.data(), bytes, cudaMemcpyHostToDevice));
        // A copy from pageable memory may return before its DMA lands, and the non-blocking
        // stream does not wait for the legacy stream's work: wait here.
        CUDA_CHECK(cudaDeviceSynchronize());
        auto t = clock::now();
        enqueue_chain(a, b, n, s);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaStreamSynchronize(s));
        double secs = std::chrono::duration<double>(clock::now() - t).count();
        if (rep > 0) times.push_back(secs);
    }
    CUDA_CHECK(cudaMemcpy(got.data(), a, bytes, cudaMemcpyDeviceToHost));
    report("launch_chain", n, upper_median(times), windows_bad(x, got, kLaunches));

    // Captured once into a graph, replayed.
    CUDA_CHECK(cudaMemcpy(a, x.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b, x.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());  // as above
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    enqueue_chain(a, b, n, s);
    CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphLaunch(exec, s));  // warm-up (uploads the graph)
    CUDA_CHECK(cudaStreamSynchronize(s));
    times.clear();
    for (int rep = 0; rep < reps; ++rep) {
        auto t = clock::now();
        CUDA_CHECK(cudaGraphLaunch(exec, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        times.push_back(std::chrono::duration<double>(clock::now() - t).count());
    }
    CUDA_CHECK(cudaMemcpy(got.data(), a, bytes, cudaMemcpyDeviceToHost));
    report("graph_chain", n, upper_median(times), windows_bad(x, got, (size_t)kLaunches * (reps + 1)));

    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(s));
    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
}

int main(int argc, char** argv) {
    std::vector<size_t> sizes;
    int reps = 10;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = std::atoi(argv[++i]);
        } else {
            sizes.push_back((size_t)std::strtoull(argv[i], nullptr, 10));
        }
    }
    if (sizes.empty()) sizes = {65536, 4194304};
    CUDA_CHECK(cudaFree(nullptr));
    for (size_t n : sizes) bench(n, reps);
    return 0;
}
