// pipeline.cu - nvcc/CUDA-runtime baseline for berth's chunked-pipeline benchmarks.
//
// Workload: n = 2^30 floats (4 GiB) of input x in host memory, 4 GiB of output
// y in host memory, an elementwise kernel on the GPU. Measures the naive serial
// program (copy all in, run, copy all out) against a hand-written multi-stream
// chunked pipeline that overlaps H2D copies, kernels and D2H copies. The Rust
// benchmark measures the same workloads through berth in the same run on the
// same GPU; the JSON lines are matched on "bench" (+ "streams"/"chunk_bytes")
// and compared as ratios, so the ratios show berth's overhead, not the machine's.
//
// Build (on the GPU machine):  nvcc -O3 -arch=sm_90 -o pipeline pipeline.cu
//                              (-DHEAVY_K=<k> changes the heavy kernel's step count)
// Run:                         ./pipeline [serial|pageable|streams|heavy|ceiling|all] [reps=3]
//
// Every measurement: y poisoned (0xFF bytes = NaN), one warm-up, then `reps`
// repetitions, each timed with std::chrono::steady_clock around the whole
// enqueue + synchronize (first copy issued to last copy done); the MEDIAN is
// reported. gbps_in = 4 GiB of input / seconds / 1e9. `pageable` uses
// min(reps, 2) (a pageable 4 GiB round trip is slow). Output: one JSON line per
// measurement on stdout; diagnostics (device name, summaries) on stderr.

#include <cuda_runtime.h>

#include "common.h"
#include "stream_input.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// Dependent steps per element in the heavy kernel. Each step is an fp32 mul and
// add, each rounded (__fmul_rn/__fadd_rn are never fused into an FMA): that is
// what the Rust kernel computes (Rust does not contract), so both sides run the
// same instructions, and the result equals the host's float mul+add exactly.
// (Letting nvcc fuse would halve its work, and since the recurrence drifts
// towards its fixed point 1.0 the fused/unfused difference grows ~linearly in K,
// past 1e-5.) Sizing: 2^30 elements x 2 instr at the H200's ~33e12 fp32 instr/s
// (132 SMs x 128 lanes x ~1.98 GHz, full occupancy hides latency) is ~64 us per
// step, so K = 1280 puts the kernel near a 4 GiB H2D copy (~80 ms at ~54 GB/s);
// K = 256 would be ~16 ms. heavy_kernel_only reports the real kernel time.
#ifndef HEAVY_K
#define HEAVY_K 1280
#endif

constexpr int kBlock = 256;
constexpr float kA = 1.5f;
constexpr size_t MiB = size_t(1) << 20;
constexpr size_t kN = size_t(1) << 30;             // floats
constexpr size_t kBytes = kN * sizeof(float);      // 4 GiB
constexpr int kMaxStreams = 4;
constexpr size_t kMaxChunk = 256 * MiB;            // bytes of x per chunk
constexpr int kStreamCounts[] = {2, 3, 4};
constexpr size_t kChunkMiB[] = {4, 8, 16, 32, 64, 128, 256};
constexpr int kPageableRepCap = 2;

// ---------------------------------------------------------------- kernels

__global__ void affine(const float* x, float* y, size_t n, float a) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + 1.0f;  // nvcc contracts this to an FMA by default
}

__global__ void heavy(const float* x, float* y, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        for (int k = 0; k < HEAVY_K; ++k) v = __fadd_rn(__fmul_rn(v, 0.9999f), 0.0001f);
        y[i] = v;
    }
}

// y = a*x + 1 on 16-byte vectors, grid-stride: the zero-copy ceiling's kernel, reading x
// from and writing y to mapped host memory directly (no copy engine involved).
__global__ void affine4(const float4* x, float4* y, size_t n4, float a) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        y[i] = make_float4(a * v.x + 1.0f, a * v.y + 1.0f, a * v.z + 1.0f, a * v.w + 1.0f);
    }
}

enum class Kern { Affine, Heavy };

