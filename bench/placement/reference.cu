// placement.cu - nvcc/CUDA-runtime baseline for berth's memory-placement benchmarks.
//
// Measures what it costs to put data in each kind of memory and to reach it
// from the other side: pinned copies, write-combined vs plain pinned buffers,
// a kernel streaming mapped (zero-copy) host memory, and a random gather from a
// host table (read in place vs copied over first). The Rust benchmark measures
// the same things through berth in the same run on the same GPU; the two sets
// of JSON lines are matched by "bench" plus bytes / fraction and compared as
// ratios, so the ratios show berth's overhead, not the machine's.
//
// Build (on the GPU machine):  nvcc -O3 -arch=sm_90 -o placement placement.cu
// Run:                         ./placement [copy|copy_fresh|wc|mapped|gather|embedding|all] [reps=10]
//
// Every measurement: one warm-up, then `reps` timed repetitions, median reported.
// Two measurements cap reps at 5 (see kSlowRepCap); copies of 16 MiB or less take
// at least kShortCopyReps (see copy_reps).
// `copy_fresh` (not part of `all`): the copies with each size in allocations of its
// own, made fresh, as berth's benchmark makes them. Output: one JSON line per
// measurement on stdout; diagnostics (device name) on stderr.

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
// Fixed so the mapped_sum grid does not depend on the command line or the
// device query: 132 SMs (H200) x 4 blocks of 256 threads.
constexpr unsigned kMappedGrid = 132 * 4;
constexpr size_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;
// The 1 GiB-copy gather and the CPU read of write-combined memory (uncached,
// can be far below 1 GB/s) are the slow ones; capping their reps keeps the
// whole program well under two minutes. The Rust side applies the same cap.
constexpr int kSlowRepCap = 5;

// ---------------------------------------------------------------- kernels

// Assumes blockDim.x == kBlock (power of two), which is how it is launched.
__global__ void mapped_sum(const float4* in, size_t n4, float* partial) {
    __shared__ float tile[kBlock];
    float acc = 0.0f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = in[i];
        acc += v.x + v.y + v.z + v.w;
    }
    tile[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = tile[0];
}

__global__ void gather(const float* table, const uint32_t* idx, size_t k, float* out) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < k) out[i] = table[idx[i]];
}

// ---------------------------------------------------------------- host helpers

