// common.h - the helpers the CUDA C++ benchmark references share: the runtime error check,
// the device query behind their stderr device line, the medians they report, and the
// wall-clock timing of a repeated operation. Included by compute.cu, first_launch.cu,
// launch.cu, multigpu.cu, pipeline.cu, placement.cu, reference.cu and signals.cu (the GPU
// bundle copies it next to them, so the quoted include finds it without -I).
//
// The CUDA-event timing helpers stay in their files (compute.cu time_median, placement.cu
// gpu_median_ms, reference.cu time_median_ms): they differ in warm-up, stream and
// synchronisation, and each benchmark keeps its own timing method.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

// A failed runtime call prints its error's name, code, place and description on stderr and
// ends the program with status 1. Nothing is printed on success.
#define CUDA_CHECK(call)                                                      \
    do {                                                                      \
        cudaError_t err_ = (call);                                            \
        if (err_ != cudaSuccess) {                                            \
            std::fprintf(stderr, "CUDA error %s (%d) at %s:%d: %s\n",         \
                         cudaGetErrorName(err_), (int)err_, __FILE__,         \
                         __LINE__, cudaGetErrorString(err_));                 \
            std::exit(1);                                                     \
        }                                                                     \
    } while (0)

// A launch returns no status; this catches bad configurations at launch time.
// Faults during execution surface at the next (checked) synchronising call.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

// The current device's properties, for the device line a benchmark writes on stderr.
static inline cudaDeviceProp current_device_prop() {
    int dev = 0;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    return prop;
}

// The median: the middle value, or for an even count the mean of the two middle values
// (in double). Used by pipeline.cu, placement.cu and reference.cu.
template <typename T>
static inline double median(std::vector<T> v) {
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * ((double)v[m - 1] + v[m]);
}

// The upper median: sorted[n / 2], so for an even count the upper of the two middle values.
// launch.cu, multigpu.cu and compute.cu report this one; it is not interchangeable with
// median() above when the repetition count is even.
template <typename T>
static inline double upper_median(std::vector<T> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// One warm-up, then `reps` wall-clock timings (steady_clock) of op, which must not return
// before its work is complete (a GPU op ends with its synchronisation); returns the median
// in milliseconds. Used by pipeline.cu and placement.cu.
template <typename Op>
static inline double wall_median_ms(int reps, Op op) {
    op();
    std::vector<double> ms(reps);
    for (int r = 0; r < reps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        op();
        auto t1 = std::chrono::steady_clock::now();
        ms[r] = std::chrono::duration<double, std::milli>(t1 - t0).count();
    }
    return median(ms);
}