// Grid covering n elements, 256 threads per block (n <= 2^30 -> grid <= 2^22).
static void launch(Kern k, const float* x, float* y, size_t n, cudaStream_t s) {
    unsigned grid = (unsigned)((n + kBlock - 1) / kBlock);
    if (k == Kern::Affine) affine<<<grid, kBlock, 0, s>>>(x, y, n, kA);
    else heavy<<<grid, kBlock, 0, s>>>(x, y, n);
    CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------- host helpers

static void fill_x(float* x, size_t n) {
    for (size_t i = 0; i < n; ++i) x[i] = x_at(i);
}

// Host formulas in plain float: mul then add, each rounded. The baseline x86-64
// target has no FMA, so g++ cannot fuse them; do not add -march=native.
static float host_affine(float x) { return kA * x + 1.0f; }
static float host_heavy(float x) {
    float v = x;
    for (int k = 0; k < HEAVY_K; ++k) v = v * 0.9999f + 0.0001f;
    return v;
}

// The check is SAMPLED to keep it fast on 4 GiB: every 4097th element (4097 =
// 2^12 + 1, so samples land at shifting offsets within every chunk) plus the
// last 1000 elements (the tail, where a partial last chunk would go wrong).
struct Samples {
    std::vector<size_t> idx;
    std::vector<float> want_affine, want_heavy;
};
static Samples make_samples(size_t n, bool need_heavy) {
    Samples s;
    size_t tail = n > 1000 ? n - 1000 : 0;
    for (size_t i = 0; i < tail; i += 4097) s.idx.push_back(i);
    for (size_t i = tail; i < n; ++i) s.idx.push_back(i);
    for (size_t i : s.idx) {
        s.want_affine.push_back(host_affine(x_at(i)));
        if (need_heavy) s.want_heavy.push_back(host_heavy(x_at(i)));
    }
    return s;
}
// affine may be FMA-contracted on the GPU; the tolerance accepts either
// rounding. heavy is unfused on both sides, so it should match exactly; its
// 1e-5 relative tolerance (plus a 1e-6 floor for results near 0) is slack.
// NaN (poison left unwritten) fails the comparison and counts as bad.
static size_t count_bad(const float* y, const Samples& s, Kern k) {
    const std::vector<float>& want = k == Kern::Affine ? s.want_affine : s.want_heavy;
    const double rel = k == Kern::Affine ? 1e-6 : 1e-5, abs_floor = 1e-6;
    size_t bad = 0;
    for (size_t j = 0; j < s.idx.size(); ++j) {
        double e = want[j], g = y[s.idx[j]];
        if (!(std::fabs(g - e) <= rel * std::fabs(e) + abs_floor)) ++bad;
    }
    return bad;
}

static double gbps_in(double ms) { return (double)kBytes / (ms * 1e-3) / 1e9; }

// `extra` is a preformatted run of fields, each ending in a comma, or "".
static void emit(const char* bench, const char* extra, double ms, int reps, size_t bad) {
    std::printf("{\"impl\":\"nvcc\",\"bench\":\"%s\",\"bytes_in\":%zu,%s\"median_ms\":%.6f,"
                "\"gbps_in\":%.3f,\"reps\":%d,\"bad\":%zu}\n",
                bench, kBytes, extra, ms, gbps_in(ms), reps, bad);
    std::fflush(stdout);
}

static void poison(float* p, size_t bytes) { std::memset(p, 0xFF, bytes); }

// ---------------------------------------------------------------- building blocks

// Naive: whole-buffer H2D, one kernel over n, whole-buffer D2H, on one stream.
static double time_serial(Kern k, const float* hx, float* hy, cudaStream_t s, int reps) {
    float *dx, *dy;
    CUDA_CHECK(cudaMalloc(&dx, kBytes));
    CUDA_CHECK(cudaMalloc(&dy, kBytes));
    poison(hy, kBytes);
    double ms = wall_median_ms(reps, [&] {
        CUDA_CHECK(cudaMemcpyAsync(dx, hx, kBytes, cudaMemcpyHostToDevice, s));
        launch(k, dx, dy, kN, s);
        CUDA_CHECK(cudaMemcpyAsync(hy, dy, kBytes, cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
    });
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));
    return ms;
}

// Per-stream device staging pair. Allocated once at the largest chunk; a run
// with chunk C uses the first C bytes of each (footprint in use: 2*S*C).
struct Staging {
    cudaStream_t st[kMaxStreams];
    float* dx[kMaxStreams];
    float* dy[kMaxStreams];
};
static Staging make_staging() {
    Staging g;
    for (int i = 0; i < kMaxStreams; ++i) {
        // Non-blocking: no implicit ordering with the legacy default stream.
        CUDA_CHECK(cudaStreamCreateWithFlags(&g.st[i], cudaStreamNonBlocking));
        CUDA_CHECK(cudaMalloc(&g.dx[i], kMaxChunk));
        CUDA_CHECK(cudaMalloc(&g.dy[i], kMaxChunk));
    }
    return g;
}
static void free_staging(Staging& g) {
    for (int i = 0; i < kMaxStreams; ++i) {
        CUDA_CHECK(cudaFree(g.dx[i]));
        CUDA_CHECK(cudaFree(g.dy[i]));
        CUDA_CHECK(cudaStreamDestroy(g.st[i]));
    }
}

// The hand-written pipeline: chunk c goes to stream c % S, where it is H2D'd
// into that stream's staging x, processed, and D2H'd from its staging y. Stream
// order keeps chunk c + S from overwriting a staging buffer chunk c still uses.
static double time_pipeline(Kern k, const float* hx, float* hy, const Staging& g, int S,
                            size_t chunk_bytes, int reps) {
    const size_t cf = chunk_bytes / sizeof(float);
    const size_t nchunks = (kN + cf - 1) / cf;
    poison(hy, kBytes);
    return wall_median_ms(reps, [&] {
        for (size_t c = 0; c < nchunks; ++c) {
            const int si = (int)(c % (size_t)S);
            const size_t off = c * cf, len = std::min(cf, kN - off);  // last may be partial
            cudaStream_t s = g.st[si];
            CUDA_CHECK(cudaMemcpyAsync(g.dx[si], hx + off, len * sizeof(float),
                                       cudaMemcpyHostToDevice, s));
            launch(k, g.dx[si], g.dy[si], len, s);
            CUDA_CHECK(cudaMemcpyAsync(hy + off, g.dy[si], len * sizeof(float),
                                       cudaMemcpyDeviceToHost, s));
        }
        for (int i = 0; i < S; ++i) CUDA_CHECK(cudaStreamSynchronize(g.st[i]));
    });
}

// ---------------------------------------------------------------- sections

static double g_serial_ms = 0.0;  // for the stderr summaries only

// 1. Pinned (cudaHostAllocDefault, not write-combined), serial.
static void bench_serial(const float* hx, float* hy, const Samples& smp, int reps) {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    double ms = time_serial(Kern::Affine, hx, hy, s, reps);
    g_serial_ms = ms;
    emit("serial_pinned", "", ms, reps, count_bad(hy, smp, Kern::Affine));
    CUDA_CHECK(cudaStreamDestroy(s));
}

// 2. Pageable (malloc) host memory and synchronous cudaMemcpy: the naive program.
static void bench_pageable(const Samples& smp, int reps) {
    reps = std::min(reps, kPageableRepCap);
    float* x = static_cast<float*>(std::malloc(kBytes));
    float* y = static_cast<float*>(std::malloc(kBytes));
    if (!x || !y) { std::fprintf(stderr, "malloc of 2 x 4 GiB failed\n"); std::exit(1); }
    fill_x(x, kN);
    float *dx, *dy;
    CUDA_CHECK(cudaMalloc(&dx, kBytes));
    CUDA_CHECK(cudaMalloc(&dy, kBytes));
    poison(y, kBytes);  // also first-touches y, so no page faults land in the warm-up only
    double ms = wall_median_ms(reps, [&] {
        CUDA_CHECK(cudaMemcpy(dx, x, kBytes, cudaMemcpyHostToDevice));
        launch(Kern::Affine, dx, dy, kN, 0);  // legacy default stream, ordered after the copy
        // D2H into pageable memory returns only once the data is in y.
        CUDA_CHECK(cudaMemcpy(y, dy, kBytes, cudaMemcpyDeviceToHost));
    });
    emit("serial_pageable", "", ms, reps, count_bad(y, smp, Kern::Affine));
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));
    std::free(x);
    std::free(y);
}