// splitmix64: deterministic and fast enough to fill 1 GiB in well under a second.
// Sparse embedding lookup: out[b*dim4 + j] = table[ids[b]*dim4 + j], one thread
// per float4 of output, so consecutive threads read consecutive parts of a row.
__global__ void embedding_gather(unsigned dim4, const float4* table, const uint32_t* ids,
                                 size_t batch, float4* out) {
    size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t d = dim4;
    if (d == 0 || g >= batch * d) return;
    size_t b = g / d, j = g % d;
    out[g] = table[(size_t)ids[b] * d + j];
}

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static uint64_t next_u64() {
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
// 24 random bits -> exactly representable float in [-1, 1).
static float uniform_pm1() { return (float)(next_u64() >> 40) * (2.0f / 16777216.0f) - 1.0f; }
static void fill_random_bytes(void* p, size_t bytes) {  // bytes is a multiple of 8 here
    uint64_t* w = static_cast<uint64_t*>(p);
    for (size_t i = 0; i < bytes / 8; ++i) w[i] = next_u64();
}
static void fill_random_floats(float* p, size_t n) {
    for (size_t i = 0; i < n; ++i) p[i] = uniform_pm1();
}

// Number of differing bytes; memcmp first because the common case is "equal".
static size_t count_mismatch(const void* a, const void* b, size_t bytes) {
    if (std::memcmp(a, b, bytes) == 0) return 0;
    const unsigned char *x = static_cast<const unsigned char*>(a), *y = static_cast<const unsigned char*>(b);
    size_t bad = 0;
    for (size_t i = 0; i < bytes; ++i) bad += x[i] != y[i];
    return bad;
}

// One warm-up (first-touch, TLB, clocks), then each repetition timed on its own
// with an event pair on `s` and a stream sync, so one slow repetition only
// moves the median, not the result.
template <typename Op>
static double gpu_median_ms(cudaStream_t s, int reps, Op op) {
    op();
    CUDA_CHECK(cudaStreamSynchronize(s));
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<double> ms(reps);
    for (int r = 0; r < reps; ++r) {
        CUDA_CHECK(cudaEventRecord(start, s));
        op();
        CUDA_CHECK(cudaEventRecord(stop, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        float t = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
        ms[r] = t;
    }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    return median(ms);
}

// The check copies go through the same non-blocking stream: a plain cudaMemcpy
// runs on the legacy stream, which does not order against non-blocking streams.
static void copy_sync(cudaStream_t s, void* dst, const void* src, size_t bytes) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
}

static void emit_bw(const char* bench, size_t bytes, double ms, int reps, size_t bad) {
    std::printf("{\"impl\":\"nvcc\",\"bench\":\"%s\",\"bytes\":%zu,\"median_ms\":%.6f,"
                "\"gbps\":%.3f,\"reps\":%d,\"bad\":%zu}\n",
                bench, bytes, ms, (double)bytes / (ms * 1e-3) / 1e9, reps, bad);
    std::fflush(stdout);
}

// ---------------------------------------------------------------- sections

// Copies of 16 MiB or less take tens of microseconds at most, where one slow
// repetition of ten moves the median by several percent: they take at least this
// many repetitions (berth's benchmark does the same).
static const int kShortCopyReps = 100;
static int copy_reps(size_t bytes, int reps) {
    return bytes <= 16 * MiB ? std::max(reps, kShortCopyReps) : reps;
}

// One size's H2D then D2H copies, timed and checked; `suffix` names the section
// ("" or "_fresh"). The device range is poisoned first, so the check proves the
// timed copies (not an earlier, larger one) put the bytes there; the host
// destination is poisoned before each direction for the same reason.
static void time_copies(cudaStream_t s, int reps, const unsigned char* src, unsigned char* dst,
                        unsigned char* dev, size_t b, const char* suffix) {
    char name[16];
    CUDA_CHECK(cudaMemsetAsync(dev, 0xA5, b, s));
    double ms = gpu_median_ms(s, reps, [&] {
        CUDA_CHECK(cudaMemcpyAsync(dev, src, b, cudaMemcpyHostToDevice, s));
    });
    std::memset(dst, 0x5A, b);
    copy_sync(s, dst, dev, b);
    std::snprintf(name, sizeof name, "h2d%s", suffix);
    emit_bw(name, b, ms, reps, count_mismatch(dst, src, b));

    // D2H: the device now holds src's bytes (checked just above).
    std::memset(dst, 0x5A, b);
    ms = gpu_median_ms(s, reps, [&] {
        CUDA_CHECK(cudaMemcpyAsync(dst, dev, b, cudaMemcpyDeviceToHost, s));
    });
    std::snprintf(name, sizeof name, "d2h%s", suffix);
    emit_bw(name, b, ms, reps, count_mismatch(dst, src, b));
}

static const size_t kCopySizes[] = {4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB, 1 * GiB};

// 1. Pinned (not write-combined) <-> device copies over a size sweep: prefixes of
// 1 GiB buffers.
static void bench_copy(cudaStream_t s, int reps) {
    const size_t maxb = 1 * GiB;
    unsigned char *src, *dst, *dev;
    CUDA_CHECK(cudaHostAlloc(&src, maxb, cudaHostAllocDefault));
    CUDA_CHECK(cudaHostAlloc(&dst, maxb, cudaHostAllocDefault));
    CUDA_CHECK(cudaMalloc(&dev, maxb));
    fill_random_bytes(src, maxb);  // every size copies a prefix of this
    for (size_t b : kCopySizes) time_copies(s, copy_reps(b, reps), src, dst, dev, b, "");
    CUDA_CHECK(cudaFree(dev));
    CUDA_CHECK(cudaFreeHost(dst));
    CUDA_CHECK(cudaFreeHost(src));
}

// 1b. The same copies with every size in allocations of its own (host source and
// destination, device buffer), made fresh for each size as berth's benchmark makes
// them: tells the placement of the pages from the cost of the calls.
static void bench_copy_fresh(cudaStream_t s, int reps) {
    for (size_t b : kCopySizes) {
        unsigned char *src, *dst, *dev;
        CUDA_CHECK(cudaHostAlloc(&src, b, cudaHostAllocDefault));
        CUDA_CHECK(cudaHostAlloc(&dst, b, cudaHostAllocDefault));
        CUDA_CHECK(cudaMalloc(&dev, b));
        fill_random_bytes(src, b);
        time_copies(s, copy_reps(b, reps), src, dst, dev, b, "_fresh");
        CUDA_CHECK(cudaFree(dev));
        CUDA_CHECK(cudaFreeHost(dst));
        CUDA_CHECK(cudaFreeHost(src));
    }
}

// Wrapping sum of 64-bit words. noinline + the result being printed keep the
// compiler from dropping or hoisting the reads out of the timing loop.
__attribute__((noinline)) static uint64_t sum_words(const uint64_t* p, size_t n) {
    uint64_t acc = 0;
    for (size_t i = 0; i < n; ++i) acc += p[i];
    return acc;
}

// 2. Write-combined vs plain pinned: the GPU-side upload speed, and the
// CPU-side read speed (WC is uncached for the CPU, which is its cost).
static void bench_wc(cudaStream_t s, int reps) {
    const size_t b = 256 * MiB, nw = b / 8;
    std::vector<uint64_t> pageable(nw);
    fill_random_bytes(pageable.data(), b);
    const uint64_t want = sum_words(pageable.data(), nw);

    uint64_t *wc, *plain;
    unsigned char *dev, *back;
    CUDA_CHECK(cudaHostAlloc(&wc, b, cudaHostAllocWriteCombined));
    CUDA_CHECK(cudaHostAlloc(&plain, b, cudaHostAllocDefault));
    CUDA_CHECK(cudaHostAlloc(&back, b, cudaHostAllocDefault));
    CUDA_CHECK(cudaMalloc(&dev, b));
    std::memcpy(wc, pageable.data(), b);  // CPU writes to WC memory are fast
    std::memcpy(plain, pageable.data(), b);

    struct Kind { const char* h2d; const char* cpu; const uint64_t* buf; int cpu_reps; };
    const Kind kinds[] = {{"h2d_wc", "cpu_read_wc", wc, std::min(reps, kSlowRepCap)},
                          {"h2d_plain", "cpu_read_plain", plain, reps}};
    for (const Kind& k : kinds) {
        CUDA_CHECK(cudaMemsetAsync(dev, 0xA5, b, s));
        double ms = gpu_median_ms(s, reps, [&] {
            CUDA_CHECK(cudaMemcpyAsync(dev, k.buf, b, cudaMemcpyHostToDevice, s));
        });
        std::memset(back, 0x5A, b);
        copy_sync(s, back, dev, b);
        emit_bw(k.h2d, b, ms, reps, count_mismatch(back, pageable.data(), b));
    }
    for (const Kind& k : kinds) {
        uint64_t got = 0;
        size_t bad = 0;
        double ms = wall_median_ms(k.cpu_reps, [&] {
            got = sum_words(k.buf, nw);
            bad += got != want;  // every repetition must read the right data
        });
        // Sum as a hex string: JSON numbers lose precision above 2^53.
        std::printf("{\"impl\":\"nvcc\",\"bench\":\"%s\",\"bytes\":%zu,\"median_ms\":%.6f,"
                    "\"gbps\":%.3f,\"reps\":%d,\"sum\":\"0x%016llx\",\"bad\":%zu}\n",
                    k.cpu, b, ms, (double)b / (ms * 1e-3) / 1e9, k.cpu_reps,
                    (unsigned long long)got, bad);
        std::fflush(stdout);
    }
    CUDA_CHECK(cudaFree(dev));
    CUDA_CHECK(cudaFreeHost(back));
    CUDA_CHECK(cudaFreeHost(plain));
    CUDA_CHECK(cudaFreeHost(wc));
}

// 3. A kernel streaming 1 GiB of mapped host memory over the bus.
static void bench_mapped(cudaStream_t s, int reps) {
    const size_t n4 = size_t(1) << 26, n = n4 * 4, b = n * sizeof(float);  // 1 GiB
    float* host;
    CUDA_CHECK(cudaHostAlloc(&host, b, cudaHostAllocMapped));
    fill_random_floats(host, n);
    float4* dptr;
    CUDA_CHECK(cudaHostGetDevicePointer((void**)&dptr, host, 0));
    float* partial;
    CUDA_CHECK(cudaMalloc(&partial, kMappedGrid * sizeof(float)));
    // 0xFF bytes are a NaN: any partial the kernel fails to write poisons the sum.
    CUDA_CHECK(cudaMemsetAsync(partial, 0xFF, kMappedGrid * sizeof(float), s));

    double ms = gpu_median_ms(s, reps, [&] {
        mapped_sum<<<kMappedGrid, kBlock, 0, s>>>(dptr, n4, partial);
        CUDA_CHECK_LAUNCH();
    });

    std::vector<float> hp(kMappedGrid);
    copy_sync(s, hp.data(), partial, kMappedGrid * sizeof(float));
    double got = 0.0, want = 0.0, abs_sum = 0.0;
    for (float p : hp) got += p;
    for (size_t i = 0; i < n; ++i) { want += host[i]; abs_sum += std::fabs(host[i]); }
    // Relative to sum |x|: the plain sum of values in [-1,1) is near zero,
    // where a pure relative error would flag harmless float rounding.
    double rel = std::fabs(got - want) / abs_sum;
    size_t bad = (rel <= 1e-5) ? 0 : 1;  // NaN fails the comparison -> bad
    if (bad) std::fprintf(stderr, "mapped_sum mismatch: got %.9g want %.9g rel %.3g\n", got, want, rel);
    emit_bw("mapped_seq_read", b, ms, reps, bad);
    CUDA_CHECK(cudaFree(partial));
    CUDA_CHECK(cudaFreeHost(host));
}

// 4. Random gather from a 1 GiB host table: read in place through the mapped
// pointer, or copy the whole table over first. The cross-over in the touched
// fraction is the point of the benchmark.
static void bench_gather(cudaStream_t s, int reps) {
    const size_t n = size_t(1) << 28, b = n * sizeof(float);  // 1 GiB of floats
    const double fractions[] = {0.0001, 0.001, 0.01, 0.1};
    const size_t kmax = (size_t)(0.1 * (double)n);

    float* table;
    CUDA_CHECK(cudaHostAlloc(&table, b, cudaHostAllocMapped));
    fill_random_floats(table, n);
    float* table_mapped;
    CUDA_CHECK(cudaHostGetDevicePointer((void**)&table_mapped, table, 0));

    // One index array for the largest k; each fraction uses its prefix (a
    // prefix of uniform random indices is itself uniform). Uploaded once, untimed.
    std::vector<uint32_t> idx(kmax);
    for (auto& v : idx) v = (uint32_t)(next_u64() >> 36);  // 28 bits: uniform over the table
    uint32_t* didx;
    float *dout, *dtable;
    CUDA_CHECK(cudaMalloc(&didx, kmax * sizeof(uint32_t)));
    CUDA_CHECK(cudaMalloc(&dout, kmax * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&dtable, b));
    copy_sync(s, didx, idx.data(), kmax * sizeof(uint32_t));
    // NaN-poison the device copy so gather_copy fails the check if the copy is skipped.
    CUDA_CHECK(cudaMemsetAsync(dtable, 0xFF, b, s));

    std::vector<float> want(kmax), got(kmax);
    for (size_t i = 0; i < kmax; ++i) want[i] = table[idx[i]];

    for (double f : fractions) {
        const size_t k = (size_t)(f * (double)n);  // truncated: 26843, 268435, 2684354, 26843545
        const unsigned grid = (unsigned)((k + kBlock - 1) / kBlock);
        struct Strategy { const char* name; bool copy; int reps; };
        const Strategy strategies[] = {{"gather_mapped", false, reps},
                                       {"gather_copy", true, std::min(reps, kSlowRepCap)}};
        for (const Strategy& st : strategies) {
            CUDA_CHECK(cudaMemsetAsync(dout, 0xFF, k * sizeof(float), s));  // NaN never compares equal
            double ms = gpu_median_ms(s, st.reps, [&] {
                if (st.copy)
                    CUDA_CHECK(cudaMemcpyAsync(dtable, table, b, cudaMemcpyHostToDevice, s));
                gather<<<grid, kBlock, 0, s>>>(st.copy ? dtable : table_mapped, didx, k, dout);
                CUDA_CHECK_LAUNCH();
            });
            copy_sync(s, got.data(), dout, k * sizeof(float));
            size_t bad = 0;
            for (size_t i = 0; i < k; ++i) bad += !(got[i] == want[i]);
            std::printf("{\"impl\":\"nvcc\",\"bench\":\"%s\",\"fraction\":%g,\"k\":%zu,"
                        "\"median_ms\":%.6f,\"maccess_per_s\":%.3f,\"reps\":%d,\"bad\":%zu}\n",
                        st.name, f, k, ms, (double)k / (ms * 1e-3) / 1e6, st.reps, bad);
            std::fflush(stdout);
        }
    }
    CUDA_CHECK(cudaFree(dtable));
    CUDA_CHECK(cudaFree(dout));
    CUDA_CHECK(cudaFree(didx));
    CUDA_CHECK(cudaFreeHost(table));
}

// 5. Sparse embedding lookup: 65536 random rows of 128 floats (512 B) from a
// 2 GiB mapped host table, read in place. GB/s counts the useful bytes gathered.
static void bench_embedding(cudaStream_t s, int reps) {
    const unsigned dim4 = 32;
    const size_t rows = 2 * GiB / (dim4 * sizeof(float4)), batch = 65536;
    const size_t n4 = rows * dim4, out4 = batch * dim4;
    float4* table;
    CUDA_CHECK(cudaHostAlloc(&table, n4 * sizeof(float4), cudaHostAllocMapped));
    fill_random_floats((float*)table, n4 * 4);
    float4* table_mapped;
    CUDA_CHECK(cudaHostGetDevicePointer((void**)&table_mapped, table, 0));
    std::vector<uint32_t> ids(batch);
    for (auto& v : ids) v = (uint32_t)(next_u64() % rows);
    uint32_t* dids;
    float4* dout;
    CUDA_CHECK(cudaMalloc(&dids, batch * sizeof(uint32_t)));
    CUDA_CHECK(cudaMalloc(&dout, out4 * sizeof(float4)));
    copy_sync(s, dids, ids.data(), batch * sizeof(uint32_t));
    CUDA_CHECK(cudaMemsetAsync(dout, 0xFF, out4 * sizeof(float4), s));  // NaN poison
    const unsigned grid = (unsigned)((out4 + kBlock - 1) / kBlock);
    double ms = gpu_median_ms(s, reps, [&] {
        embedding_gather<<<grid, kBlock, 0, s>>>(dim4, table_mapped, dids, batch, dout);
        CUDA_CHECK_LAUNCH();
    });
    std::vector<float4> got(out4);
    copy_sync(s, got.data(), dout, out4 * sizeof(float4));
    size_t bad = 0;
    for (size_t b = 0; b < batch; ++b)
        for (size_t j = 0; j < dim4; ++j) {
            const float4 w = table[(size_t)ids[b] * dim4 + j], g = got[b * dim4 + j];
            bad += !(g.x == w.x && g.y == w.y && g.z == w.z && g.w == w.w);
        }
    const double useful = (double)(out4 * sizeof(float4));
    std::printf("{\"impl\":\"nvcc\",\"bench\":\"embedding\",\"rows\":%zu,\"dim\":%u,"
                "\"table_bytes\":%zu,\"median_ms\":%.6f,\"gbps\":%.4f,\"mrows_per_s\":%.4f,"
                "\"reps\":%d,\"bad\":%zu}\n",
                batch, dim4 * 4, n4 * sizeof(float4), ms, useful / (ms * 1e-3) / 1e9,
                (double)batch / (ms * 1e-3) / 1e6, reps, bad);
    std::fflush(stdout);
    CUDA_CHECK(cudaFree(dout));
    CUDA_CHECK(cudaFree(dids));
    CUDA_CHECK(cudaFreeHost(table));
}

int main(int argc, char** argv) {
    const char* section = argc > 1 ? argv[1] : "all";
    bool all = !std::strcmp(section, "all");
    bool known = all;
    for (const char* s : {"copy", "copy_fresh", "wc", "mapped", "gather", "embedding"}) known |= !std::strcmp(section, s);
    char* end = nullptr;
    long reps = argc > 2 ? std::strtol(argv[2], &end, 10) : 10;
    if (argc > 3 || !known || (argc > 2 && (*end || reps < 1 || reps > 100000))) {
        std::fprintf(stderr, "usage: %s [copy|copy_fresh|wc|mapped|gather|embedding|all] [reps=10]\n", argv[0]);
        return 2;
    }

    cudaDeviceProp prop = current_device_prop();
    std::fprintf(stderr, "device: %s (%d SMs), section=%s reps=%ld\n",
                 prop.name, prop.multiProcessorCount, section, reps);
    if (!prop.canMapHostMemory) { std::fprintf(stderr, "device cannot map host memory\n"); return 1; }

    // Non-blocking: no implicit ordering with the legacy default stream, so
    // nothing else the runtime does there lands inside a timed interval.
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int r = (int)reps;
    if (all || !std::strcmp(section, "copy")) bench_copy(s, r);
    if (!std::strcmp(section, "copy_fresh")) bench_copy_fresh(s, r);
    if (all || !std::strcmp(section, "wc")) bench_wc(s, r);
    if (all || !std::strcmp(section, "mapped")) bench_mapped(s, r);
    if (all || !std::strcmp(section, "gather")) bench_gather(s, r);
    if (all || !std::strcmp(section, "embedding")) bench_embedding(s, r);
    CUDA_CHECK(cudaStreamDestroy(s));
    return 0;
}