// 3. Stream-count x chunk-size sweep of the hand-written pipeline, pinned memory.
static void bench_streams(const float* hx, float* hy, const Samples& smp, int reps) {
    Staging g = make_staging();
    // The reference points (3 streams x 16/64/256 MiB) are part of the sweep.
    const size_t ref_mib[3] = {16, 64, 256};
    double ref_ms[3] = {0, 0, 0};
    for (int S : kStreamCounts) {
        for (size_t cmib : kChunkMiB) {
            const size_t cb = cmib * MiB;
            double ms = time_pipeline(Kern::Affine, hx, hy, g, S, cb, reps);
            char extra[96];
            std::snprintf(extra, sizeof extra, "\"streams\":%d,\"chunk_bytes\":%zu,", S, cb);
            emit("pipeline_streams", extra, ms, reps, count_bad(hy, smp, Kern::Affine));
            for (int j = 0; j < 3; ++j)
                if (S == 3 && cmib == ref_mib[j]) ref_ms[j] = ms;
        }
    }
    for (int j = 0; j < 3; ++j) {
        std::fprintf(stderr, "reference point: 3 streams x %zu MiB: %.3f ms, %.3f GB/s in", ref_mib[j],
                     ref_ms[j], gbps_in(ref_ms[j]));
        if (g_serial_ms > 0) std::fprintf(stderr, ", %.2fx serial_pinned", g_serial_ms / ref_ms[j]);
        std::fprintf(stderr, "\n");
    }
    free_staging(g);
}

// 5. The link's ceilings for this workload, no pipeline: (a) 4 GiB in and 4 GiB out copied
// at once on two streams, no kernel; (b) zero-copy: one kernel reads x from and writes y to
// the pinned host arrays in place (mapped; 64-bit UVA maps cudaHostAlloc memory), so the
// SMs, not the copy engines, move the data both ways.
static void bench_ceiling(const float* hx, float* hy, const Samples& smp, int reps) {
    cudaStream_t a, b;
    CUDA_CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    float *dx, *dy;
    CUDA_CHECK(cudaMalloc(&dx, kBytes));
    CUDA_CHECK(cudaMalloc(&dy, kBytes));
    double ms = wall_median_ms(reps, [&] {
        CUDA_CHECK(cudaMemcpyAsync(dx, hx, kBytes, cudaMemcpyHostToDevice, a));
        CUDA_CHECK(cudaMemcpyAsync(hy, dy, kBytes, cudaMemcpyDeviceToHost, b));
        CUDA_CHECK(cudaStreamSynchronize(a));
        CUDA_CHECK(cudaStreamSynchronize(b));
    });
    emit("bidirectional_copies", "", ms, reps, 0);
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));

    const float4* mx; float4* my;
    CUDA_CHECK(cudaHostGetDevicePointer((void**)&mx, (void*)hx, 0));
    CUDA_CHECK(cudaHostGetDevicePointer((void**)&my, (void*)hy, 0));
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (int per_sm : {4, 8, 16}) {
        poison(hy, kBytes);
        double zc = wall_median_ms(reps, [&] {
            affine4<<<sms * per_sm, kBlock, 0, a>>>(mx, my, kN / 4, kA);
            CUDA_CHECK_LAUNCH();
            CUDA_CHECK(cudaStreamSynchronize(a));
        });
        char extra[64];
        std::snprintf(extra, sizeof extra, "\"blocks\":%d,", sms * per_sm);
        emit("zero_copy", extra, zc, reps, count_bad(hy, smp, Kern::Affine));
    }
    CUDA_CHECK(cudaStreamDestroy(a));
    CUDA_CHECK(cudaStreamDestroy(b));
}

// 4. Compute-heavy kernel: kernel only, serial, and 3 streams x 64 MiB.
static void bench_heavy(const float* hx, float* hy, const Samples& smp, int reps) {
    char kfield[32];
    std::snprintf(kfield, sizeof kfield, "\"k\":%d,", HEAVY_K);

    // (a) Kernel only, on device-resident data; the copies are untimed.
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *dx, *dy;
    CUDA_CHECK(cudaMalloc(&dx, kBytes));
    CUDA_CHECK(cudaMalloc(&dy, kBytes));
    CUDA_CHECK(cudaMemcpyAsync(dx, hx, kBytes, cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaMemsetAsync(dy, 0xFF, kBytes, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    double kern_ms = wall_median_ms(reps, [&] {
        launch(Kern::Heavy, dx, dy, kN, s);
        CUDA_CHECK(cudaStreamSynchronize(s));
    });
    poison(hy, kBytes);
    CUDA_CHECK(cudaMemcpyAsync(hy, dy, kBytes, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    emit("heavy_kernel_only", kfield, kern_ms, reps, count_bad(hy, smp, Kern::Heavy));
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));

    // (b) Serial pinned H2D + kernel + D2H.
    double ser_ms = time_serial(Kern::Heavy, hx, hy, s, reps);
    emit("heavy_serial", kfield, ser_ms, reps, count_bad(hy, smp, Kern::Heavy));
    CUDA_CHECK(cudaStreamDestroy(s));

    // (c) 3-stream pipeline at 64 MiB chunks.
    Staging g = make_staging();
    double pipe_ms = time_pipeline(Kern::Heavy, hx, hy, g, 3, 64 * MiB, reps);
    char extra[128];
    std::snprintf(extra, sizeof extra, "%s\"streams\":3,\"chunk_bytes\":%zu,", kfield, 64 * MiB);
    emit("heavy_pipeline", extra, pipe_ms, reps, count_bad(hy, smp, Kern::Heavy));
    free_staging(g);

    // serial = H2D + kernel + D2H, so (serial - kernel) / 2 estimates one 4 GiB copy.
    double copy_ms = 0.5 * (ser_ms - kern_ms);
    std::fprintf(stderr, "heavy: K=%d kernel-only %.3f ms over 4 GiB; est. one 4 GiB copy %.3f ms; "
                 "kernel/copy %.2f; pipeline speedup over serial %.2fx\n",
                 HEAVY_K, kern_ms, copy_ms, copy_ms > 0 ? kern_ms / copy_ms : 0.0, ser_ms / pipe_ms);
}

int main(int argc, char** argv) {
    const char* section = argc > 1 ? argv[1] : "all";
    bool all = !std::strcmp(section, "all");
    bool known = all;
    for (const char* s : {"serial", "pageable", "streams", "heavy", "ceiling"}) known |= !std::strcmp(section, s);
    char* end = nullptr;
    long reps = argc > 2 ? std::strtol(argv[2], &end, 10) : 3;
    if (argc > 3 || !known || (argc > 2 && (*end || reps < 1 || reps > 100000))) {
        std::fprintf(stderr, "usage: %s [serial|pageable|streams|heavy|ceiling|all] [reps=3]\n", argv[0]);
        return 2;
    }
    const bool do_serial = all || !std::strcmp(section, "serial");
    const bool do_pageable = all || !std::strcmp(section, "pageable");
    const bool do_streams = all || !std::strcmp(section, "streams");
    const bool do_heavy = all || !std::strcmp(section, "heavy");
    const bool do_ceiling = all || !std::strcmp(section, "ceiling");

    cudaDeviceProp prop = current_device_prop();
    std::fprintf(stderr, "device: %s (%d SMs, %d async copy engines), section=%s reps=%ld K=%d\n",
                 prop.name, prop.multiProcessorCount, prop.asyncEngineCount, section, reps, HEAVY_K);

    const Samples smp = make_samples(kN, do_heavy);
    const int r = (int)reps;

    if (do_serial || do_streams || do_heavy || do_ceiling) {
        float *hx, *hy;  // plain pinned memory: default flags, not write-combined
        CUDA_CHECK(cudaHostAlloc(&hx, kBytes, cudaHostAllocDefault));
        CUDA_CHECK(cudaHostAlloc(&hy, kBytes, cudaHostAllocDefault));
        fill_x(hx, kN);
        if (do_serial) bench_serial(hx, hy, smp, r);
        if (do_pageable) bench_pageable(smp, r);  // keeps the "all" output in section order
        if (do_streams) bench_streams(hx, hy, smp, r);
        if (do_heavy) bench_heavy(hx, hy, smp, r);
        if (do_ceiling) bench_ceiling(hx, hy, smp, r);
        CUDA_CHECK(cudaFreeHost(hx));
        CUDA_CHECK(cudaFreeHost(hy));
    } else if (do_pageable) {
        bench_pageable(smp, r);
    }
    return 0;
}
